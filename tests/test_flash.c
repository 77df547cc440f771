/*
 * test_flash.c — attention=flash (kernels/cpu/cpu_flash.c, the CPU twin of
 * kernels/cuda/cuda_flash.cu) on the CPU backends:
 *   1. the fused forward and backward equal the unfused attention's in
 *      fp32 (another summation order: relative L2 within 1e-5), lse is
 *      the rows' log-sum-exp as (hi, lo) with hi a bf16 value;
 *   2. the backward against central finite differences of Σ w ∘ out in
 *      float64 (cpu64);
 *   3. bf16: within 1e-2 of fp32's flash, not equal to it;
 *   4. a transformer step with attention=flash: loss and every gradient
 *      as unfused's (unroll, DEQ), selective's bit for bit unroll's, and
 *      a tape B H T² − 2 B H T elements smaller.
 * Shapes span several 32-row blocks and a partial one (T 70).
 */
#define DQ_TEST_SEED 7
#include "test_util.h"
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/bf16.h"
#include "test_deq_util.h"

static double rel_l2(const double *a, const double *b, size_t n)
{
	double d = 0, s = 0;
	for (size_t i = 0; i < n; i++)
		d += (b[i] - a[i]) * (b[i] - a[i]), s += a[i] * a[i];
	return sqrt(d / (s > 0 ? s : 1e-300));
}

/* One attention problem on backend be: qkv and dout uploaded, and the
 * outputs of the fused (flash) or the unfused ops downloaded. */
struct att_case {
	int B, T, C, H;
	double *qkv, *dout;
};

struct att_out {
	double *out, *dqkv, *lse;
};

static size_t n_qkv(const struct att_case *a)
{
	return (size_t)a->B * a->T * 3 * a->C;
}

static size_t n_out(const struct att_case *a)
{
	return (size_t)a->B * a->T * a->C;
}

static struct att_out run(struct backend *be, const struct att_case *a,
			  int flash, int bf16)
{
	size_t nq = n_qkv(a), no = n_out(a);
	size_t rows = (size_t)a->B * a->H * a->T, na = rows * a->T;
	struct att_out r = {host(no), host(nq), host(2 * rows)};
	void *Q = dev(be, nq), *dO = dev(be, no), *O = dev(be, no);
	void *A = dev(be, flash ? 2 * rows : na), *S = dev(be, na);
	void *D = dev(be, nq);
	void *ws = backend_alloc_bytes(
	    be, be_attention_bf16_ws_bytes(be, a->B, a->T, a->C, a->H),
	    MEM_WORKSPACE);
	up(be, Q, a->qkv, nq), up(be, dO, a->dout, no);
	if (flash) {
		be_attention_flash_forward(be, O, A, Q, a->B, a->T, a->C, a->H,
					   bf16);
		be_attention_flash_backward(be, D, S, dO, Q, O, A, ws, a->B,
					    a->T, a->C, a->H, bf16);
		down(be, r.lse, A, 2 * rows);
	} else {
		be_attention_forward(be, O, A, Q, a->B, a->T, a->C, a->H);
		be_attention_backward(be, D, S, dO, Q, A, a->B, a->T, a->C,
				      a->H);
	}
	down(be, r.out, O, no), down(be, r.dqkv, D, nq);
	backend_free(be, Q), backend_free(be, dO), backend_free(be, O);
	backend_free(be, A), backend_free(be, S), backend_free(be, D);
	backend_free(be, ws);
	return r;
}

static void att_out_free(struct att_out *r)
{
	free(r->out), free(r->dqkv), free(r->lse);
}

static struct att_case make_case(int B, int T, int C, int H, int round_qkv)
{
	struct att_case a = {B, T, C, H, NULL, NULL};
	a.qkv = host(n_qkv(&a)), a.dout = host(n_out(&a));
	rnd_fill(a.qkv, n_qkv(&a), 1.0), rnd_fill(a.dout, n_out(&a), 1.0);
	for (size_t i = 0; round_qkv && i < n_qkv(&a); i++)
		a.qkv[i] = (double)dq_bf16_round((float)a.qkv[i]);
	return a;
}

/* The log-sum-exp of the scaled causal scores of row t of (b, h). */
static double ref_lse(const struct att_case *a, int b, int h, int t)
{
	int dh = a->C / a->H, ld = 3 * a->C;
	const double *q = a->qkv + (size_t)b * a->T * ld + (size_t)h * dh;
	double s[256], mx = -INFINITY, sum = 0;
	for (int u = 0; u <= t; u++) {
		double x = 0;
		for (int i = 0; i < dh; i++)
			x += q[t * ld + i] * q[u * ld + a->C + i];
		s[u] = x / sqrt((double)dh), mx = fmax(mx, s[u]);
	}
	for (int u = 0; u <= t; u++)
		sum += exp(s[u] - mx);
	return mx + log(sum);
}

Test(flash, equals_unfused_attention)
{
	struct backend *be = make_be("cpu");
	struct att_case a = make_case(2, 70, 24, 3, 0);
	struct att_out f = run(be, &a, 1, 0), u = run(be, &a, 0, 0);
	cr_assert_leq(rel_l2(u.out, f.out, n_out(&a)), 1e-5);
	cr_assert_leq(rel_l2(u.dqkv, f.dqkv, n_qkv(&a)), 1e-5);
	for (int b = 0; b < a.B; b++)
		for (int h = 0; h < a.H; h++)
			for (int t = 0; t < a.T; t++) {
				size_t r = ((size_t)b * a.H + h) * a.T + t;
				double hi = f.lse[2 * r], lo = f.lse[2 * r + 1];
				cr_assert_eq(hi, dq_bf16_round((float)hi));
				cr_assert(
				    fabs(hi + lo - ref_lse(&a, b, h, t)) < 1e-5,
				    "lse of row %zu: %.9g + %.9g", r, hi, lo);
			}
	att_out_free(&f), att_out_free(&u);
	free(a.qkv), free(a.dout);
	backend_destroy(be);
}

/* L(qkv) = Σ dout ∘ out(qkv) in float64: its gradient is the backward of
 * dout. Central differences at h = 1e-5 on 80 coordinates spread over q,
 * k and v: truncation O(h²) and rounding O(1e-16 / h), far below 1e-6 of
 * the gradient's scale. */
Test(flash, backward_matches_finite_differences)
{
	struct backend *be = make_be("cpu64");
	struct att_case a = make_case(1, 40, 8, 2, 0);
	size_t nq = n_qkv(&a), no = n_out(&a);
	struct att_out g = run(be, &a, 1, 0);
	double scale = 0;
	for (size_t i = 0; i < nq; i++)
		scale = fmax(scale, fabs(g.dqkv[i]));
	for (int k = 0; k < 80; k++) {
		size_t i = (size_t)k * (nq / 80) + (size_t)(k % 7);
		double x = a.qkv[i], L[2];
		for (int sgn = 0; sgn < 2; sgn++) {
			a.qkv[i] = x + (sgn ? -1e-5 : 1e-5);
			struct att_out r = run(be, &a, 1, 0);
			L[sgn] = 0;
			for (size_t j = 0; j < no; j++)
				L[sgn] += a.dout[j] * r.out[j];
			att_out_free(&r);
		}
		a.qkv[i] = x;
		double fd = (L[0] - L[1]) / 2e-5;
		cr_assert(fabs(fd - g.dqkv[i]) <= 1e-6 * scale,
			  "dqkv[%zu]: backward %.12g, finite differences %.12g",
			  i, g.dqkv[i], fd);
	}
	att_out_free(&g);
	free(a.qkv), free(a.dout);
	backend_destroy(be);
}

/* bf16 rounds P (unnormalised, as FlashAttention-2's P̃), dO and G: within
 * 1e-2 of fp32's flash (docs/precision.md), and not equal to it. */
Test(flash, bf16_near_fp32)
{
	struct backend *be = make_be("cpu");
	struct att_case a = make_case(2, 70, 24, 3, 1);
	struct att_out h = run(be, &a, 1, 1), f = run(be, &a, 1, 0);
	double eo = rel_l2(f.out, h.out, n_out(&a));
	double ed = rel_l2(f.dqkv, h.dqkv, n_qkv(&a));
	cr_assert_leq(eo, 1e-2);
	cr_assert_leq(ed, 1e-2);
	cr_assert_gt(ed, 1e-4, "nothing was rounded");
	att_out_free(&h), att_out_free(&f);
	free(a.qkv), free(a.dout);
	backend_destroy(be);
}

static const struct shape two_blocks = {2, 40, 16, 2, 32, 23};
static size_t n_grads; /* parameter elements of the models below */

static struct model *model_att(enum model_attention att)
{
	struct model_config c = model_cfg(MODEL_TRANSFORMER, two_blocks, 11);
	c.init = MODEL_INIT_PYTORCH;
	c.attention = att;
	struct model *m = model_of(make_be("cpu"), &c);
	scale_param(m, "block.ln2.weight", 0.3); /* a contraction: the
						  * DEQ's solves converge */
	set_tokens(m, 3);
	return m;
}

/* One step of c with attention=flash against unfused: the loss within
 * 1e-6 and every gradient within 1e-4 relative L2 (fp32 sums in another
 * order, through 3 layers or a solve); returns flash's step. */
static struct step_out flash_step(struct method_config c, const char *what)
{
	struct model *u = model_att(MODEL_ATT_UNFUSED);
	struct model *f = model_att(MODEL_ATT_FLASH);
	void *zu = dev_state(u), *zf = dev_state(f);
	struct step_out a = step_of(u, c, zu), b = step_of(f, c, zf);
	cr_assert(fabs(b.loss - a.loss) <= 1e-6 * fabs(a.loss),
		  "%s: loss %.9g (flash) vs %.9g", what, b.loss, a.loss);
	for (int i = 0; i < u->n_params; i++) {
		const struct model_param *p = &u->params[i];
		double e = rel_l2(a.g + p->offset, b.g + p->offset, p->numel);
		cr_assert_leq(e, 1e-4, "%s: grad %s rel L2 err %g", what,
			      p->name, e);
	}
	size_t B = 2, H = 2, T = 40;
	n_grads = u->n_param_elems;
	cr_assert_eq(model_tape_bytes(u) - model_tape_bytes(f),
		     sizeof(float) * (B * H * T * T - 2 * B * H * T));
	step_out_free(&a);
	backend_free(u->be, zu), backend_free(f->be, zf);
	close_model(u), close_model(f);
	return b;
}

Test(flash, model_step_equals_unfused, .timeout = 120)
{
	struct step_out un =
	    flash_step(cfg_of(method_kind_parse("unroll"), 3, 0), "unroll");
	struct step_out se = flash_step(
	    cfg_of(method_kind_parse("selective"), 3, 0), "selective");
	/* iterated far past the default tolerance (absolute 1e-9 or 200
	 * evaluations), so that the fixed points differ by the attention's
	 * rounding, not by where a solve stopped */
	struct step_out dq = flash_step(
	    deq_solvers(SOLVER_BROYDEN, SOLVER_BROYDEN, 1e-9, 200), "deq");
	cr_assert_eq(un.loss, se.loss);
	cr_assert_eq(memcmp(un.g, se.g, sizeof(double) * n_grads), 0,
		     "selective differs from unroll under attention=flash");
	step_out_free(&un), step_out_free(&se), step_out_free(&dq);
}
