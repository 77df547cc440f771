/* test_gemm_log.c — model_gemm's shape log (models/model.h): for every
 * model kind and both GEMM paths (be_gemm at fp32, be_gemm_bf16 at bf16):
 *   1. the log of one block forward (with and without a tape), of one vjp
 *      with parameter gradients and of one input-only vjp equals the
 *      shapes the kind's formulas give (written out below from
 *      docs/models.md, not from the model's code), identical shapes
 *      merged into one entry with their count;
 *   2. model_block_flops = Σ over the forward's log of 2 M N K count, plus
 *      the transformer's q kᵀ and att v (4 B T² d: be_attention_forward,
 *      not a model_gemm); the vjp with parameter gradients logs twice the
 *      forward's GEMM FLOPs, the input-only vjp once (bench-block's 3 F_fwd
 *      convention);
 *   3. logging off (never started, or stopped) leaves a log untouched, and
 *      logging on changes no bit of the block's output or gradients.
 */
#include "models/model.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "test_model_util.h"

/* Odd sizes; the transformer's F = 20 makes every shape distinct. */
static const struct shape odd = {3, 5, 12, 3, 20, 17};
/* F = 3d: qkv's and ff1's GEMMs have one shape, so the log merges them. */
static const struct shape merged = {2, 4, 8, 2, 24, 11};

#define MAXW 16
struct want {
	int n;
	struct model_gemm_shape s[MAXW];
};

static void add(struct want *w, int ta, int tb, int M, int N, int K, long c)
{
	for (int i = 0; i < w->n; i++) {
		struct model_gemm_shape *e = &w->s[i];
		if (e->ta == ta && e->tb == tb && e->M == M && e->N == N &&
		    e->K == K) {
			e->count += c;
			return;
		}
	}
	cr_assert_lt(w->n, MAXW);
	w->s[w->n++] = (struct model_gemm_shape){ta, tb, M, N, K, c};
}

/* The block's GEMMs by the kind's formulas (N = B T; d = d_model, F =
 * d_ff; trellisnet's h = d_model): forward (phase 0), vjp input gradients
 * (phase 1), vjp weight gradients (phase 2). */
static struct want shapes_of(enum model_kind k, struct shape s, int phase)
{
	struct want w = {0};
	int N = s.B * s.T, d = s.d, F = s.F;
	if (k == MODEL_TRANSFORMER) {
		/* y = x Wᵀ of qkv (N,3d,d), out (N,d,d), ff1 (N,F,d), ff2
		 * (N,d,F); dx = dy W; dW = dyᵀ x */
		const int io[4][2] = {{d, 3 * d}, {d, d}, {d, F}, {F, d}};
		for (int i = 0; i < 4; i++) {
			int in = io[i][0], out = io[i][1];
			if (phase == 0)
				add(&w, 0, 1, N, out, in, 1);
			else if (phase == 1)
				add(&w, 0, 0, N, in, out, 1);
			else
				add(&w, 1, 0, out, in, N, 1);
		}
	} else {
		/* tanh_cell: one (N,d,d) GEMM; trellisnet: 4 gates x 2 taps */
		cr_assert(k == MODEL_TANH_CELL || k == MODEL_TRELLISNET,
			  "model=%s: write its GEMM shapes here",
			  model_kind_name(k));
		long c = k == MODEL_TRELLISNET ? 8 : 1;
		if (phase == 0)
			add(&w, 0, 1, N, d, d, c);
		else if (phase == 1)
			add(&w, 0, 0, N, d, d, c);
		else
			add(&w, 1, 0, d, d, N, c);
	}
	return w;
}

static void assert_log_eq(const struct model_gemm_log *log,
			  const struct want *w, const char *what)
{
	cr_assert_eq(log->dropped, 0, "%s", what);
	cr_assert_eq(log->n, w->n, "%s: %d entries, want %d", what, log->n,
		     w->n);
	for (int i = 0; i < w->n; i++) {
		const struct model_gemm_shape *x = &w->s[i];
		int found = 0;
		for (int j = 0; j < log->n; j++) {
			const struct model_gemm_shape *e = &log->s[j];
			if (e->ta == x->ta && e->tb == x->tb && e->M == x->M &&
			    e->N == x->N && e->K == x->K) {
				cr_assert_eq(e->count, x->count,
					     "%s: (%d,%d,%d,%d,%d) x%ld, "
					     "want x%ld",
					     what, x->ta, x->tb, x->M, x->N,
					     x->K, e->count, x->count);
				found = 1;
			}
		}
		cr_assert(found, "%s: no (%d,%d,%d,%d,%d) in the log", what,
			  x->ta, x->tb, x->M, x->N, x->K);
	}
}

/* Buffers of one block application of m, O(1) contents. */
struct blk {
	void *zi, *zo, *gi, *go, *tape;
};

static struct blk blk_of(struct model *m)
{
	struct backend *be = m->be;
	struct blk b = {
	    dev(be, m->n_state), dev(be, m->n_state), dev(be, m->n_state),
	    dev(be, m->n_state),
	    backend_alloc_bytes(be, model_tape_bytes(m), MEM_DEPTH)};
	cr_assert_not_null(b.tape);
	be_fill(be, b.zi, 0.25, m->n_state);
	be_fill(be, b.go, 0.5, m->n_state);
	be_fill(be, m->u, 0.125, m->n_u);
	return b;
}

static void blk_free(struct model *m, struct blk *b)
{
	void *p[] = {b->zi, b->zo, b->gi, b->go, b->tape};
	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		backend_free(m->be, p[i]);
}

/* The model_gemm FLOPs model_block_flops counts besides the GEMMs: the
 * transformer's q kᵀ and att v over the full T×T scores. */
static double non_gemm_flops(const struct model *m)
{
	if (m->cfg.kind != MODEL_TRANSFORMER)
		return 0;
	return 4.0 * (double)m->B * m->T * (double)m->T * m->d;
}

static void check_kind(enum model_kind k, struct shape s, enum dq_precision p)
{
	struct model_config c = model_cfg(k, s, 5);
	c.precision = p;
	struct model *m = model_of(make_be("cpu"), &c);
	struct blk b = blk_of(m);
	struct model_gemm_log log;
	struct want fwd = shapes_of(k, s, 0), dx = shapes_of(k, s, 1);
	struct want vjp = dx, dw = shapes_of(k, s, 2);
	char what[128];
	for (int i = 0; i < dw.n; i++)
		add(&vjp, dw.s[i].ta, dw.s[i].tb, dw.s[i].M, dw.s[i].N,
		    dw.s[i].K, dw.s[i].count);
	snprintf(what, sizeof(what), "%s %s", model_kind_name(k),
		 dq_precision_name(p));

	model_gemm_log_start(m, &log);
	model_block_forward(m, b.zo, b.zi, m->u, b.tape);
	model_gemm_log_stop(m);
	assert_log_eq(&log, &fwd, what);
	double f = model_gemm_log_flops(&log);
	cr_assert_eq(model_block_flops(m), f + non_gemm_flops(m), "%s", what);

	model_gemm_log_start(m, &log);
	model_block_forward(m, b.zo, b.zi, m->u, NULL);
	model_gemm_log_stop(m);
	assert_log_eq(&log, &fwd, what);

	model_gemm_log_start(m, &log);
	model_block_vjp(m, b.gi, m->gu, b.go, b.tape, 1);
	model_gemm_log_stop(m);
	assert_log_eq(&log, &vjp, what);
	cr_assert_eq(model_gemm_log_flops(&log), 2 * f, "%s", what);

	model_gemm_log_start(m, &log);
	model_block_vjp(m, b.gi, NULL, b.go, b.tape, 0);
	model_gemm_log_stop(m);
	assert_log_eq(&log, &dx, what);
	cr_assert_eq(model_gemm_log_flops(&log), f, "%s", what);

	blk_free(m, &b);
	struct backend *be = m->be;
	model_destroy(m);
	backend_destroy(be);
}

Test(gemm_log, every_kind_fp32)
{
	for (int k = 0; k < model_kind_count(); k++)
		check_kind(k, odd, DQ_PREC_FP32);
	check_kind(MODEL_TRANSFORMER, merged, DQ_PREC_FP32);
}

/* bf16: model_gemm's be_gemm_bf16 path logs too. */
Test(gemm_log, every_kind_bf16)
{
	for (int k = 0; k < model_kind_count(); k++)
		check_kind(k, odd, DQ_PREC_BF16);
	check_kind(MODEL_TRANSFORMER, merged, DQ_PREC_BF16);
}

/* One forward and one vjp of m into host copies of z_out, gz_in, gu and
 * the gradients (n_state, n_state, n_u, n_param_elems doubles). */
static void run_block(struct model *m, struct blk *b, double *out)
{
	model_zero_grads(m);
	model_block_forward(m, b->zo, b->zi, m->u, b->tape);
	model_block_vjp(m, b->gi, m->gu, b->go, b->tape, 1);
	down(m->be, out, b->zo, m->n_state);
	down(m->be, out + m->n_state, b->gi, m->n_state);
	down(m->be, out + 2 * m->n_state, m->gu, m->n_u);
	down(m->be, out + 2 * m->n_state + m->n_u, m->grad_buf,
	     m->n_param_elems);
}

/* Off, a log is not written; on, the block's numbers are the same bits. */
Test(gemm_log, off_untouched_and_on_bitwise)
{
	for (int k = 0; k < model_kind_count(); k++)
		for (int p = 0; p < 2; p++) {
			struct model_config c = model_cfg(k, odd, 5);
			c.precision = p ? DQ_PREC_BF16 : DQ_PREC_FP32;
			struct model *m = model_of(make_be("cpu"), &c);
			struct blk b = blk_of(m);
			struct model_gemm_log log, seen;
			size_t n = 2 * m->n_state + m->n_u + m->n_param_elems;
			double *off = host(n), *on = host(n);

			memset(&log, 0xa5, sizeof(log));
			seen = log;
			run_block(m, &b, off); /* never started */
			cr_assert(!memcmp(&log, &seen, sizeof(log)));
			model_gemm_log_start(m, &log);
			run_block(m, &b, on);
			model_gemm_log_stop(m);
			cr_assert_gt(log.n, 0);
			cr_assert(!memcmp(off, on, n * sizeof(double)),
				  "%s: logging changed the block's bits",
				  model_kind_name(k));
			seen = log;
			run_block(m, &b, on); /* stopped */
			cr_assert(!memcmp(&log, &seen, sizeof(log)));
			cr_assert(!memcmp(off, on, n * sizeof(double)));

			free(off);
			free(on);
			blk_free(m, &b);
			struct backend *be = m->be;
			model_destroy(m);
			backend_destroy(be);
		}
}
