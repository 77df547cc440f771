#!/usr/bin/env bash
# run.sh — the test of one libFuzzer target (meson suite fuzz, see
# tests/fuzz/meson.build and docs/fuzzing.md):
#   tests/fuzz/run.sh EXE NAME SECONDS
# replays every committed input of NAME once (tests/fuzz/corpus/NAME, the
# seeds, and tests/fuzz/regress/NAME, inputs that once crashed it), then
# fuzzes for SECONDS from the seeds and what earlier runs found (kept in
# $DQ_FUZZ_WORK/NAME/corpus, beside the build). A crash, leak, UB report or
# timeout fails the test and names the input libFuzzer kept.
#   tests/fuzz/run.sh --skip
# is the test of a build without the targets: it says how to get them and
# exits 77 (meson: skipped).
set -euo pipefail

if [ "${1:-}" = --skip ]; then
	echo "SKIP: this build has no fuzz targets (they need clang and" \
		"-Dfuzz=enabled); scripts/test.sh builds and runs them in" \
		"build-fuzz, or: CC=clang meson setup build-fuzz -Dfuzz=enabled" \
		"-Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled" \
		"&& meson test -C build-fuzz --suite fuzz"
	exit 77
fi
if [ $# -ne 3 ]; then
	echo "usage: tests/fuzz/run.sh EXE NAME SECONDS | --skip" >&2
	exit 2
fi
exe=$1 name=$2 secs=$3
root=${DQ_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
work=${DQ_FUZZ_WORK:-$(dirname "$exe")/work}/$name
seeds=$root/tests/fuzz/corpus/$name
regress=$root/tests/fuzz/regress/$name
mkdir -p "$work/corpus" "$work/artifacts"
# leaks are findings here (the Criterion tests' environment turns them off);
# UB aborts so that libFuzzer keeps the input
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# per input: 25 s (a 1e6-combination suite is refused in a few seconds);
# 2 GiB, libFuzzer's default, bounds any one allocation and the process
opts=(-timeout=25 -rss_limit_mb=2048 -print_final_stats=1
	-artifact_prefix="$work/artifacts/")

inputs=("$seeds"/*)
[ -d "$regress" ] && inputs+=("$regress"/*)
if ! "$exe" "${opts[@]}" "${inputs[@]}" >"$work/replay.log" 2>&1; then
	tail -n 60 "$work/replay.log"
	echo "fuzz_$name: a committed input fails (above; whole log" \
		"$work/replay.log)"
	exit 1
fi
echo "fuzz_$name: ${#inputs[@]} committed inputs replayed"

rc=0
"$exe" "${opts[@]}" -max_total_time="$secs" "$work/corpus" "$seeds" \
	>"$work/fuzz.log" 2>&1 || rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log")
if [ "$rc" -ne 0 ]; then
	tail -n 60 "$work/fuzz.log"
	echo "fuzz_$name: FOUND a failing input after ${execs:-?} executions:" \
		"$(ls "$work/artifacts")" "(in $work/artifacts; replay:" \
		"$exe FILE). Fix the parser, then commit the input under" \
		"tests/fuzz/regress/$name/"
	exit 1
fi
echo "fuzz_$name: ${execs:-?} executions in $secs s, no findings;" \
	"$(ls "$work/corpus" | wc -l) inputs in $work/corpus"
