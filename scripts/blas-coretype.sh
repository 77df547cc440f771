#!/usr/bin/env bash
# blas-coretype.sh — prints the OPENBLAS_CORETYPE to set on this machine, or
# nothing: when OpenBLAS runs generic SSE kernels on a CPU whose flags allow
# faster ones (its fallback for a CPU model it does not know), `deqbench
# env` says so in host.blas (generic, cpu_allows; results/SCHEMA.md §host),
# and this prints cpu_allows. scripts/run.sh and scripts/reproduce.sh set
# the variable before their timed runs; a variable the user set wins.
#   scripts/blas-coretype.sh DEQBENCH
set -euo pipefail
[ -z "${OPENBLAS_CORETYPE:-}" ] || exit 0
"$1" env 2>/dev/null | python3 -c '
import json, sys
try:
    b = json.load(sys.stdin)["host"]["blas"]
except (ValueError, KeyError, TypeError):
    sys.exit(0)
if b.get("generic") and b.get("cpu_allows"):
    print(b["cpu_allows"])
' || true
