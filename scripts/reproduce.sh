#!/usr/bin/env bash
# reproduce.sh — regenerates every committed result of one kind of machine,
# from one clean commit, into results/KIND/ (one host per folder): the
# suites' records, the CPU rate and plan runs (cpu), the figures, and the
# findings section of results/README.md (plots/findings.py); every record
# is checked with `deqbench validate --strict`.
#
#   scripts/reproduce.sh cpu|gpu [--resume] [--budget SECONDS]
#   scripts/reproduce.sh cpu|gpu --finish
#
# cpu: two lanes side by side, each pinned to one core and running its
#   shard (--shard i/2) of every suite with threads=1: gc-vs-deq (3 seeds),
#   gc-vs-deq-trellisnet, eps-train (3 seeds for unroll and eps = 1e-3),
#   default (3 seeds), depth, budget, vs-pytorch; then eps-infer (on
#   eps-train's saved parameters), scripts/cpu-rate.sh and `deqbench plan
#   --run` on the budget suite's model (core 0, nothing beside them).
#   About 2.5 hours on a quiet 2-core machine.
# gpu: one lane, device=cuda: gc-vs-deq-gpu (the paper-scale suite, 3
#   seeds), gc-vs-deq, gc-vs-deq-trellisnet, depth, eps-train, eps-infer
#   (default is scripts/run.sh's CPU reference only). Estimated 25 minutes
#   on one H100 from the per-step times of earlier H100 runs; not yet run
#   (results/gpu/README.md has the steps for a lent machine without
#   packages or git).
# --budget S (default 540 for gpu, none for cpu): start no run after S
#   seconds (the suite in progress gets SIGTERM and ends after its current
#   run, whose record is kept) and exit 3; the same command with --resume
#   goes on where it stopped.
# --finish: no runs; only the checks, the figures and the findings (where
#   the runs were made on a machine without matplotlib).
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
# budget (go on with --resume), 1 a run or a check failed.
set -euo pipefail
cd "$(dirname "$0")/.."

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
[ "$kind" = gpu ] && budget=540
while (($#)); do
	case "$1" in
	--resume) resume=1 ;;
	--finish) finish=1 ;;
	--budget)
		[ $# -ge 2 ] || usage
		budget="$2"
		shift
		;;
	--budget=*) budget="${1#--budget=}" ;;
	*) usage ;;
	esac
	shift
done
if [ -n "$budget" ] && ! [[ "$budget" =~ ^[0-9]+$ ]]; then
	echo "reproduce: --budget must be a whole number of seconds" >&2
	exit 2
fi

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
mkdir -p "$out/logs" results/params

# left: seconds of the budget left (a large number without a budget)
left() {
	if [ -z "$budget" ]; then
		echo 1000000
	else
		echo $((budget - ($(date +%s) - t0)))
	fi
}

# suite NAME [args...]: one suite (or shard) with --resume into
# $out/NAME.jsonl, within the budget, pinned to core $pin when set. 0, 3 out
# of budget, else 1.
pin=""
suite() {
	local name="$1" s rc=0 l tag
	shift
	l=$(left)
	if ((l <= 0)); then return 3; fi
	s=$(date +%s)
	tag="$name${pin:+.$pin}"
	${pin:+taskset -c "$pin"} timeout -s TERM "$l" "$bin" suite \
		"bench/suites/$name.json" --resume out="$out/$name.jsonl" "$@" \
		${extra[@]+"${extra[@]}"} >>"$out/logs/$tag.log" 2>&1 || rc=$?
	say "$name $* exit $rc after $(($(date +%s) - s)) s"
	case $rc in
	0) return 0 ;;
	124 | 143) return 3 ;;
	*) return 1 ;;
	esac
}

# lane I SUITE...: shard I/2 of each suite on core I, threads=1.
lane() {
	local i="$1" name rc=0
	shift
	pin="$i"
	for name in "$@"; do
		suite "$name" --shard "$i/2" threads=1 || rc=1
	done
	return $rc
}

# two SUITE...: the suites as two lanes side by side; 0 or 1.
two() {
	local a b rc=0
	lane 0 "$@" &
	a=$!
	lane 1 "$@" &
	b=$!
	wait "$a" || rc=1
	wait "$b" || rc=1
	return $rc
}

# cpu-rate.sh (core 0) and plan --run on the budget suite's model, each
# once (kept on --resume when done).
cpu_extras() {
	local rc=0 b
	if [ ! -s "$out/cpu-rate/summary.txt" ]; then
		mkdir -p "$out/cpu-rate"
		DQ_BUILDDIR="$builddir" OUT_DIR="$out/cpu-rate" CORE=0 \
			scripts/cpu-rate.sh >"$out/logs/cpu-rate.log" 2>&1 &&
			cp "$out/logs/cpu-rate.log" "$out/cpu-rate/summary.txt" ||
			rc=1
		say "cpu-rate exit $rc"
	fi
	if [ ! -s "$out/plan.jsonl" ]; then
		python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["base"]; b.pop("out",None); json.dump(b,open(sys.argv[2],"w"),indent=1)' \
			bench/suites/budget.json "$out/plan-base.json"
		rm -f "$out/plan.jsonl.tmp"
		for b in "60 6" "200 12"; do
			set -- $b
			taskset -c 0 "$bin" plan "$out/plan-base.json" \
				budget_mib="$1" out="$out/plan.jsonl.tmp" --run "$2" \
				${extra[@]+"${extra[@]}"} \
				>>"$out/logs/plan.log" 2>&1 || rc=1
		done
		((rc)) || mv "$out/plan.jsonl.tmp" "$out/plan.jsonl"
		say "plan exit $rc"
	fi
	return $rc
}

status=0
if ((!finish)); then
	scripts/fetch-brown.sh data
	if [ "$kind" = cpu ]; then
		two gc-vs-deq gc-vs-deq-trellisnet eps-train default depth budget \
			vs-pytorch || status=1
		two eps-infer || status=1
		cpu_extras || status=1
	else
		for name in gc-vs-deq-gpu gc-vs-deq gc-vs-deq-trellisnet depth \
			eps-train eps-infer; do
			rc=0
			suite "$name" device=cuda || rc=$?
			if ((rc == 3)); then
				say "out of budget ($budget s): run the same command with --resume to go on"
				exit 3
			fi
			((rc == 0)) || status=1
		done
	fi
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
	return $rc
}

# one host per folder, one commit; every record valid
shopt -s nullglob
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
