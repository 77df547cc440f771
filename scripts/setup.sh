#!/usr/bin/env bash
# setup.sh — installs what deqbench needs on Debian 12 (as root; uses sudo
# otherwise) and configures + builds it in build/.
#   scripts/setup.sh [extra meson options...]
# Idempotent: installs only missing packages, reconfigures only when needed.
# DQ_BUILDDIR: the build directory (default build); CC: the compiler of a
# new one; DQ_CONFIGURE_ONLY=1: configure, build nothing (meson test then
# builds what the tests it runs need).
set -euo pipefail
cd "$(dirname "$0")/.."

# clang, its libFuzzer runtime (libclang-rt-dev: only recommended by clang,
# and recommends are not installed) and its OpenMP (libomp-dev) build the
# fuzz targets (tests/fuzz, build-fuzz in scripts/test.sh); python3-torch
# runs impl=pytorch (bench/pytorch) and the peer tests (tests/peer); jq
# reads records in scripts/cpu-rate.sh; libgsl-dev gives the report's t
# quantiles (bench/report/stats.c); chromium renders the HTML report in its test
# (tests/html)
pkgs=(gcc g++ meson ninja-build pkg-config libjansson-dev libhwloc-dev
      libopenblas-openmp-dev libcriterion-dev npm python3-matplotlib git
      clang libclang-rt-dev libomp-dev python3-torch jq libgsl-dev chromium)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
# npm may come from another install (e.g. NodeSource); accept it.
if command -v npm >/dev/null 2>&1; then
	missing=("${missing[@]/npm/}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if ((${#missing[@]})); then
	echo "setup: installing ${missing[*]}" >&2
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
fi

# CUDA is built when the toolkit is present (auto); CI has nvcc but no GPU,
# which is fine: the CUDA tests skip with a message.
export PATH="$PATH:/usr/local/cuda/bin"
builddir="${DQ_BUILDDIR:-build}"
if [ ! -f "$builddir/build.ninja" ]; then
	meson setup "$builddir" "$@" >/dev/null
elif (($#)); then
	meson configure "$builddir" "$@" >/dev/null
fi
if [ "${DQ_CONFIGURE_ONLY:-0}" = 1 ]; then
	echo "setup: configured $builddir" >&2
	exit 0
fi
ninja -C "$builddir" >/dev/null
echo "setup: built $builddir/bench/deqbench" >&2
