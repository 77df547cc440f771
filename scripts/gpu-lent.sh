#!/usr/bin/env bash
# gpu-lent.sh — the GPU checks on a lent machine (no packages, no
# git, calls of at most ten minutes, few files back), in one call.
#
#   scripts/gpu-lent.sh pack    here, at a clean commit: builds
#                               build-reproduce (-Dcuda=enabled) and packs
#                               deqbench, the cuda tests, their non-CUDA
#                               shared libraries and data/brown into
#                               results/tmp/carry.tar.xz (about 14 MB)
#   scripts/gpu-lent.sh run     on the lent machine (carry results/tmp):
#                               unpacks, runs gpu-check.sh groups and a few
#                               targeted runs in priority order under a
#                               deadline (LIMIT seconds, default 470), and
#                               leaves everything in $OUT/gpu.tgz
#
# Then here: mkdir -p results/gpu/check && tar xzf gpu.tgz --strip-components=1
# -C results/gpu/check && plots/gpu_targets.py --write results/gpu/check
# (results/gpu/README.md). The order: the cuda tests; bench-block in fp32,
# tf32 and bf16; d_model 512 steps (unroll fp32/bf16, eager/graphs; the DEQ
# in bf16); gc-vs-deq eager and with cuda_graphs at 500 steps; PyTorch bf16
# (torch.compile at d_model 512, eager at 512 and 128); d_model 128 steps;
# the managed suite; the default suite and eval; the vs-pytorch suite
# (resumed where a record file is carried). A step cut by the deadline
# leaves what it wrote. PARTS="tests bench-block steps gc torch managed
# suite vs-pytorch graphs512" (any of them; graphs512 only when named,
# about 12 minutes) runs those parts only, in that order.
set -u
cd "$(dirname "$0")/.." || exit 1
B=build-reproduce
TESTS="test_cuda_ops test_cuda_vec_ops test_cuda_bf16 test_cuda test_cuda_managed test_cuda_graphs"

pack() {
	if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
		echo "gpu-lent.sh pack: the work tree has uncommitted changes; commit first (records name the commit)" >&2
		exit 2
	fi
	[ -d data/brown/raw ] || scripts/fetch-brown.sh data || exit 1
	[ -d "$B" ] || meson setup "$B" -Dcuda=enabled || exit 1
	ninja -C "$B" bench/deqbench $(printf "tests/%s " $TESTS) || exit 1
	mkdir -p "$B/lib" results/tmp
	for f in "$B/bench/deqbench" $(printf "$B/tests/%s " $TESTS); do
		ldd "$f"
	done | awk '/=> \// {print $3}' | sort -u |
		grep -vE 'libc\.so|libm\.so|libpthread|ld-linux|libdl\.so|librt\.so|libcuda|libcublas|libcudart' |
		xargs -I{} cp -L {} "$B/lib/"
	tar cJf results/tmp/carry.tar.xz "$B/bench/deqbench" \
		$(printf "$B/tests/%s " $TESTS) "$B/dq_build.h" "$B/lib" data/brown
	ls -l results/tmp/carry.tar.xz
}

# run: under a deadline, writes $OUT/gpu and packs it into $OUT/gpu.tgz
run() {
	T0=$SECONDS
	LIMIT=${LIMIT:-470}
	tar xJf results/tmp/carry.tar.xz || exit 9
	L=$OUT/gpu
	mkdir -p "$L"
	export LD_LIBRARY_PATH=$PWD/$B/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export DQ_SKIP_SETUP=1 DQ_BUILDDIR=$B
	DQ_PYTHON=$(command -v python3)
	export DQ_PYTHON DQ_PYTORCH_SCRIPT=$PWD/bench/pytorch/deqtorch.py
	D=$B/bench/deqbench
	{
		date -u
		nvidia-smi
		nproc
		ldd "$D"
		python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
		echo "DQ_PYTHON=$DQ_PYTHON"
	} >"$L/machine.txt" 2>&1
	# the d_model 512 and 128 runs' shapes (steps512, torch512, steps128)
	M512=(model=transformer d_model=512 n_heads=8 d_ff=2048 seq_len=128
		batch_size=16 layers=16 corpus=brown data_dir=data steps=60
		warmup_steps=10 lr=0.00025 lr_warmup=10 clip=1.0 eval_tokens=4096
		init=pytorch device=cuda seed=1 out="$L/d512-steps.jsonl")
	M128=(model=transformer d_model=128 n_heads=4 d_ff=512 seq_len=32
		batch_size=16 layers=12 corpus=brown data_dir=data steps=100
		warmup_steps=10 lr=0.001 lr_warmup=30 clip=1.0 eval_tokens=4096
		init=pytorch device=cuda seed=1 method=unroll out="$L/d128-steps.jsonl")
	runs
	# the targets table (standard library only: any python3 runs it)
	python3 plots/gpu_targets.py --write --deqbench "$D" "$L" >>"$L/driver.log" 2>&1
	log "driver done"
	(cd "$OUT" && tar czf gpu.tgz gpu && rm -rf gpu)
}

left() { echo $((LIMIT - (SECONDS - T0))); }
log() { echo "$* at $((SECONDS - T0))s" >>"$L/driver.log"; }
cap_of() {
	local c=$1 l
	l=$(left)
	((c > l - 10)) && c=$((l - 10))
	echo "$c"
}
grp() { # grp CAP GROUPS...: gpu-check.sh groups, at most CAP seconds
	local c
	c=$(cap_of "$1")
	shift
	((c < 15)) && { log "skip $*"; return; }
	log "== group $* (cap $c)"
	DQ_ONLY="$*" timeout -k 5 "$c" scripts/gpu-check.sh "$L" >>"$L/gpu-check.log" 2>&1
	log "rc $? group $*"
}
one() { # one CAP NAME CMD...: one command, log in $L/NAME.log
	local c n
	c=$(cap_of "$1")
	n=$2
	shift 2
	((c < 15)) && { log "skip $n"; return; }
	log "== $n (cap $c)"
	timeout -k 5 "$c" "$@" >"$L/$n.log" 2>&1
	log "rc $? $n"
}

# part NAME: whether PARTS (default: all, in the order of runs) names it
part() {
	[ -z "${PARTS:-}" ] || [[ " $PARTS " == *" $1 "* ]]
}

runs() {
	part tests && grp 150 tests
	part bench-block && grp 100 bench-block
	part steps && steps512
	part gc && DQ_GPU_STEPS=500 grp 90 gc-vs-deq
	part gc && DQ_GPU_STEPS=500 grp 90 graphs
	part torch && torch512
	part steps && steps128
	part managed && grp 120 managed
	part suite && grp 70 suite eval
	part vs-pytorch && grp 150 vs-pytorch
	[[ " ${PARTS:-} " == *" graphs512 "* ]] && grp 540 graphs512
	return 0
}

steps512() {
	local DEQ=(method=deq f_solver=broyden b_solver=broyden f_max_iter=30
		b_max_iter=40)
	one 25 d512-unroll-fp32 "$D" run "${M512[@]}" method=unroll precision=fp32
	one 25 d512-unroll-bf16 "$D" run "${M512[@]}" method=unroll precision=bf16
	one 25 d512-unroll-bf16-graphs "$D" run "${M512[@]}" method=unroll precision=bf16 cuda_graphs=true
	one 25 d512-unroll-fp32-graphs "$D" run "${M512[@]}" method=unroll precision=fp32 cuda_graphs=true
	one 30 d512-deq-bf16 "$D" run "${M512[@]}" "${DEQ[@]}" precision=bf16
	one 30 d512-deq-bf16-graphs "$D" run "${M512[@]}" "${DEQ[@]}" precision=bf16 cuda_graphs=true
}

torch512() {
	one 120 d512-unroll-bf16-torch-compile "$D" run "${M512[@]}" method=unroll precision=bf16 impl=pytorch compile=true
	one 40 d512-unroll-bf16-torch-eager "$D" run "${M512[@]}" method=unroll precision=bf16 impl=pytorch
}

steps128() {
	one 40 d128-unroll-bf16 "$D" run "${M128[@]}" precision=bf16
	one 40 d128-unroll-bf16-graphs "$D" run "${M128[@]}" precision=bf16 cuda_graphs=true
	one 40 d128-unroll-fp32 "$D" run "${M128[@]}" precision=fp32
	one 40 d128-unroll-fp32-graphs "$D" run "${M128[@]}" precision=fp32 cuda_graphs=true
	one 60 d128-unroll-bf16-torch-eager "$D" run "${M128[@]}" precision=bf16 impl=pytorch
}

case "${1:-}" in
pack) pack ;;
run)
	if [ -z "${OUT:-}" ]; then
		echo "gpu-lent.sh run: OUT is not set; it runs on the lent machine (the device tool sets OUT)" >&2
		exit 2
	fi
	run
	;;
*)
	echo "usage: scripts/gpu-lent.sh pack | run   (results/gpu/README.md)" >&2
	exit 2
	;;
esac
