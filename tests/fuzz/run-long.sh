#!/usr/bin/env bash
# run-long.sh — opt-in long fuzzing of the input parsers (docs/fuzzing.md):
# runs each libFuzzer target for SECONDS, one after the other
# (niced), and prints per target the executions, the inputs its corpus
# holds and what it found.
#   tests/fuzz/run-long.sh SECONDS [TARGET ...]     (default: every target)
# Builds the targets first in $DQ_BUILDDIR (default build-fuzz: clang,
# -Dfuzz=enabled, ASan + UBSan; scripts/setup.sh installs clang). A target
# stops at its first finding (crash, leak, UB, timeout, out of memory);
# libFuzzer keeps the input in WORK/TARGET/artifacts, WORK being
# $DQ_BUILDDIR/tests/fuzz/work, and the corpus it grew in WORK/TARGET/corpus,
# which the next run (and the meson test) starts from.
set -euo pipefail
cd "$(dirname "$0")/../.."

all=(config suite safetensors cache records)
if [ $# -lt 1 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
	echo "usage: tests/fuzz/run-long.sh SECONDS [TARGET ...]" \
		"(targets: ${all[*]})" >&2
	exit 2
fi
secs=$1
shift
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")
for t in "${targets[@]}"; do
	if [[ " ${all[*]} " != *" $t "* ]]; then
		echo "run-long.sh: unknown target '$t'; use one of: ${all[*]}" >&2
		exit 2
	fi
done

builddir=${DQ_BUILDDIR:-build-fuzz}
if [ ! -f "$builddir/build.ninja" ]; then
	CC=clang meson setup "$builddir" -Dfuzz=enabled -Dcuda=disabled \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dbuildtype=debugoptimized >/dev/null
fi
nice ninja -C "$builddir" "${targets[@]/#/tests/fuzz/fuzz_}" >/dev/null

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
work=$builddir/tests/fuzz/work
rows=()
status=0
for t in "${targets[@]}"; do
	w=$work/$t
	mkdir -p "$w/corpus" "$w/artifacts"
	echo "== fuzz_$t: $secs s (log $w/long.log)"
	rc=0
	nice "$builddir/tests/fuzz/fuzz_$t" -max_total_time="$secs" \
		-timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$w/artifacts/" "$w/corpus" \
		"tests/fuzz/corpus/$t" >"$w/long.log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$w/long.log")
	found="none"
	if [ "$rc" -ne 0 ]; then
		found=$(ls -t "$w/artifacts" | head -n 1)
		found="$(grep -m1 -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' \
			"$w/long.log" || echo "exit $rc") -> $w/artifacts/$found"
		status=1
	fi
	rows+=("$(printf '%-12s %10s %8s  %s' "$t" "${execs:-?}" \
		"$(ls "$w/corpus" | wc -l)" "$found")")
	echo "${rows[-1]}"
done
echo
printf '%-12s %10s %8s  %s\n' target executions corpus findings
printf '%s\n' "${rows[@]}"
exit $status
