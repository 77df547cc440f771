#!/usr/bin/env bash
# gpu-check.sh — everything a machine with an NVIDIA GPU should run, in one
# command, with every log in one directory:
#   1. setup: installs missing Debian packages (scripts/setup.sh; nothing
#      when all are there) and builds build-gpu/ with -Dcuda=enabled;
#   2. the cuda test suite (meson test --suite cuda): every op against the
#      CPU backends, pool/timer/info checks, methods cuda vs cpu;
#   3. deqbench env (device facts as JSON);
#   4. bench-block device=cuda: a transformer block's forward+vjp GFLOP/s
#      next to cuBLAS's GEMMs on the same shapes, at the small shape
#      (d=128 H=4 F=512 T=64 B=16) and three larger ones, each in
#      precision fp32, tf32 and bf16 (the bf16 reference: both operands
#      rounded, then cublasGemmEx, as the model calls it);
#   5. the default suite (unroll, checkpoint, deq) with device=cuda on the
#      synthetic corpus, records in <dir>/<gpu-name>.jsonl, then the report;
#   6. save_params and deqbench eval: a DEQ trained 200 steps, evaluated at
#      two tolerances and unrolled, records in <dir>/<gpu-name>-eval.jsonl;
#   6b. bench/suites/gc-vs-deq.json with device=cuda (checkpointing vs
#      DEQ at d_model 128, 3 seeds), records in <dir>/<gpu-name>-gc.jsonl;
#   6b'. the same suite with cuda_graphs=true, records in
#      <dir>/<gpu-name>-gc-graphs.jsonl, compared with 6b's;
#   6b''. bench/suites/gc-vs-deq-gpu.json (d_model 512) with
#      cuda_graphs=true, compared with reproduce.sh gpu's eager records
#      (group graphs512, not in the default list: ~12 minutes);
#   6c. bench/suites/managed-gpu.json: unroll, offload and method=managed
#      (unified memory, with and without prefetch) at d_model 512, on the
#      whole card and under device_mem_cap_mib=1024, records in
#      <dir>/<gpu-name>-managed.jsonl;
#   7. bench/suites/vs-pytorch-gpu.json: unroll, checkpoint and DEQ at
#      d_model 512 in fp32 and bf16, in deqbench, PyTorch eager and
#      PyTorch with torch.compile, and selective recomputation in
#      deqbench and PyTorch eager (torch's selective checkpointing),
#      records in
#      <dir>/<gpu-name>-vs-pytorch.jsonl (a resumed suite: --resume).
#
#   scripts/gpu-check.sh [LOG_DIR]        (default results/gpu)
# Resumable: a step that passed leaves LOG_DIR/.done/<step>, and a rerun
# skips it (DQ_REDO=1 runs every step again), so a machine lent for ten
# minutes at a time finishes the list over several calls. DQ_ONLY="tests
# bench-block suite gc-vs-deq graphs eval managed vs-pytorch" (any of them)
# runs those groups only; graphs512 (d_model 512 with cuda_graphs, about 12
# minutes) runs only when DQ_ONLY names it.
# Environment: DQ_BUILDDIR (default build-gpu), DQ_GPU_STEPS (override the
# suite's steps, e.g. 20 for a quick look; warmup_steps becomes steps/5),
# DQ_SKIP_SETUP=1 (use DQ_BUILDDIR as it is: a machine that cannot install
# packages gets deqbench and tests/test_cuda* built elsewhere), CUDA toolkit
# in /usr/local/cuda. The default suite runs on Brown when data/brown holds
# the corpus (scripts/fetch-brown.sh), else on synthetic tokens.
# Every step runs even when an earlier one fails; the exit status is 1 when
# any step failed (the summary at the end says which).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
logdir="${1:-results/gpu}"
builddir="${DQ_BUILDDIR:-build-gpu}"
mkdir -p "$logdir"
export PATH="$PATH:/usr/local/cuda/bin"
failed=()

mkdir -p "$logdir/.done"
[ -n "${DQ_REDO:-}" ] && rm -f "$logdir"/.done/*

# group NAME: whether DQ_ONLY (when set) lists step group NAME.
group() {
	[ -z "${DQ_ONLY:-}" ] || [[ " $DQ_ONLY " == *" $1 "* ]]
}

# A group that runs only when DQ_ONLY names it (long ones).
named() {
	[[ " ${DQ_ONLY:-} " == *" $1 "* ]]
}

# step NAME LOGFILE CMD...: runs CMD, output to the terminal and LOGFILE;
# skipped when an earlier call passed it (LOG_DIR/.done).
step() {
	local name="$1" log="$2" mark
	shift 2
	mark="$logdir/.done/$(printf '%s' "$name" | tr -c 'a-zA-Z0-9=.-' '_')"
	if [ -e "$mark" ]; then
		echo "== $name: passed in an earlier call (rm $mark to rerun)" >&2
		return 0
	fi
	echo "== $name (log: $log)" >&2
	if ! "$@" 2>&1 | tee "$log"; then
		failed+=("$name")
		echo "== $name FAILED" >&2
		return 1
	fi
	touch "$mark"
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "gpu-check: nvidia-smi finds no GPU; the cuda tests will skip" >&2
fi
nvidia-smi >"$logdir/nvidia-smi.txt" 2>&1 || true
gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null |
	head -n 1)"
gpu_tag="$(printf '%s' "${gpu_name:-unknown-gpu}" | tr '[:upper:]' '[:lower:]' |
	sed -e 's/[^a-z0-9]\{1,\}/-/g' -e 's/^-//' -e 's/-$//')"

if [ -z "${DQ_SKIP_SETUP:-}" ]; then
	step setup "$logdir/setup.log" env DQ_BUILDDIR="$builddir" \
		scripts/setup.sh -Dcuda=enabled || {
		echo "gpu-check: the build failed; nothing else can run" >&2
		exit 1
	}
fi
if ! grep -q "DQ_CUDA_BUILD 1" "$builddir/dq_build.h" 2>/dev/null; then
	echo "gpu-check: $builddir was configured without CUDA" >&2
	failed+=("cuda-build")
fi

# The cuda suite's executables, run directly (as meson test --suite cuda
# would) so that a carried build needs no meson; the step fails when any
# of them does.
cuda_tests() {
	local rc=0 t
	for t in test_cuda_ops test_cuda_vec_ops test_cuda_bf16 test_cuda \
		test_cuda_managed test_cuda_graphs; do
		"$builddir/tests/$t" --jobs=1 --verbose || rc=1
	done
	return "$rc"
}
group tests && step "cuda tests" "$logdir/test-cuda.log" cuda_tests

step env "$logdir/env.json" "$builddir/bench/deqbench" env

# d_model n_heads d_ff seq_len batch_size (d_model 512 at the shapes of
# the d_model 512 suites' step: its bf16 GEMM floor is a target of
# plots/gpu_targets.py)
shapes=(
	"128 4 512 64 16"
	"256 4 1024 128 16"
	"512 8 2048 128 16"
	"1024 16 4096 512 8"
)
for s in "${shapes[@]}"; do
	group bench-block || break
	read -r d h f t b <<<"$s"
	for p in fp32 tf32 bf16; do
		step "bench-block d=$d $p" "$logdir/bench-block-d$d-$p.log" \
			"$builddir/bench/deqbench" bench-block device=cuda \
			d_model="$d" n_heads="$h" d_ff="$f" seq_len="$t" \
			batch_size="$b" precision="$p" iters=50 warmup=5 \
			vocab=10002 layers=16
	done
done

out="$logdir/$gpu_tag.jsonl"
extra=()
if [ ! -d data/brown/raw ]; then
	extra+=(corpus=synthetic)
fi
if [ -n "${DQ_GPU_STEPS:-}" ]; then
	extra+=("steps=$DQ_GPU_STEPS" "warmup_steps=$((DQ_GPU_STEPS / 5))")
fi
if group suite; then
	step "default suite" "$logdir/suite.log" \
		"$builddir/bench/deqbench" suite bench/suites/default.json \
		--resume device=cuda out="$out" "${extra[@]}"
	step report "$logdir/report.txt" "$builddir/bench/deqbench" report "$out"
fi

# 6. save_params and deqbench eval on the GPU (CUDA-event inference timing,
# inference-only memory): a DEQ of the default suite's shape trained briefly,
# then evaluated at its training tolerance (valid ppl equal to the run's)
# and at a loose one, and unrolled at L=12.
ev="$logdir/$gpu_tag-eval.jsonl"
params="$logdir/$gpu_tag-deq.safetensors"
model=(model=transformer d_model=128 n_heads=4 d_ff=512 seq_len=32
	batch_size=16 init=pytorch device=cuda "${extra[@]}")
if group eval; then
	# the parameters stay until every evaluation has passed (a resumed
	# call trains again only when they are gone)
	[ -e "$params" ] || rm -f "$logdir/.done/train_with_save_params"
	step "train with save_params" "$logdir/eval-train.log" \
		"$builddir/bench/deqbench" run "${model[@]}" method=deq \
		steps=200 warmup_steps=20 save_params="$params" out="$ev"
	evals_left=0
	for e in "method=deq f_tol=0.001" "method=deq f_tol=0.1" \
		"method=unroll layers=12"; do
		read -r -a kv <<<"$e"
		if [ ! -e "$params" ]; then
			evals_left=1
			break
		fi
		step "eval $e" "$logdir/eval-${kv[1]}.log" \
			"$builddir/bench/deqbench" eval "${model[@]}" "${kv[@]}" \
			params="$params" out="$ev" || evals_left=1
	done
	[ "$evals_left" = 0 ] && rm -f "$params"
fi

# 6b. checkpointing vs DEQ (the CPU twin of gc-vs-deq-gpu) on the GPU
gc="$logdir/$gpu_tag-gc.jsonl"
if group gc-vs-deq; then
	step "gc-vs-deq suite" "$logdir/gc-vs-deq.log" \
		"$builddir/bench/deqbench" suite bench/suites/gc-vs-deq.json \
		--resume device=cuda out="$gc" "${extra[@]}"
	step "gc-vs-deq report" "$logdir/gc-vs-deq.txt" \
		"$builddir/bench/deqbench" report "$gc"
fi

# 6b'. the same suite with cuda_graphs=true (recorded passes, device-side
# solve loops), then deqbench compare against the eager records of 6b
gcg="$logdir/$gpu_tag-gc-graphs.jsonl"
if group graphs; then
	step "gc-vs-deq suite, cuda_graphs" "$logdir/gc-vs-deq-graphs.log" \
		"$builddir/bench/deqbench" suite bench/suites/gc-vs-deq.json \
		--resume device=cuda cuda_graphs=true out="$gcg" "${extra[@]}"
	step "gc-vs-deq report, cuda_graphs" "$logdir/gc-vs-deq-graphs.txt" \
		"$builddir/bench/deqbench" report "$gcg"
	if [ -s "$gc" ]; then
		step "compare eager vs cuda_graphs" \
			"$logdir/gc-vs-deq-graphs-compare.txt" \
			"$builddir/bench/deqbench" compare --match cuda_graphs \
			"$gc" "$gcg"
	fi
fi

# 6b''. the paper-width suite (d_model 512, 1000 steps, ~12 minutes on an
# H100: over two calls, --resume) with cuda_graphs=true, for the eager
# records scripts/reproduce.sh gpu makes (results/gpu/gc-vs-deq-gpu.jsonl)
g512="$logdir/$gpu_tag-gc512-graphs.jsonl"
if named graphs512; then
	step "gc-vs-deq-gpu suite, cuda_graphs" "$logdir/gc512-graphs.log" \
		"$builddir/bench/deqbench" suite bench/suites/gc-vs-deq-gpu.json \
		--resume cuda_graphs=true out="$g512" "${extra[@]}"
	if [ -s results/gpu/gc-vs-deq-gpu.jsonl ]; then
		step "compare gc-vs-deq-gpu eager vs cuda_graphs" \
			"$logdir/gc512-graphs-compare.txt" \
			"$builddir/bench/deqbench" compare --match cuda_graphs \
			results/gpu/gc-vs-deq-gpu.jsonl "$g512"
	fi
fi

# 6c. unified memory against offload and unroll (method=managed), on the
# whole card and under device_mem_cap_mib=1024 (oversubscribed)
mg="$logdir/$gpu_tag-managed.jsonl"
if group managed; then
	step "managed-gpu suite" "$logdir/managed.log" \
		"$builddir/bench/deqbench" suite bench/suites/managed-gpu.json \
		--resume out="$mg" "${extra[@]}"
	step "managed report" "$logdir/managed.txt" \
		"$builddir/bench/deqbench" report "$mg"
fi

# 7. deqbench beside PyTorch eager and torch.compile, fp32 and bf16
vp="$logdir/$gpu_tag-vs-pytorch.jsonl"
if group vs-pytorch; then
	step "vs-pytorch-gpu suite" "$logdir/vs-pytorch.log" \
		"$builddir/bench/deqbench" suite bench/suites/vs-pytorch-gpu.json \
		--resume out="$vp" "${extra[@]}"
	step "vs-pytorch report" "$logdir/vs-pytorch.txt" \
		"$builddir/bench/deqbench" report "$vp"
fi

if ((${#failed[@]})); then
	echo "gpu-check: FAILED: ${failed[*]} (logs in $logdir)" >&2
	exit 1
fi
echo "gpu-check: all steps passed (logs in $logdir; records in $out)" >&2
