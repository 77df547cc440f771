#!/usr/bin/env bash
# eps-sweep.sh — the reviewers' ε question end to end: trains the eps-train
# suite (DEQ at five tolerances and unroll, 2000 steps each, parameters saved
# under results/params/), then evaluates the saved DEQ and unrolled network
# with the eps-infer suite (DEQ at 6 tolerances x 4 caps, unroll at 7
# depths), then draws the figures. Each suite runs as two shards side by side
# (threads=1 each: on a 2-core host two single-thread runs finish sooner
# than one two-thread run). Records: results/eps-train.jsonl and
# results/eps-infer.jsonl (appended). Needs the build and the Brown corpus
# (scripts/run.sh makes both).
#   scripts/eps-sweep.sh [key=value ...]   (overrides for both suites)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${DQ_BUILDDIR:-build}/bench/deqbench"
mkdir -p results/params
for suite in bench/suites/eps-train.json bench/suites/eps-infer.json; do
	"$bin" suite "$suite" --shard 0/2 "$@" &
	a=$!
	"$bin" suite "$suite" --shard 1/2 "$@" &
	b=$!
	wait "$a" && wait "$b"
done
/usr/bin/python3 plots/plot.py results/eps-train.jsonl results/eps-infer.jsonl
