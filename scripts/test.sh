#!/usr/bin/env bash
# test.sh — sets up (scripts/setup.sh) and runs every test: the CPU suite in
# the release build, its numerics suite again under other OpenBLAS kernels
# (OPENBLAS_CORETYPE), then the CPU suite under AddressSanitizer + UBSan,
# then the libFuzzer targets of the input parsers (clang, build-fuzz: 20 s
# each, tests/fuzz). The cuda suite runs too and skips, with a message, where no
# GPU is found; so does the fuzz suite in the gcc builds.
set -euo pipefail
cd "$(dirname "$0")/.."
# The CUDA code is compiled wherever nvcc is (CI has nvcc and no GPU: the
# cuda suite's executables are built and skip), GPU or not; setup.sh alone
# compiles it only where a GPU is present.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
	scripts/setup.sh -Dcuda=enabled
else
	echo "test.sh: no nvcc (/usr/local/cuda/bin): the CUDA code is not compiled here" >&2
	scripts/setup.sh -Dcuda=auto
fi
meson test -C build --print-errorlogs --num-processes 2
# The numerics suite again under other OpenBLAS kernels: generic SSE
# (Prescott, what OpenBLAS falls back to on a CPU model it does not know),
# AVX2 (Haswell) and, where the CPU has AVX-512, SkylakeX. Their summation
# orders differ, so a test that holds on one machine's kernels only fails
# here rather than on a user's machine.
cores=(Prescott Haswell)
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo &&
	grep -qw avx512vl /proc/cpuinfo; then
	cores+=(SkylakeX)
fi
for core in "${cores[@]}"; do
	echo "== numerics suite under OPENBLAS_CORETYPE=$core =="
	OPENBLAS_CORETYPE=$core meson test -C build --suite numerics \
		--print-errorlogs --num-processes 2 --no-rebuild
done
echo "== AddressSanitizer/UBSan build =="
# -fsanitize=undefined leaves out float-cast-overflow (a double outside the
# range of the integer type it is converted to: plan's budget_mib once)
DQ_BUILDDIR=build-asan scripts/setup.sh -Dcuda=disabled \
	-Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized \
	-Dc_args=-fsanitize=float-cast-overflow
meson test -C build-asan --suite cpu --print-errorlogs --num-processes 2 \
	--timeout-multiplier 3
echo "== libFuzzer targets (clang, ASan/UBSan) =="
CC=clang DQ_BUILDDIR=build-fuzz DQ_CONFIGURE_ONLY=1 scripts/setup.sh \
	-Dfuzz=enabled -Dcuda=disabled -Db_sanitize=address,undefined \
	-Db_lundef=false -Dbuildtype=debugoptimized
meson test -C build-fuzz --suite fuzz --print-errorlogs --num-processes 2
