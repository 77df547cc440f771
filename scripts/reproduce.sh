#!/usr/bin/env bash
# reproduce.sh — regenerates every committed result of one kind of machine,
# from one clean commit, into results/KIND/ (one host per folder): the
# suites' records, the figures, the CPU rate and plan runs (cpu), and the
# findings section of results/README.md (plots/findings.py), then checks
# every record with `deqbench validate --strict`.
#
#   scripts/reproduce.sh cpu [--resume]
#   scripts/reproduce.sh gpu [--resume] [--budget SECONDS]
#
# cpu: two lanes side by side, each pinned to one core and running its
#   shard (--shard i/2) of every suite with threads=1: gc-vs-deq (3 seeds),
#   gc-vs-deq-trellisnet, eps-train (3 seeds for unroll and eps = 1e-3),
#   default (3 seeds), depth, budget, vs-pytorch; then eps-infer (on
#   eps-train's saved parameters), scripts/cpu-rate.sh and `deqbench plan
#   --run` on the budget suite's model (core 0, nothing beside them).
#   About 2.5 hours on a quiet 2-core machine (results/README.md).
# gpu: one lane, device=cuda: gc-vs-deq-gpu (the paper-scale suite, 3
#   seeds), gc-vs-deq, gc-vs-deq-trellisnet, depth, eps-train, eps-infer,
#   default. --budget S (default 540 for gpu, none for cpu) stops starting
#   new runs after S seconds (the suite in progress gets SIGTERM and ends
#   after its current run, whose record is kept) and exits 3: run the same
#   command with --resume to go on. About 25 minutes on one H100, so three
#   calls of at most 10 minutes each.
#
# A fresh start (no --resume) demands a clean work tree (no tracked
# change), builds DQ_BUILDDIR (default build-reproduce) from it, and only
# then empties results/KIND/ (git history keeps the old files). --resume
# keeps what is there, does not rebuild, and checks that the build is of
# HEAD and clean. Runs already recorded are skipped (suite --resume).
# DQ_REPRODUCE_ARGS: key=value words added to every suite and plan run (a
# smoke test of this script, e.g. "steps=3 warmup_steps=1"; such records
# are not results).
# Exit status: 0 done, 2 bad use or a dirty tree / stale build, 3 out of
# budget (resume), 1 a run or a check failed.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	echo "usage: scripts/reproduce.sh cpu|gpu [--resume] [--budget SECONDS]" >&2
	exit 2
}
kind="${1:-}"
[ "$kind" = cpu ] || [ "$kind" = gpu ] || usage
shift
resume=0
budget=""
[ "$kind" = gpu ] && budget=540
while (($#)); do
	case "$1" in
	--resume) resume=1 ;;
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
head_commit=$(git rev-parse --short=12 HEAD)

say() { echo "reproduce: $*" | tee -a "$log" >&2; }

build_commit() { "$bin" env | jq -r .build.git_commit; }

if ((resume)); then
	[ -x "$bin" ] || {
		echo "reproduce: --resume needs the build $bin; start without --resume" >&2
		exit 2
	}
	if [ "$(build_commit)" != "$head_commit" ]; then
		echo "reproduce: $bin was built from $(build_commit), HEAD is $head_commit: records of two commits would mix; start without --resume" >&2
		exit 2
	fi
else
	if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
		echo "reproduce: the work tree has uncommitted changes; commit or stash them (records must come from one clean commit)" >&2
		exit 2
	fi
	if [ "$kind" = gpu ]; then
		DQ_BUILDDIR="$builddir" scripts/setup.sh -Dcuda=enabled
	else
		DQ_BUILDDIR="$builddir" scripts/setup.sh
	fi
	if [ "$(build_commit)" != "$head_commit" ]; then
		echo "reproduce: the build says $(build_commit), not $head_commit" >&2
		exit 2
	fi
	rm -rf "$out"
	mkdir -p "$out"
	say "fresh start at $head_commit on $(hostname), $(date -u +%FT%TZ)"
fi
mkdir -p "$out" results/params
scripts/fetch-brown.sh data

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
		${extra[@]+"${extra[@]}"} \
		>>"$out/logs/$tag.log" 2>&1 || rc=$?
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
		jq '.base | del(.out)' bench/suites/budget.json >"$out/plan-base.json"
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

mkdir -p "$out/logs"
status=0
if [ "$kind" = cpu ]; then
	two gc-vs-deq gc-vs-deq-trellisnet eps-train default depth budget \
		vs-pytorch || status=1
	two eps-infer || status=1
	cpu_extras || status=1
else
	for name in gc-vs-deq-gpu gc-vs-deq gc-vs-deq-trellisnet depth eps-train \
		eps-infer default; do
		rc=0
		suite "$name" device=cuda || rc=$?
		if ((rc == 3)); then
			say "out of budget ($budget s): run scripts/reproduce.sh gpu --resume to go on"
			exit 3
		fi
		((rc == 0)) || status=1
	done
fi

# one host per folder, one commit
hosts=$(cat "$out"/*.jsonl | jq -r .host.hostname | sort -u | wc -l)
commits=$(cat "$out"/*.jsonl | jq -r .build.git_commit | sort -u)
if [ "$hosts" != 1 ] || [ "$commits" != "$head_commit" ]; then
	say "records of $hosts hosts and commits $(echo $commits) in $out: expected one host and $head_commit"
	status=1
fi
shopt -s nullglob
"$bin" validate --strict "$out"/*.jsonl "$out"/cpu-rate/*.jsonl 2>>"$log" |
	tee -a "$log" >&2 || status=1
plots/plot.sh "$out"/*.jsonl >>"$log" 2>&1 || status=1
/usr/bin/python3 plots/findings.py --write --deqbench "$bin" results >>"$log" 2>&1 ||
	status=1
say "done in $(($(date +%s) - t0)) s, exit $status"
exit $status
