#!/usr/bin/env bash
# reproduce.sh — regenerates every committed result of one kind of machine,
# from one clean commit, into results/KIND/ (one host per folder): the
# suites' records, the CPU rate and plan runs (cpu), the figures, and the
# findings section of results/README.md (plots/findings.py); every record
# is checked with `deqbench validate --strict`, and (cpu) the first
# configuration of each records file replayed for a few steps at this build
# (scripts/replay.py --write: results/cpu/replay.json).
#
#   scripts/reproduce.sh cpu|gpu [--resume] [--budget SECONDS]
#   scripts/reproduce.sh cpu|gpu --finish
#
# cpu: two lanes side by side, each pinned to one core and running its
#   shard (--shard i/2 --lanes 2: every record says it ran as one of two
#   lanes, and `report` labels its times) of every suite with threads=1:
#   gc-vs-deq (3 seeds; DEQs with full and limited memory),
#   gc-vs-deq-trellisnet, eps-train (3 seeds for unroll and every eps),
#   default (3 seeds), depth, budget, vs-pytorch; then eps-infer (on
#   eps-train's saved parameters, 3 seeds each) in one lane, nothing
#   beside it; then, one after the other on core 0 with nothing of ours
#   beside them, `deqbench price` of every shape the time suites ran
#   (results/cpu/prices.jsonl: the times the findings can take from
#   prices, as `report --price` gives them, where two lanes shared the
#   machine), scripts/cpu-rate.sh and `deqbench plan --run` on the budget
#   suite's model. results/cpu/reproduce.log says how long each took.
# gpu: one lane, device=cuda: gc-vs-deq-gpu (the paper-scale suite, 3
#   seeds), gc-vs-deq, gc-vs-deq-trellisnet, depth, eps-train, eps-infer
#   (default is scripts/run.sh's CPU reference only). Not yet run
#   (results/gpu/README.md has the steps for a lent machine without
#   packages or git).
# --budget S (1 to 10^9 seconds; default 540 for gpu, none for cpu): start
#   nothing after S seconds; what runs then (a suite, cpu-rate.sh, plan)
#   gets SIGTERM, stops after its current step and keeps its record; the
#   script then skips the rest (the figures and findings too) and exits 3:
#   the same command with --resume goes on where it stopped.
# --finish: no runs; only the checks, the figures and the findings (where
#   the runs were made on a machine without matplotlib).
# Before the checks (both ways): an interrupted record whose configuration
#   has an ok record in the same file (the suite's --resume ran it again)
#   moves to results/KIND/superseded/, so that rows count finished runs.
# Ctrl-C (SIGINT) or SIGTERM: passed on, once, to what runs (each suite,
#   cpu-rate.sh or plan runs in a process group of its own, so the
#   terminal's signal reaches only this script); they stop after their
#   current step, keeping their records, and the script waits for them and
#   exits 130 / 143 (go on with --resume). A second signal is passed on
#   again, which ends them at once (without the interrupted runs' records).
#
# A fresh start (no --resume) demands a clean work tree (no tracked
# change), builds DQ_BUILDDIR (default build-reproduce) from it unless
# DQ_SKIP_SETUP=1 (a build made elsewhere, as it is), demands a build of
# that commit without "-dirty", and only then empties results/KIND/ (but
# its README.md; git history keeps the old files). --resume keeps what is
# there and does not rebuild. Runs already recorded are skipped (suite
# --resume). Without git (a copy of the tree), the build's commit stands.
# DQ_REPRODUCE_ARGS: key=value words added to every suite and plan run (a
# smoke test of this script, e.g. "steps=3 warmup_steps=1"; such records
# are not results).
# Exit status: 0 done, 2 bad use, a dirty tree or a stale build, 3 out of
# budget (go on with --resume), 130 / 143 interrupted (go on with
# --resume), 1 a run or a check failed.
# shellcheck disable=SC2317  # (the functions lane and two call)
set -euo pipefail

# A shell without job control starts its background commands with SIGINT
# ignored, and bash cannot trap a signal that was ignored when it started:
# start again (before the cd: $0 may be relative) with the default actions,
# so that a kill -INT stops this script as Ctrl-C does.
if [ -z "${DQ_REPRODUCE_SIGNALS:-}" ] && [ -r /proc/$$/status ] &&
	(($(awk '/^SigIgn:/ { print "0x" $2 }' /proc/$$/status) & 0x4002)) &&
	env --default-signal=INT,TERM true 2>/dev/null; then
	DQ_REPRODUCE_SIGNALS=1 exec env --default-signal=INT,TERM "$BASH" "$0" "$@"
fi
cd "$(dirname "$0")/.."

# wait -n -p (the budget's clock) came with bash 5.1
if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501)); then
	echo "reproduce: needs bash 5.1 or later (this is $BASH_VERSION)" >&2
	exit 2
fi

usage() {
	echo "usage: scripts/reproduce.sh cpu|gpu [--resume] [--budget SECONDS] | --finish" >&2
	exit 2
}
kind="${1:-}"
[ "$kind" = cpu ] || [ "$kind" = gpu ] || usage
shift
resume=0
finish=0
budget=""
budget_given=0
[ "$kind" = gpu ] && budget=540
while (($#)); do
	case "$1" in
	--resume) resume=1 ;;
	--finish) finish=1 ;;
	--budget)
		[ $# -ge 2 ] || usage
		budget="$2"
		budget_given=1
		shift
		;;
	--budget=*)
		budget="${1#--budget=}"
		budget_given=1
		;;
	*) usage ;;
	esac
	shift
done
# (at most 10 digits before the arithmetic: bash's integers wrap silently)
if [ "$budget_given" = 1 ] && ! { [[ "$budget" =~ ^[0-9]{1,10}$ ]] &&
	((10#$budget >= 1 && 10#$budget <= 1000000000)); }; then
	echo "reproduce: --budget '$budget': give a whole number of seconds from 1 to 1000000000 (without --budget: no limit on cpu, 540 on gpu)" >&2
	exit 2
fi
[ -z "$budget" ] || budget=$((10#$budget))

builddir="${DQ_BUILDDIR:-build-reproduce}"
read -r -a extra <<<"${DQ_REPRODUCE_ARGS:-}"
bin="$builddir/bench/deqbench"
out="results/$kind"
log="$out/reproduce.log"
t0=$(date +%s)
export PATH="$PATH:/usr/local/cuda/bin"

say() { echo "reproduce: $*" | tee -a "$log" >&2; }
die() {
	echo "reproduce: $*" >&2
	exit 2
}
# jq-free JSON reads (a lent GPU machine has python3, not jq)
build_commit() {
	"$bin" env | python3 -c 'import json,sys; print(json.load(sys.stdin)["build"]["git_commit"])'
}
have_git=0
git rev-parse --git-dir >/dev/null 2>&1 && have_git=1

# check_build: the build exists, is of HEAD (with git) and clean.
check_build() {
	local bc
	[ -x "$bin" ] || die "no build at $bin; start without --resume (or build it)"
	bc=$(build_commit)
	case "$bc" in
	*-dirty | unknown) die "$bin was built from $bc: not one clean commit" ;;
	esac
	if ((have_git)) && [ "$bc" != "$(git rev-parse --short=12 HEAD)" ]; then
		die "$bin was built from $bc, HEAD is $(git rev-parse --short=12 HEAD): records of two commits would mix; start without --resume"
	fi
}

if ((!resume && !finish)); then
	if ((have_git)) && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
		die "the work tree has uncommitted changes; commit or stash them (records must come from one clean commit)"
	fi
	if [ "${DQ_SKIP_SETUP:-0}" != 1 ]; then
		if [ "$kind" = gpu ]; then
			DQ_BUILDDIR="$builddir" scripts/setup.sh -Dcuda=enabled
		else
			DQ_BUILDDIR="$builddir" scripts/setup.sh
		fi
	fi
	check_build
	mkdir -p "$out"
	find "$out" -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
	say "fresh start at $(build_commit) on $(hostname), $(date -u +%FT%TZ)"
else
	check_build
fi
# OpenBLAS's generic fallback would make every CPU time describe it, not
# the machine (scripts/blas-coretype.sh); a variable the user set wins
if [ "$kind" = cpu ] && core=$(scripts/blas-coretype.sh "$bin") &&
	[ -n "$core" ]; then
	export OPENBLAS_CORETYPE="$core"
	say "OpenBLAS falls back to generic kernels on this CPU model; OPENBLAS_CORETYPE=$core for every run (deqbench env: host.blas)"
fi
mkdir -p "$out/logs" results/params
shopt -s nullglob

# left: seconds of the budget left (a large number without a budget)
left() {
	if [ -z "$budget" ]; then
		echo 1000000000
	else
		echo $((budget - ($(date +%s) - t0)))
	fi
}

# What runs goes into a process group of its own (setsid), so that a
# terminal's Ctrl-C reaches only this script, which passes it on once: a
# second signal ends deqbench at once, without the interrupted run's
# record. $running/TAG.pgid holds each group's id while it runs; the one
# who renames it to .sent (the budget's clock or the trap) signals it, so
# a group is never signalled twice by the two. $running/stop: the signal
# that stops the script.
running="$out/logs/running"
rm -rf "$running"
mkdir -p "$running"
# deqbench starts with the default actions, not the ignored INT that
# background commands inherit, so a signal before it installs its handler
# still stops it
# shellcheck disable=SC2054  # one word: env's list of signals
dflt=(env --default-signal=INT,TERM)
"${dflt[@]}" true 2>/dev/null || dflt=()

# signal_once SIG FILE: SIG to the process group FILE names, unless the
# clock or the trap has already signalled it.
signal_once() {
	mv "$2" "$2.sent" 2>/dev/null || return 0
	kill -s "$1" -- "-$(<"$2.sent")" 2>/dev/null || true
}

# limited TAG LOG CMD...: CMD in a process group of its own, its output
# appended to LOG, stopped by SIGTERM when the budget runs out. Sets lrc to
# CMD's status (empty when it did not start); returns 0 done, 1 failed, 3 out of budget, 4 interrupted
# (the trap signalled it). Run only in a lane (a background subshell that
# ignores INT and TERM): the trap's wait is for the lanes.
limited() {
	local tag="$1" log="$2" l f pid clock who timed_out=0
	shift 2
	lrc=""
	[ -e "$running/stop" ] && return 4
	l=$(left)
	((l > 0)) || return 3
	f="$running/$tag.pgid"
	# setsid does not fork here (a background command is never a group
	# leader without job control), so $! is the group's id
	setsid ${dflt[@]+"${dflt[@]}"} "$@" >>"$log" 2>&1 &
	pid=$!
	echo "$pid" >"$f"
	[ -e "$running/stop" ] && signal_once "$(<"$running/stop")" "$f"
	sleep "$l" &
	clock=$!
	lrc=0
	wait -n -p who "$pid" "$clock" || lrc=$?
	if [ "$who" = "$clock" ]; then
		timed_out=1
		signal_once TERM "$f"
		lrc=0
		wait "$pid" || lrc=$?
	else
		kill -KILL "$clock" 2>/dev/null || true
		wait "$clock" 2>/dev/null || true
	fi
	rm -f "$f" "$f.sent"
	if [ -e "$running/stop" ]; then return 4; fi
	if ((lrc == 0)); then return 0; fi
	if ((timed_out)); then return 3; fi
	return 1
}

# suite NAME [args...]: one suite (or shard) with --resume into
# $out/NAME.jsonl, within the budget, pinned to core $pin when set; as
# limited.
pin=""
suite() {
	local name="$1" s rc=0 tag
	shift
	s=$(date +%s)
	tag="$name${pin:+.$pin}"
	limited "$tag" "$out/logs/$tag.log" ${pin:+taskset -c "$pin"} "$bin" suite \
		"bench/suites/$name.json" --resume out="$out/$name.jsonl" "$@" \
		${extra[@]+"${extra[@]}"} || rc=$?
	[ -z "$lrc" ] || ((rc == 4)) ||
		say "$name $* exit $lrc after $(($(date +%s) - s)) s"
	return "$rc"
}

# worst A B: the status that wins: 4 interrupted, 3 out of budget, 1 failed
worst() { echo $(($1 > $2 ? $1 : $2)); }

# lane FUNC ARGS...: FUNC in a background subshell that ignores INT and
# TERM (this script's trap stops what it runs); waits for it. Its status.
lane() {
	local rc=0
	(
		trap '' INT TERM
		"$@"
	) &
	wait $! || rc=$?
	return "$rc"
}

# shard I SUITE...: shard I/2 of each suite on core I, threads=1, its
# records marked as one of two lanes (suite --lanes 2: `report` labels
# their times `beside`).
shard() {
	local i="$1" name rc=0 r
	shift
	pin="$i"
	for name in "$@"; do
		suite "$name" --shard "$i/2" --lanes 2 threads=1 && continue
		r=$?
		((r == 4)) && return 4
		rc=$(worst "$rc" "$r")
	done
	return "$rc"
}

# two SUITE...: the suites as two lanes side by side; 0, 1, 3 or 4.
two() {
	local a b ra=0 rb=0
	(
		trap '' INT TERM
		shard 0 "$@"
	) &
	a=$!
	(
		trap '' INT TERM
		shard 1 "$@"
	) &
	b=$!
	wait "$a" || ra=$?
	wait "$b" || rb=$?
	return "$(worst "$ra" "$rb")"
}

# the gpu suites one after the other; stops at the first out of budget
gpu_suites() {
	local name rc=0 r
	for name in gc-vs-deq-gpu gc-vs-deq gc-vs-deq-trellisnet depth \
		eps-train eps-infer; do
		suite "$name" device=cuda && continue
		r=$?
		((r >= 3)) && return "$r"
		rc=1
	done
	return "$rc"
}

# The suites whose step times are answers: priced alone on core 0.
priced_suites=(gc-vs-deq gc-vs-deq-trellisnet eps-train default depth budget)

# price of each shape of the time suites' records, alone on core 0 (kept
# on --resume when done); as limited.
prices() {
	local name r=0
	[ -s "$out/prices.jsonl" ] && return 0
	rm -f "$out/prices.jsonl.tmp"
	: >"$out/logs/prices.log"
	for name in "${priced_suites[@]}"; do
		[ -s "$out/$name.jsonl" ] || continue
		limited prices "$out/logs/prices.log" taskset -c 0 "$bin" price \
			"$out/$name.jsonl" core=0 out="$out/prices.jsonl.tmp" || r=$?
		((r >= 3)) && return "$r"
		((r)) && break
	done
	((r)) || mv "$out/prices.jsonl.tmp" "$out/prices.jsonl"
	say "prices exit $r"
	return "$r"
}

# prices, cpu-rate.sh (core 0) and plan --run on the budget suite's
# model, each once (kept on --resume when done), within the budget.
cpu_extras() {
	local rc=0 r b pf
	prices || rc=$?
	((rc >= 3)) && return "$rc"
	if [ ! -s "$out/cpu-rate/summary.txt" ]; then
		mkdir -p "$out/cpu-rate"
		: >"$out/logs/cpu-rate.log"
		limited cpu-rate "$out/logs/cpu-rate.log" env DQ_BUILDDIR="$builddir" \
			OUT_DIR="$out/cpu-rate" CORE=0 scripts/cpu-rate.sh || rc=$?
		((rc >= 3)) && return "$rc"
		((lrc)) || cp "$out/logs/cpu-rate.log" "$out/cpu-rate/summary.txt"
		say "cpu-rate exit $lrc"
	fi
	if [ ! -s "$out/plan.jsonl" ]; then
		python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["base"]; b.pop("out",None); json.dump(b,open(sys.argv[2],"w"),indent=1)' \
			bench/suites/budget.json "$out/plan-base.json"
		rm -f "$out/plan.jsonl.tmp"
		r=0
		# the prices measured above (the budget suite's shape), not new ones
		pf=()
		[ -s "$out/prices.jsonl" ] && pf=(--price "$out/prices.jsonl")
		for b in "60 6" "200 12"; do
			limited plan "$out/logs/plan.log" taskset -c 0 "$bin" plan \
				"$out/plan-base.json" budget_mib="${b% *}" \
				out="$out/plan.jsonl.tmp" --run "${b#* }" \
				${pf[@]+"${pf[@]}"} ${extra[@]+"${extra[@]}"} || r=$?
			((r >= 3)) && return "$r"
		done
		((r)) || mv "$out/plan.jsonl.tmp" "$out/plan.jsonl"
		say "plan exit $r"
		rc=$(worst "$rc" "$r")
	fi
	return "$rc"
}

# on_signal SIG: the trap of INT and TERM.
on_signal() {
	local f
	if [ -e "$running/stop" ]; then # a second one: at once
		for f in "$running"/*.sent; do
			kill -s "$1" -- "-$(<"$f")" 2>/dev/null || true
		done
		return
	fi
	echo "$1" >"$running/stop"
	for f in "$running"/*.pgid; do
		signal_once "$1" "$f"
	done
	say "SIG$1: what runs stops after its current step (its record is kept); waiting for it"
	wait
	say "interrupted by SIG$1 after $(($(date +%s) - t0)) s: run the same command with --resume to go on"
	exit $((128 + $(kill -l "$1")))
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM

status=0
if ((!finish)); then
	scripts/fetch-brown.sh data
	rc=0
	if [ "$kind" = cpu ]; then
		two gc-vs-deq gc-vs-deq-trellisnet eps-train default depth budget \
			vs-pytorch || rc=$?
		if ((rc != 3)); then
			r=0
			# one lane, nothing beside it: its times are the
			# ε-at-inference finding's (results audit F2)
			lane suite eps-infer threads=1 || r=$?
			rc=$(worst "$rc" "$r")
		fi
		if ((rc != 3)); then
			r=0
			lane cpu_extras || r=$?
			rc=$(worst "$rc" "$r")
		fi
	else
		lane gpu_suites || rc=$?
	fi
	if ((rc == 3)); then
		say "out of budget ($budget s) after $(($(date +%s) - t0)) s: run the same command with --resume to go on"
		exit 3
	fi
	((rc == 0)) || status=1
fi

# The figures each suite's question needs (results/README.md §Figures).
draw_figures() {
	local f name figs rc=0
	for f in "${files[@]}"; do
		name=$(basename "$f" .jsonl)
		case "$name" in
		gc-vs-deq | gc-vs-deq-gpu | gc-vs-deq-trellisnet)
			figs=time-ratio,memory-ratio,convergence,residuals ;;
		depth) figs=memory-vs-depth,time-ratio ;;
		eps-train) figs=eps-sweep,convergence ;;
		eps-infer) figs=eps-infer ;;
		budget) figs=budget ;;
		default) figs=time-ratio,memory-ratio ;;
		*) continue ;;
		esac
		DEQBENCH="$bin" plots/plot.sh --figures "$figs" "$f" || rc=1
	done
	return "$rc"
}

# A run the budget or a signal stopped (status interrupted) and the suite's
# --resume ran again to the end: its partial record moves to
# $out/superseded/ (kept, not counted), so that the files hold finished
# runs only (report leaves such a record out of its row by itself).
python3 - "$out" <<'EOF' 2>&1 | tee -a "$log" >&2 || status=1
import glob, json, os, sys
out = sys.argv[1]
def key(r):
    c = dict(r.get("config") or {})
    c.pop("out", None)
    return json.dumps(c, sort_keys=True)
for p in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
    lines = [l for l in open(p) if l.strip()]
    recs = [json.loads(l) for l in lines]
    done = {key(r) for r in recs if r.get("status") == "ok"}
    gone = [i for i, r in enumerate(recs)
            if r.get("status") == "interrupted" and key(r) in done]
    if not gone:
        continue
    os.makedirs(os.path.join(out, "superseded"), exist_ok=True)
    with open(os.path.join(out, "superseded", os.path.basename(p)), "a") as f:
        f.writelines(lines[i] for i in gone)
    with open(p + ".tmp", "w") as f:
        f.writelines(l for i, l in enumerate(lines) if i not in gone)
    os.replace(p + ".tmp", p)
    print(f"reproduce: {os.path.basename(p)}: {len(gone)} interrupted "
          f"record(s) rerun to the end moved to superseded/")
EOF

# one host per folder, one commit; every record valid
files=("$out"/*.jsonl)
# (--finish: the records' one commit, whatever the build's now)
want=$(build_commit)
((finish)) && want=any
python3 - "$want" "${files[@]}" <<'EOF' 2>&1 | tee -a "$log" >&2 || status=1
import json, sys
want, hosts, commits = sys.argv[1], set(), set()
for p in sys.argv[2:]:
    for line in open(p):
        if line.strip():
            r = json.loads(line)
            hosts.add((r.get("host") or {}).get("hostname"))
            commits.add((r.get("build") or {}).get("git_commit"))
ok = len(hosts) == 1 and len(commits) == 1 and (want == "any" or commits == {want})
print(f"reproduce: {len(sys.argv) - 2} record files, hosts {sorted(map(str, hosts))}, "
      f"commits {sorted(map(str, commits))}: {'one host, one commit' if ok else 'MIXED'}")
sys.exit(0 if ok else 1)
EOF
"$bin" validate --strict "${files[@]}" "$out"/cpu-rate/*.jsonl 2>>"$log" |
	tee -a "$log" >&2 || status=1
# the records' first configurations replayed at this build, bit for bit
# (results/cpu/replay.json, which the findings state; test `replay`)
if [ "$kind" = cpu ]; then
	/usr/bin/python3 scripts/replay.py --write --deqbench "$bin" results \
		>>"$log" 2>&1 || status=1
fi
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
	draw_figures >>"$log" 2>&1 || status=1
	/usr/bin/python3 plots/findings.py --write --deqbench "$bin" results \
		>>"$log" 2>&1 || status=1
	say "figures and findings written"
else
	say "no matplotlib here: run scripts/reproduce.sh $kind --finish where /usr/bin/python3 has it"
fi
say "done in $(($(date +%s) - t0)) s, exit $status"
exit $status
