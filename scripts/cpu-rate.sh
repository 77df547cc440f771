#!/usr/bin/env bash
# cpu-rate.sh — two CPU efficiency figures, from one core and one thread:
#   1. the whole training step's counted rate (timing.gflops of an unroll
#      run: block, head and injection FLOPs over the median step; SCHEMA.md
#      §timing) against OpenBLAS SGEMM on the same step's GEMM shapes
#      (bench-block at the run's shape with vocab = the run's vocabulary
#      and layers = its L: L x the block's GEMMs + the head's three);
#   2. time per block evaluation, step_ms median / (forward_evals_per_step
#      + vjp_evals_per_step), of deq against unroll.
# Each run's line also gives its fastest step: a median far above it says
# the core was shared during the run (measure again on a quiet machine).
# The model is bench/suites/default.json's base (Brown: scripts/run.sh or
# scripts/fetch-brown.sh first), method unroll then deq, steps=$STEPS
# warmup_steps=10 eval_tokens=2048 threads=1, pinned with taskset -c $CORE.
#   scripts/cpu-rate.sh [key=value ...]   (overrides for both runs)
# CORE (default 0), STEPS (default 60); OUT_DIR: keep the records
# (unroll.jsonl, deq.jsonl), the runs' stderr (unroll.log, deq.log) and
# bench-block.log there (default: a temporary directory, removed). Needs
# jq (scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${DQ_BUILDDIR:-build}/bench/deqbench"
core="${CORE:-0}"
steps="${STEPS:-60}"
if [ -n "${OUT_DIR:-}" ]; then
	out="$OUT_DIR"
	mkdir -p "$out"
else
	out="$(mktemp -d)"
	trap 'rm -rf "$out"' EXIT
fi
jq .base bench/suites/default.json >"$out/base.json"
pin=(taskset -c "$core")
for method in unroll deq; do
	rm -f "$out/$method.jsonl"
	"${pin[@]}" "$bin" run "$out/base.json" method="$method" threads=1 \
		steps="$steps" warmup_steps=10 eval_tokens=2048 \
		out="$out/$method.jsonl" "$@" >/dev/null 2>"$out/$method.log" ||
		{ tail -n 3 "$out/$method.log" >&2; exit 1; }
done
rec() { jq -r "$2" "$out/$1.jsonl"; }
st=$(rec unroll '.config | "d_model=\(.d_model) n_heads=\(.n_heads) d_ff=\(.d_ff) seq_len=\(.seq_len) batch_size=\(.batch_size) model=\(.model) layers=\(.layers)"')
vocab=$(rec unroll .model.vocab_size)
# shellcheck disable=SC2086  # $st is key=value words
"${pin[@]}" "$bin" bench-block $st vocab="$vocab" threads=1 \
	>"$out/bench-block.log"
sgemm=$(sed -n "s/^gemm, one training step's shapes.* \([0-9.]*\) GFLOP\/s .*/\1/p" \
	"$out/bench-block.log")
jq -rn --arg sgemm "$sgemm" --slurpfile u "$out/unroll.jsonl" \
	--slurpfile d "$out/deq.jsonl" '
def ev: .evals.forward_evals_per_step + .evals.vjp_evals_per_step;
def per_eval: .timing.step_ms.median / ev;
def line: "\(.config.method): step \(.timing.step_ms.median * 100 | round / 100) ms (median of \(.timing.steps_timed); min \(.timing.step_ms.min * 100 | round / 100)), \(.timing.step_gflop * 1000 | round / 1000) GFLOP counted, \(.timing.gflops * 100 | round / 100) GFLOP/s, \(ev * 100 | round / 100) evals/step, \(per_eval * 1000 | round / 1000) ms/eval";
($u[0] | line), ($d[0] | line),
"SGEMM, one step'"'"'s GEMM shapes: \($sgemm) GFLOP/s",
"whole step / SGEMM (unroll): \($u[0].timing.gflops / ($sgemm | tonumber) * 1000 | round / 1000)  (issue 17: >= 0.70)",
"per evaluation deq / unroll: \(($d[0] | per_eval) / ($u[0] | per_eval) * 1000 | round / 1000)  (issue 17: <= 1.10)"'
