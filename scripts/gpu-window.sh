#!/usr/bin/env bash
# gpu-window.sh — the paper-scale answer from one short lent GPU window
# (a bare machine: no packages, no git, calls of at most ten minutes, a
# handful of files back), and every later window goes on where the last
# one stopped.
#
#   scripts/gpu-window.sh pack          here, at a clean commit: builds
#                                       build-reproduce with -Dcuda=enabled
#                                       and packs deqbench, the cuda tests,
#                                       their non-CUDA libraries and
#                                       data/brown into results/tmp/carry.tar.xz
#                                       (scripts/gpu-lent.sh pack)
#   LIMIT=480 scripts/gpu-window.sh run on the lent machine (carry
#                                       results/tmp): the parts below under
#                                       a deadline, then $OUT/window.tgz
#   scripts/gpu-window.sh unpack FILE   here: FILE (window.tgz) over
#                                       results/gpu/, then validates it
#
# The parts, in this order, each capped by what is left of LIMIT seconds
# (a part that would start with under 20 s left is skipped; one cut by the
# deadline gets SIGTERM, stops after its current step and keeps its record):
#   tests   the cuda test executables (test-cuda.log)
#   seed1   bench/suites/answer-gpu.json's seed 1: unroll, checkpoint every
#           4, the DEQ and the limited-memory DEQ at d_model 512
#   prices  bench-block at the answer's shapes in bf16 (a block forward and
#           VJP against cuBLAS's GEMMs: bench-block-d512-bf16.log)
#   torch   unroll at the answer's shapes in bf16: deqbench with cuda_graphs,
#           PyTorch with its whole step under torch.compile (mode
#           reduce-overhead: CUDA graphs, no autotuning), PyTorch eager,
#           deqbench again (vs-pytorch.jsonl); 300 steps each
#   rest    the answer suite's seeds 2 and 3 (suite --resume)
#   recompute (only when PARTS names it) bench/suites/recompute-gpu.json:
#           unroll, selective, checkpoint every 4 with and without
#           selective segments, 3 seeds, the answer's shapes
#           (recompute.jsonl; suite --resume, as the answer)
#   smoke   (only when PARTS names it) method=selective, 20 steps, in
#           PyTorch (torch >= 2.4's selective checkpoint policy) and in
#           deqbench (smoke.jsonl)
#   attention (only when PARTS names it) the attention's kernels at the
#           answer's width: bench-block at seq_len 256 in bf16 and fp32
#           with attention=unfused and flash (bench-block-att-*.log), and
#           the PyTorch rows' unroll run in bf16 with each (attention.jsonl): the
#           bf16 products on tensor cores and the fused kernel, timed and
#           their tapes' bytes
#   fused   (only when PARTS names it) the fused Broyden and Anderson
#           iterations (solver_kernels=fused) against the ops: deqbench price at
#           d_model 128 and 512 in bf16 with each (fused-prices.jsonl:
#           solver_update against block_fwd, the solver iteration's
#           marginal cost), then the answer's DEQ run with cuda_graphs
#           with each (fused.jsonl: the step, one WHILE node a solve)
#   epilogue (only when PARTS names it) the linear layers' bias and ReLU in
#           cuBLASLt's epilogue (epilogue=fused) against the separate pass:
#           bench-block at the answer's shapes in bf16 and fp32 with each
#           (bench-block-epi-*.log), and the bf16 unroll run with each
#           (epilogue.jsonl); epilogue=fused stays off by default until
#           these say it is faster
#   autotune (only when PARTS names it) the compiled PyTorch row with
#           mode=max-autotune, which autotunes every GEMM shape: it needs
#           more than a window, so Inductor's cache is carried from one
#           window to the next (results/tmp/inductor-cache.tgz)
# Seed 1 comes before the PyTorch rows, seeds 2 and 3 after them: a window
# cut short leaves a whole seed and the deqbench/PyTorch ratio measured in
# it, and the next window's suite --resume finishes the seeds.
#
# Records go to results/gpu/<gpu model>/ (answer.jsonl, vs-pytorch.jsonl),
# each window's logs to results/gpu/<gpu model>/windows/<UTC stamp>/
# (window.log says when each part started and ended). Commit them after
# unpack; the next window carries them in the tree and resumes.
# PARTS="tests seed1 prices torch rest recompute smoke attention fused
# epilogue autotune" (any of them) runs those only; recompute, smoke,
# attention, fused, epilogue and autotune run only when named (PARTS=autotune LIMIT=560: a window of its own).
#
# DQ_STANDIN=1 (the test, tests/scripts/test_window.py): a CPU stand-in of
# the same flow. pack uses DQ_BUILDDIR as it is (no build, no git check, no
# CUDA tests, no corpus); run trains tiny models on the CPU on synthetic
# tokens (STANDIN_ARGS) and writes results/gpu/standin/.
#
# Exit status: 0 every part ran and passed; 3 the deadline skipped or cut a
# part (run again in the next window); 1 a part failed; 2 bad use.
set -u
cd "$(dirname "$0")/.." || exit 1
B=${DQ_BUILDDIR:-build-reproduce}
SUITE=bench/suites/answer-gpu.json
# the answer's shapes (bench-block and the PyTorch rows) and the rest of
# the PyTorch rows' config: the suite's recipe, 300 steps
SHAPE=(model=transformer d_model=512 n_heads=8 d_ff=2048 seq_len=128
	batch_size=16 layers=16)
ROWS=(corpus=brown data_dir=data steps=300 warmup_steps=30 lr_warmup=30
	eval_tokens=16384 device=cuda)
BB=(device=cuda vocab=10002)
# DQ_STANDIN=1: tiny shapes on the CPU, added to the suite's runs (EXTRA)
STANDIN_SHAPE=(model=transformer d_model=16 n_heads=2 d_ff=32 seq_len=8
	batch_size=2 layers=4)
STANDIN_RUN=(device=cpu steps=6 warmup_steps=3 lr_warmup=2 eval_tokens=32
	corpus=synthetic threads=1)

usage() {
	echo "usage: scripts/gpu-window.sh pack | run | unpack FILE   (results/gpu/README.md)" >&2
	exit 2
}

pack() {
	if [ -n "${DQ_STANDIN:-}" ]; then
		[ -x "$B/bench/deqbench" ] || {
			echo "gpu-window.sh pack: $B/bench/deqbench is missing; build it or set DQ_BUILDDIR" >&2
			exit 2
		}
		mkdir -p "$B/lib" results/tmp
		ldd "$B/bench/deqbench" | awk '/=> \// {print $3}' |
			grep -E 'jansson|hwloc|openblas|gfortran|gsl|quadmath' |
			xargs -I{} cp -L {} "$B/lib/"
		tar cJf results/tmp/carry.tar.xz "$B/bench/deqbench" "$B/lib"
		return
	fi
	DQ_BUILDDIR=$B scripts/gpu-lent.sh pack
}

left() { echo $((LIMIT - (SECONDS - T0))); }
log() { echo "$(date -u +%H:%M:%S) +$((SECONDS - T0))s $*" | tee -a "$W/window.log" >&2; }

# part NAME: whether PARTS (default: all) names it
part() { [ -z "${PARTS:-}" ] || [[ " $PARTS " == *" $1 "* ]]; }

# sendback: $OUT/window.tgz holds what the window has so far, rewritten
# after every part: a call the device tool cuts short (its limit can be
# shorter than LIMIT when the session's device time runs low) still
# returns the parts that ended
sendback() {
	tar czf "$OUT/window.tgz.part" --exclude="*.lock" "$R" "${SENDBACK[@]}" &&
		mv -f "$OUT/window.tgz.part" "$OUT/window.tgz"
}

# timed CAP RESERVE NAME CMD...: CMD with its output in $W/NAME.log, for at
# most CAP seconds and never into the last RESERVE seconds of the window
timed() {
	local cap=$1 reserve=$2 name=$3 l rc
	shift 3
	l=$(($(left) - reserve))
	((cap > l)) && cap=$l
	if ((cap < 20)); then
		log "skip $name (deadline)"
		CUT=1
		return 0
	fi
	log "start $name (cap ${cap}s)"
	timeout -k 15 "$cap" "$@" >"$W/$name.log" 2>&1
	rc=$?
	log "end $name rc $rc"
	sendback
	case $rc in
	0) ;;
	124 | 137 | 143) CUT=1 ;;
	*) FAILED="$FAILED $name" ;;
	esac
}

# CUDA_TESTS: the cuda test executables; timed runs them through bash -c
# (timeout runs programs, not this script's functions)
CUDA_TESTS='rc=0
for t in test_cuda_ops test_cuda_vec_ops test_cuda_bf16 test_cuda \
	test_cuda_managed test_cuda_graphs; do
	"$0/tests/$t" --jobs=1 || rc=1
done
exit $rc'

# torch_rows: the same unroll step in deqbench and in PyTorch, one after
# the other, deqbench first and last (the drift between them is visible).
# The compiled row compiles the whole step with mode reduce-overhead (CUDA
# graphs, no autotuning): max-autotune's autotuning does not fit a window
# (part autotune)
torch_args() {
	TORCH_BASE=("${SHAPE[@]}" "${ROWS[@]}" method=unroll precision=bf16
		lr=0.00025 clip=1.0 init=pytorch seed=1 out="$R/vs-pytorch.jsonl")
}
torch_rows() {
	torch_args
	timed 40 0 torch-deqbench-1 "$D" run "${TORCH_BASE[@]}" cuda_graphs="$GRAPHS"
	timed 180 60 torch-compile env DEQTORCH_COMPILE_MODE=reduce-overhead \
		"$D" run "${TORCH_BASE[@]}" impl=pytorch compile=true
	timed 60 20 torch-eager "$D" run "${TORCH_BASE[@]}" impl=pytorch
	timed 40 0 torch-deqbench-2 "$D" run "${TORCH_BASE[@]}" cuda_graphs="$GRAPHS"
}

# autotune (only when PARTS names it): the compiled row with
# mode=max-autotune, given the rest of the window. Inductor's cache
# (TORCHINDUCTOR_CACHE_DIR, its autotuning results and kernels) comes back
# in window.tgz as results/tmp/inductor-cache.tgz and is carried into the
# next window, so autotuning cut by one window goes on in the next
autotune() {
	local cache=results/tmp/inductor
	torch_args
	mkdir -p "$cache"
	[ -f "$cache-cache.tgz" ] && tar xzf "$cache-cache.tgz" -C results/tmp
	timed 100000 25 torch-compile-max-autotune env \
		TORCHINDUCTOR_CACHE_DIR="$PWD/$cache" DEQTORCH_COMPILE_MODE=max-autotune \
		"$D" run "${TORCH_BASE[@]}" impl=pytorch compile=true
	tar czf "$cache-cache.tgz" -C results/tmp inductor
	SENDBACK+=("$cache-cache.tgz")
}

# smoke (only when PARTS names it): PyTorch's selective recomputation
# (torch >= 2.4's selective checkpoint policy, never run on the CPU's
# torch 1.13) and deqbench's, 20 steps each, into smoke.jsonl
smoke() {
	local a s=("${SHAPE[@]}" steps=20 warmup_steps=5 lr_warmup=5
		eval_tokens=4096 method=selective precision=bf16 seed=1
		out="$R/smoke.jsonl")
	for a in "${ROWS[@]}"; do # ROWS less the keys given above
		case $a in steps=* | warmup_steps=* | lr_warmup=* | eval_tokens=*) ;;
		*) s+=("$a") ;;
		esac
	done
	timed 90 0 smoke-selective-pytorch "$D" run "${s[@]}" impl=pytorch
	timed 40 0 smoke-selective-deqbench "$D" run "${s[@]}"
}

# bench-block in bf16 and fp32 at the shape given, then the bf16 unroll run
# at the answer's shapes, with KEY=A and with KEY=B: logs
# bench-block-TAG-VALUE-PRECISION, runs NAME-VALUE into NAME.jsonl
key_ab() {
	local tag=$1 name=$2 key=$3 a=$4 b=$5 v p
	shift 5
	for p in bf16 fp32; do
		for v in "$a" "$b"; do
			timed 40 0 "bench-block-$tag-$v-$p" "$D" bench-block \
				"$@" "${BB[@]}" precision=$p "$key=$v"
		done
	done
	for v in "$a" "$b"; do
		timed 60 0 "$name-$v" "$D" run "${SHAPE[@]}" "${ROWS[@]}" \
			method=unroll precision=bf16 lr=0.00025 init=pytorch seed=1 \
			cuda_graphs="$GRAPHS" "$key=$v" out="$R/$name.jsonl"
	done
}

# attention (only when PARTS names it): the unfused and fused attention,
# block (at seq_len 256) and step
attention() {
	key_ab att attention attention unfused flash \
		"${SHAPE[@]/seq_len=128/seq_len=256}"
}

# fused (only when PARTS names it): the fused Broyden/Anderson iterations
# against the ops, priced at two widths and in the answer's DEQ run
fused() {
	local d k s pa=(vocab_size=10002 price_cap_s=15)
	[ "$tag" = standin ] && pa=(price_cap_s=1 "${STANDIN_RUN[@]}")
	for d in 128 512; do
		s=("${SHAPE[@]/d_model=512/d_model=$d}")
		s=("${s[@]/d_ff=2048/d_ff=$((4 * d))}")
		for k in ops fused; do
			timed 60 0 "price-$k-d$d" "$D" price "${s[@]}" "${pa[@]}" \
				method=deq precision=bf16 solver_kernels=$k \
				out="$R/fused-prices.jsonl"
		done
	done
	for k in ops fused; do
		timed 90 0 "fused-deq-$k" "$D" run "${SHAPE[@]}" "${ROWS[@]}" \
			method=deq precision=bf16 lr=0.00025 seed=1 \
			cuda_graphs="$GRAPHS" solver_kernels=$k out="$R/fused.jsonl"
	done
}

# epilogue (only when PARTS names it): bias and ReLU in the GEMM's
# epilogue against the separate pass, block and step
epilogue() {
	key_ab epi epilogue epilogue separate fused "${SHAPE[@]}"
}

run_parts() {
	local sargs=("$SUITE" --resume out="$R/answer.jsonl" "${EXTRA[@]}")
	if part tests; then
		if [ -x "$B/tests/test_cuda" ]; then
			timed 90 0 test-cuda bash -c "$CUDA_TESTS" "$B"
		else
			log "skip test-cuda (not in the carried build)"
		fi
	fi
	# seed 1: the suite with seed=1 collapses to its four seed-1 runs,
	# which are the same runs (same records) as the full suite's
	part seed1 && timed 200 150 answer-seed1 "$D" suite "${sargs[@]}" seed=1
	part prices && timed 40 0 bench-block-d512-bf16 "$D" bench-block \
		"${SHAPE[@]}" "${BB[@]}" precision=bf16
	part torch && torch_rows
	part rest && timed 100000 10 answer-rest "$D" suite "${sargs[@]}"
	[[ " ${PARTS:-} " == *" recompute "* ]] &&
		timed 100000 10 recompute "$D" suite bench/suites/recompute-gpu.json \
			--resume out="$R/recompute.jsonl" "${EXTRA[@]}"
	[[ " ${PARTS:-} " == *" smoke "* ]] && smoke
	[[ " ${PARTS:-} " == *" attention "* ]] && attention
	[[ " ${PARTS:-} " == *" fused "* ]] && fused
	[[ " ${PARTS:-} " == *" epilogue "* ]] && epilogue
	[[ " ${PARTS:-} " == *" autotune "* ]] && autotune
	"$D" validate --strict "$R"/*.jsonl >"$W/validate.log" 2>&1 ||
		FAILED="$FAILED validate"
	[ -s "$R/answer.jsonl" ] && "$D" report "$R/answer.jsonl" >"$W/report.txt" 2>&1
	return 0
}

run() {
	[ -n "${OUT:-}" ] || {
		echo "gpu-window.sh run: OUT is not set; it runs on the lent machine (the device tool sets OUT)" >&2
		exit 2
	}
	T0=$SECONDS
	LIMIT=${LIMIT:-480}
	tar xJf results/tmp/carry.tar.xz || exit 1
	export LD_LIBRARY_PATH=$PWD/$B/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	D=$B/bench/deqbench
	DQ_PYTHON=$(command -v python3)
	export DQ_PYTHON DQ_PYTORCH_SCRIPT=$PWD/bench/pytorch/deqtorch.py
	if [ -n "${DQ_STANDIN:-}" ]; then
		tag=standin GRAPHS=false SHAPE=("${STANDIN_SHAPE[@]}")
		EXTRA=("${STANDIN_SHAPE[@]}" "${STANDIN_RUN[@]}" cuda_graphs=false)
		ROWS=("${STANDIN_RUN[@]}") BB=(device=cpu iters=2 warmup=1 vocab=50)
		DQ_PYTHON=${DQ_STANDIN_PYTHON:-$DQ_PYTHON}
	else
		tag=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 |
			tr '[:upper:]' '[:lower:]' | sed -e 's/[^a-z0-9]\{1,\}/-/g' -e 's/^-//' -e 's/-$//')
		EXTRA=() GRAPHS=true
	fi
	R=results/gpu/${tag:-unknown-gpu}
	W=$R/windows/$(date -u +%Y%m%dT%H%M%SZ)
	mkdir -p "$W"
	CUT=0 FAILED="" SENDBACK=()
	{
		date -u
		nvidia-smi 2>&1
		nproc
		python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1
		"$D" env
	} >"$W/machine.txt" 2>&1
	log "window of ${LIMIT}s on $tag, commit $("$D" env 2>/dev/null | grep -o '"git_commit": *"[^"]*"' | head -n 1)"
	run_parts
	log "done; failed:${FAILED:- none}; cut: $CUT"
	sendback || exit 1
	[ -n "$FAILED" ] && exit 1
	((CUT)) && exit 3
	exit 0
}

unpack() {
	local f=${1:-}
	[ -f "$f" ] || {
		echo "gpu-window.sh unpack: '$f' is not a file; give the window.tgz the lent machine sent back" >&2
		exit 2
	}
	tar tzf "$f" | grep -qvE '^results/gpu/|^results/tmp/inductor-cache\.tgz$' && {
		echo "gpu-window.sh unpack: $f holds files outside results/gpu/ (and Inductor's cache); not unpacked" >&2
		exit 2
	}
	tar xzf "$f" || exit 1
	tar tzf "$f" | grep '\.jsonl$' | sed 's/^/unpacked /'
}

case "${1:-}" in
pack) pack ;;
run) run ;;
unpack) unpack "${2:-}" ;;
*) usage ;;
esac
