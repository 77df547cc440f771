#!/usr/bin/env bash
# setup.sh — installs what deqbench needs on Debian 12 (as root; uses sudo
# otherwise) and configures + builds it in build/, with a line on stderr
# per phase (packages, configuring, building with progress).
#   scripts/setup.sh [extra meson options...]
# Idempotent: installs only missing packages, reconfigures only when needed.
# DQ_BUILDDIR: the build directory (default build); CC: the compiler of a
# new one; DQ_CONFIGURE_ONLY=1: configure, build nothing (meson test then
# builds what the tests it runs need).
# CUDA: a new build directory compiles the CUDA backend (nvcc, minutes
# more) only where a GPU is present (nvidia-smi -L succeeds) or when asked:
# DQ_CUDA=1 (-Dcuda=enabled), DQ_CUDA=0 (-Dcuda=disabled) or a -Dcuda=
# option given here (scripts/test.sh gives one, so that CI compiles the
# CUDA code without a GPU). An existing build directory keeps what it was
# configured with unless -Dcuda= is given.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "setup: $*" >&2; }

# clang, its libFuzzer runtime (libclang-rt-dev: only recommended by clang,
# and recommends are not installed) and its OpenMP (libomp-dev) build the
# fuzz targets (tests/fuzz, build-fuzz in scripts/test.sh); python3-torch
# runs impl=pytorch (bench/pytorch) and the peer tests (tests/peer); jq
# reads records in scripts/cpu-rate.sh; libgsl-dev gives the report's t
# quantiles (bench/report/stats.c) and python3-scipy the figures' (plots/
# figbase.py; recommends are not installed); chromium renders the HTML report
# in its test (tests/html)
pkgs=(gcc g++ meson ninja-build pkg-config libjansson-dev libhwloc-dev
      libopenblas-openmp-dev libcriterion-dev npm python3-matplotlib git
      clang libclang-rt-dev libomp-dev python3-torch jq libgsl-dev chromium
      python3-scipy)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
# npm may come from another install (e.g. NodeSource); accept it.
if command -v npm >/dev/null 2>&1; then
	missing=("${missing[@]/npm/}")
fi
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | grep -v '^$' || true)
if ((${#missing[@]})); then
	say "installing ${#missing[@]} packages with apt-get (minutes on a fresh machine): ${missing[*]}"
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
	say "packages installed"
else
	say "packages: all ${#pkgs[@]} installed"
fi

export PATH="$PATH:/usr/local/cuda/bin"
builddir="${DQ_BUILDDIR:-build}"

# cuda_option: the -Dcuda= a new build directory gets, on stdout, and why,
# on stderr; nothing when the caller gave one.
cuda_option() {
	local a
	for a in "$@"; do
		if [[ $a == -Dcuda=* ]]; then
			say "CUDA backend: $a (given)"
			return
		fi
	done
	case "${DQ_CUDA:-}" in
	1)
		say "CUDA backend: compiled (DQ_CUDA=1)"
		echo -Dcuda=enabled
		return
		;;
	0)
		say "CUDA backend: not compiled (DQ_CUDA=0)"
		echo -Dcuda=disabled
		return
		;;
	esac
	if nvidia-smi -L >/dev/null 2>&1; then
		say "CUDA backend: a GPU is present (nvidia-smi -L): compiled where nvcc is found (minutes more)"
		echo -Dcuda=auto
	else
		say "CUDA backend: not compiled, no GPU found (nvidia-smi -L); DQ_CUDA=1 compiles it"
		echo -Dcuda=disabled
	fi
}

# meson's own output only when it fails (it prints its errors on stdout)
quiet() {
	local log
	if ! log=$("$@" 2>&1); then
		echo "$log" >&2
		say "'$*' failed"
		exit 1
	fi
}

if [ ! -f "$builddir/build.ninja" ]; then
	cuda=$(cuda_option "$@")
	say "configuring $builddir (meson setup${cuda:+ $cuda}${*:+ $*})"
	quiet meson setup "$builddir" ${cuda:+"$cuda"} "$@"
elif (($#)); then
	say "configuring $builddir (meson configure $*)"
	quiet meson configure "$builddir" "$@"
fi
if grep -q 'DQ_CUDA_BUILD 1' "$builddir/dq_build.h" 2>/dev/null; then
	has_cuda=yes
else
	has_cuda=no
fi
if [ "${DQ_CONFIGURE_ONLY:-0}" = 1 ]; then
	say "configured $builddir (CUDA backend: $has_cuda)"
	exit 0
fi

# ninja's own status line on a terminal; elsewhere (a log, CI) a line at
# every quarter of the steps, and every other line (warnings, errors) whole.
say "building $builddir (ninja; CUDA backend: $has_cuda)"
if [ -t 2 ]; then
	ninja -C "$builddir" >&2
else
	ninja -C "$builddir" | awk '
		/^\[[0-9]+\/[0-9]+\] / {
			split(substr($1, 2, length($1) - 2), n, "/")
			if (n[1] + 0 >= next_at || n[1] == n[2]) {
				print "setup: built " n[1] " of " n[2]
				next_at = n[1] + n[2] / 4
			}
			next
		}
		/^ninja: (Entering|Leaving) directory/ { next }
		{ print }' >&2
fi
say "built $builddir/bench/deqbench"
