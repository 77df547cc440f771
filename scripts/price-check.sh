#!/usr/bin/env bash
# price-check.sh — a check of the cost model on this machine, one
# lane on one pinned core with nothing of ours beside it:
#   1. bench/suites/price-check.json (the default model under unroll,
#      checkpoint, revolve, offload, the DEQ with Broyden and with
#      Anderson; 3 seeds, 100 steps, threads=1) into OUT/runs.jsonl;
#   2. `deqbench price` of its shape on the same core (OUT/prices.jsonl);
#   3. `deqbench report --price` (OUT/report.md, OUT/report.json): per
#      method the measured mean step time (geometric mean over runs, 95% t
#      interval) beside the priced one (Σ work × price + step_fixed) and
#      priced / measured (target: within 5%);
#   4. bench/suites/aa.json twice (OUT/aa1.jsonl, OUT/aa2.jsonl) and
#      `deqbench compare --fail-above 10` of the pair (OUT/aa.md): an A/A
#      pair must read SAME or NOISY.
# It prints the measured-and-priced table and the A/A table.
#   scripts/price-check.sh [OUT_DIR]   (default results/local/price-check)
# CORE (default 0): the core to pin to; the Brown corpus in data/ (scripts/
# fetch-brown.sh). About 10 minutes on a 2-core VM. Exit status: 0 done, 1
# a run failed, 3 the A/A pair read FASTER or SLOWER (--fail-above 10).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${DQ_BUILDDIR:-build}/bench/deqbench"
core="${CORE:-0}"
out="${1:-results/local/price-check}"
[ -x "$bin" ] || { echo "price-check: no $bin: build first (scripts/setup.sh)" >&2; exit 2; }
[ -d data/brown ] || { echo "price-check: no data/brown: run scripts/fetch-brown.sh data" >&2; exit 2; }
mkdir -p "$out"
rm -f "$out"/runs.jsonl "$out"/prices.jsonl "$out"/aa1.jsonl "$out"/aa2.jsonl
pin=(taskset -c "$core")
say() { echo "price-check: $*" >&2; }
run() { # LOG CMD...: CMD's output into OUT/LOG, its tail on failure
	local log="$out/$1"
	shift
	"$@" >"$log" 2>&1 || { tail -n 5 "$log" >&2; exit 1; }
}
say "runs (18, one lane, core $core)"
run runs.log "${pin[@]}" "$bin" suite bench/suites/price-check.json out="$out/runs.jsonl"
say "prices of their shape"
run price.txt "${pin[@]}" "$bin" price "$out/runs.jsonl" core="$core" out="$out/prices.jsonl"
"$bin" report --price "$out/prices.jsonl" --format md "$out/runs.jsonl" >"$out/report.md" 2>/dev/null
"$bin" report --price "$out/prices.jsonl" --format json "$out/runs.jsonl" >"$out/report.json" 2>/dev/null
for i in 1 2; do
	say "A/A side $i (10 runs)"
	run "aa$i.log" "${pin[@]}" "$bin" suite bench/suites/aa.json out="$out/aa$i.jsonl"
done
aa=0
"$bin" compare --fail-above 10 "$out/aa1.jsonl" "$out/aa2.jsonl" >"$out/aa.md" 2>"$out/aa.err" || aa=$?
# the measured-and-priced table of report's md, then the A/A table
awk '/^\| *(group|---)/ && /priced/ { p = 1 } p && /^\|/ { print } p && !/^\|/ { exit }' \
	"$out/report.md"
echo
cat "$out/aa.md"
if ((aa == 1)); then
	say "the A/A pair read FASTER or SLOWER beyond 10% ($out/aa.err)"
	exit 3
fi
((aa == 0)) || exit 1
say "done: $out"
