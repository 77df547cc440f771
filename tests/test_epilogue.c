/* test_epilogue.c — epilogue=fused (kernels/backend.h gemm_bias_act: a
 * linear layer's bias, and the transformer's ReLU, in the GEMM's
 * epilogue; cuBLASLt on cuda) on the CPU, where it is the same ops:
 *
 *   1. gemm_bias_act is bit for bit the GEMM then bias_forward or
 *      bias_act_forward (ReLU), with beta 0 and 1, on cpu and cpu64, and
 *      in bf16 (the weights' cast and gemm_bf16_mixed) on cpu.
 *   2. A training step of every model kind under method=unroll (and the
 *      transformer under deq) with epilogue=fused is bit for bit the
 *      step with epilogue=separate, in fp32 and bf16: the model routes
 *      every linear forward with a bias through the op, and nothing
 *      else changes.
 *   3. The key: parsed, named, refused with impl=pytorch.
 * The CUDA op against these is tests/test_cuda_bf16.c's epilogue test. */
#include "test_deq_util.h"
#include "test_ops_util.h"

/* C = act(A Wᵀ + beta C + b) both ways; the same bits. */
static void check_op(const char *bk, int bf16, int relu, double beta)
{
	struct backend *be = make(bk, 0);
	const int M = 37, N = 29, K = 23;
	struct pool pl = {be, {0}, 0};
	double *A = rnd((size_t)M * K, 1), *W = rnd((size_t)N * K, 1);
	double *b = rnd((size_t)N, 1), *C0 = rnd((size_t)M * N, 1);
	double *x = zeros((size_t)M * N), *y = zeros((size_t)M * N);
	void *dA = pool_up(&pl, A, (size_t)M * K);
	void *dW = pool_up(&pl, W, (size_t)N * K);
	void *db = pool_up(&pl, b, (size_t)N);
	void *c1 = pool_up(&pl, C0, (size_t)M * N);
	void *c2 = pool_up(&pl, C0, (size_t)M * N);
	void *scr = NULL;
	uint16_t *w16 = NULL;
	if (bf16) {
		size_t sb = be_gemm_bf16_scratch_bytes(be, M, N, K);
		scr = backend_alloc_bytes(be, sb, MEM_WORKSPACE);
		w16 = backend_alloc_bytes(be, sizeof(uint16_t) * N * K,
					  MEM_WORKSPACE);
		be_to_bf16(be, w16, dW, (size_t)N * K);
		be_gemm_bf16_mixed(be, 0, 1, M, N, K, 1.0, dA, K, w16, K, beta,
				   c1, N, scr);
	} else {
		be_gemm(be, 0, 1, M, N, K, 1.0, dA, K, dW, K, beta, c1, N);
	}
	if (relu)
		be_bias_act_forward(be, ACT_RELU, c1, db, M, N);
	else
		be_bias_forward(be, c1, db, M, N);
	be_gemm_bias_act(be, relu, M, N, K, beta, dA, dW, w16, db, c2, scr);
	pool_down(&pl, x, c1, (size_t)M * N);
	pool_down(&pl, y, c2, (size_t)M * N);
	cr_assert_eq(memcmp(x, y, sizeof(double) * M * N), 0,
		     "%s bf16 %d relu %d beta %g: not the two ops' bits", bk,
		     bf16, relu, beta);
	if (bf16) {
		backend_free(be, scr);
		backend_free(be, w16);
	}
	pool_free(&pl);
	free(A), free(W), free(b), free(C0), free(x), free(y);
	backend_destroy(be);
}

Test(epilogue, op_is_the_two_ops)
{
	rng_state = 17;
	for (int relu = 0; relu < 2; relu++)
		for (int bt = 0; bt < 2; bt++) {
			check_op("cpu", 0, relu, bt);
			check_op("cpu64", 0, relu, bt);
			check_op("cpu", 1, relu, bt);
		}
}

static const struct shape odd = {3, 5, 12, 3, 20, 17};

/* One training step of kind under c with each epilogue: the same bits. */
static void check_step(enum model_kind kind, enum dq_precision p,
		       struct method_config c)
{
	struct step_out r[2];
	for (int e = 0; e < 2; e++) {
		struct model_config mc = model_cfg(kind, odd, 11);
		mc.precision = p;
		mc.epilogue = e ? MODEL_EPI_FUSED : MODEL_EPI_SEPARATE;
		struct model *m = model_of(make_be("cpu"), &mc);
		set_tokens(m, 5);
		void *z = backend_alloc(m->be, m->n_state, MEM_HEAD);
		r[e] = step_of(m, c, z);
		if (e)
			assert_same_step(m, &r[0], &r[1], "epilogue=fused");
		backend_free(m->be, z);
		close_model(m);
	}
	step_out_free(&r[0]);
	step_out_free(&r[1]);
}

Test(epilogue, steps_are_bitwise_the_separate_ones, .timeout = 120)
{
	enum model_kind kinds[] = {MODEL_TRANSFORMER, MODEL_TANH_CELL,
				   MODEL_TRELLISNET};
	for (int p = 0; p < 2; p++) {
		enum dq_precision pr = p ? DQ_PREC_BF16 : DQ_PREC_FP32;
		for (int k = 0; k < 3; k++)
			check_step(kinds[k], pr,
				   cfg_of(method_kind_parse("unroll"), 3, 0));
		check_step(MODEL_TRANSFORMER, pr, deq_cfg(BMODE_IFT));
	}
}

Test(epilogue, key_parsed_named)
{
	cr_assert_eq(model_epilogue_parse("fused"), MODEL_EPI_FUSED);
	cr_assert_eq(model_epilogue_parse("separate"), MODEL_EPI_SEPARATE);
	cr_assert_eq(model_epilogue_parse("lt"), -1);
	cr_assert_str_eq(model_epilogue_name(MODEL_EPI_FUSED), "fused");
}
