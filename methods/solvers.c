/* solvers.c — fixed-point solvers on backend vectors; see solvers.h for the
 * algorithms, stopping rules and memory formulas.
 *
 * Only backend vector ops are used (copy, fill, axpy, scale, per-segment
 * dots) plus strided-batched GEMMs with one row per sample for the Broyden
 * and Anderson coefficient products (c_s = x_s V_sᵀ, y_s += c_s U_s), so
 * the coefficients stay on the device and a Broyden iteration reads back
 * three batches of numbers (two sets of norms, one of dots) whatever its
 * history and however many samples. */
#include "solvers.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const solver_names[] = {"broyden", "anderson",
					   "fixed_point"};
static const char *const stop_names[] = {"abs", "rel"};
static const char *const scope_names[] = {"batch", "sample"};

KEY_NAME_FUNCS(solver_kind_parse, solver_kind_name, solver_names)
KEY_NAME_FUNCS(stop_mode_parse, stop_mode_name, stop_names)
KEY_NAME_FUNCS(stop_scope_parse, stop_scope_name, scope_names)

/* The DEQ code's no-progress rule: the last `stall` residuals lie within
 * this factor of each other. */
#define STALL_RATIO 1.3

struct solver {
	struct backend *be;
	size_t n;
	int S, P;   /* samples, segments per sample */
	size_t len; /* n / (S P): elements of one segment */
	void *buf;  /* MEM_SOLVER, max over the parameter sets */
	size_t elems;
	int max_m;     /* anderson history the host arrays fit */
	int max_iter;  /* residual history the host array fits */
	double *gram;  /* (S, max_m, max_m) Gᵢ·Gⱼ per sample, symmetric */
	double *sys;   /* (max_m+1)² bordered system */
	double *rhs;   /* max_m+1: solution after solve */
	double *row;   /* (S, max_m): new Gram rows, downloaded */
	double *alpha; /* (S, max_m): mixing weights, uploaded */
	double *seg;   /* P S segment dots */
	double *gn2, *fn2; /* S: ‖g_s‖², ‖F_s‖² now */
	double *best_r, *best_gn2, *best_fn2; /* S: of each sample's best */
	double *sc;			      /* S: per-sample scalars */
	double *hist;			      /* max_iter batch residuals */
	unsigned char *done, *improved;	      /* S flags */
};

/* Samples and segments per sample of p; 0 (unset) means 1. */
static int samples_of(const struct solver_params *p)
{
	return p->samples > 0 ? p->samples : 1;
}

static int parts_of(const struct solver_params *p)
{
	return p->parts > 0 ? p->parts : 1;
}

size_t solver_elems(const struct solver_params *p, size_t n)
{
	size_t h, S = (size_t)samples_of(p);
	switch (p->kind) {
	case SOLVER_FIXED_POINT:
		return 4 * n;
	case SOLVER_BROYDEN:
		h = (size_t)p->history;
		/* saturate rather than wrap (a history of 1e5 on a large
		 * state): backend_alloc then refuses the size */
		if ((6.0 + 2.0 * (double)h) * (double)n + (double)(S * h) >=
		    0x1p62)
			return SIZE_MAX;
		return 6 * n + 2 * h * n + S * h;
	case SOLVER_ANDERSON:
		h = (size_t)p->anderson_m;
		if ((3.0 + 2.0 * (double)h) * (double)n + (double)(S * h) >=
		    0x1p62)
			return SIZE_MAX;
		return 3 * n + 2 * h * n + S * h;
	}
	return 0;
}

/* Host arrays sized by S, max_m and max_iter; 0 or -1 out of memory. */
static int host_alloc(struct solver *s)
{
	size_t S = (size_t)s->S, m = (size_t)s->max_m;
	double **d[] = {&s->gn2,      &s->fn2,	    &s->best_r,
			&s->best_gn2, &s->best_fn2, &s->sc};
	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
		if (!(*d[i] = calloc(S, sizeof(double))))
			return -1;
	s->seg = calloc(S * (size_t)s->P, sizeof(double));
	s->hist = calloc((size_t)s->max_iter, sizeof(double));
	s->done = calloc(S, 1);
	s->improved = calloc(S, 1);
	if (!s->seg || !s->hist || !s->done || !s->improved)
		return -1;
	if (m == 0)
		return 0;
	s->gram = calloc(S * m * m, sizeof(double));
	s->sys = calloc((m + 1) * (m + 1), sizeof(double));
	s->rhs = calloc(m + 1, sizeof(double));
	s->row = calloc(S * m, sizeof(double));
	s->alpha = calloc(S * m, sizeof(double));
	return s->gram && s->sys && s->rhs && s->row && s->alpha ? 0 : -1;
}

int solver_create(struct solver **out, struct backend *be, size_t n,
		  const struct solver_params *p, int np, char *err,
		  size_t errlen)
{
	struct solver *s = calloc(1, sizeof(*s));
	int mismatch = 0;
	*out = NULL;
	if (!s)
		goto oom_host;
	s->be = be;
	s->n = n;
	s->S = samples_of(&p[0]);
	s->P = parts_of(&p[0]);
	for (int i = 0; i < np; i++) {
		size_t e = solver_elems(&p[i], n);
		if (e > s->elems)
			s->elems = e;
		if (p[i].kind == SOLVER_ANDERSON && p[i].anderson_m > s->max_m)
			s->max_m = p[i].anderson_m;
		if (p[i].max_iter > s->max_iter)
			s->max_iter = p[i].max_iter;
		mismatch |=
		    samples_of(&p[i]) != s->S || parts_of(&p[i]) != s->P;
	}
	if (mismatch || n % ((size_t)s->S * (size_t)s->P) != 0) {
		snprintf(err, errlen,
			 "solver: %zu state elements do not split into %d "
			 "samples of %d segments",
			 n, s->S, s->P);
		solver_destroy(s);
		return -1;
	}
	s->len = n / ((size_t)s->S * (size_t)s->P);
	if (host_alloc(s) != 0)
		goto oom_host;
	s->buf = backend_alloc(be, s->elems, MEM_SOLVER);
	if (!s->buf) {
		snprintf(err, errlen,
			 "out of device memory for the solver state (%zu "
			 "elements); lower f_history/b_history or anderson_m",
			 s->elems);
		solver_destroy(s);
		return -1;
	}
	*out = s;
	return 0;
oom_host:
	solver_destroy(s);
	snprintf(err, errlen, "out of host memory creating the solver");
	return -1;
}

void solver_destroy(struct solver *s)
{
	if (!s)
		return;
	backend_free(s->be, s->buf);
	void *h[] = {s->gram,	  s->sys, s->rhs,  s->row,    s->alpha,
		     s->seg,	  s->gn2, s->fn2,  s->best_r, s->best_gn2,
		     s->best_fn2, s->sc,  s->hist, s->done,   s->improved};
	for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++)
		free(h[i]);
	free(s);
}

/* ---------------------------------------------------------- per sample */

static void *vec(struct solver *s, size_t i)
{
	return dq_at(s->be, s->buf, i * s->n);
}

/* Segment p of sample k of x. */
static void *seg_of(const struct solver *s, const void *x, int k, int p)
{
	return dq_at(s->be, x, ((size_t)p * (size_t)s->S + (size_t)k) * s->len);
}

/* out[k] = x_k · y_k for every sample: one host read. */
static void sample_dots(struct solver *s, double *out, const void *x,
			const void *y, long *reads)
{
	size_t S = (size_t)s->S;
	s->be->ops->dot_segments(s->be->ctx, s->seg, x, y, S * (size_t)s->P,
				 s->len);
	(*reads)++;
	for (size_t k = 0; k < S; k++) {
		out[k] = s->seg[k];
		for (int p = 1; p < s->P; p++)
			out[k] += s->seg[(size_t)p * S + k];
	}
}

/* dst_k = src_k for every sample k with flag[k] set. */
static void sample_copy_if(struct solver *s, void *dst, const void *src,
			   const unsigned char *flag)
{
	for (int k = 0; k < s->S; k++)
		for (int p = 0; flag[k] && p < s->P; p++)
			s->be->ops->copy(s->be->ctx, seg_of(s, dst, k, p),
					 seg_of(s, src, k, p), s->len);
}

/* x_k = 0 for every sample k with flag[k] set. */
static void sample_zero_if(struct solver *s, void *x, const unsigned char *flag)
{
	for (int k = 0; k < s->S; k++)
		for (int p = 0; flag[k] && p < s->P; p++)
			s->be->ops->fill(s->be->ctx, seg_of(s, x, k, p), 0.0,
					 s->len);
}

/* coef (S, ldc) row k = x_k R_kᵀ over the first `rows` rows of the ring R
 * (rows, n): one batched GEMM per segment, summed. */
static void sample_coef(struct solver *s, void *coef, int ldc, const void *x,
			const void *R, int rows)
{
	const struct backend_ops *o = s->be->ops;
	for (int p = 0; p < s->P; p++)
		o->gemm_batched(s->be->ctx, 0, 1, 1, rows, (int)s->len, 1.0,
				seg_of(s, x, 0, p), (int)s->len, s->len,
				seg_of(s, R, 0, p), (int)s->n, s->len,
				p ? 1.0 : 0.0, coef, ldc, (size_t)ldc, s->S);
}

/* y_k = a coef_k R_k + beta y_k: coef (S, ldc), R (rows, n). */
static void sample_apply(struct solver *s, void *y, double a, const void *coef,
			 int ldc, const void *R, int rows, double beta)
{
	const struct backend_ops *o = s->be->ops;
	for (int p = 0; p < s->P; p++)
		o->gemm_batched(s->be->ctx, 0, 0, 1, (int)s->len, rows, a, coef,
				ldc, (size_t)ldc, seg_of(s, R, 0, p), (int)s->n,
				s->len, beta, seg_of(s, y, 0, p), (int)s->len,
				s->len, s->S);
}

/* dst_k = sc[k] src_k (dst != src); coef receives sc (S elements). */
static void sample_scale_into(struct solver *s, void *dst, const void *src,
			      const double *sc, void *coef)
{
	const struct backend_ops *o = s->be->ops;
	if (s->S == 1) { /* the global solver's arithmetic, bit for bit */
		o->copy(s->be->ctx, dst, src, s->n);
		o->scale(s->be->ctx, dst, sc[0], s->n);
		return;
	}
	o->upload(s->be->ctx, coef, sc, (size_t)s->S);
	for (int p = 0; p < s->P; p++)
		o->gemm_batched(s->be->ctx, 0, 0, 1, (int)s->len, 1, 1.0, coef,
				1, 1, seg_of(s, src, 0, p), (int)s->len, s->len,
				0.0, seg_of(s, dst, 0, p), (int)s->len, s->len,
				s->S);
}

/* ---------------------------------------------------------------- common */

/* Book-keeping shared by the three solvers: evaluation count, residuals,
 * each sample's lowest-residual iterate and the trace. */
struct run {
	struct solver *s;
	const struct solver_params *p;
	const struct fp_map *F;
	struct solve_stats *st;
	double *trace;
	int *trace_len;
	long *reads;
	void *best; /* n elements */
	int have_best;
	int n_done; /* samples frozen (scope sample) */
};

static double resid(enum stop_mode m, double gn, double fn)
{
	double rel = fn > 0 ? gn / fn : (gn == 0 ? 0.0 : INFINITY);
	return m == STOP_ABS ? gn : rel;
}

/* The DEQ code's breaks on the batch residual history h[0..k]. */
static int run_breaks(struct run *r, const double *h, int k)
{
	const struct solver_params *p = r->p;
	if (p->protect > 0 && k > 0 && h[k] > p->protect * h[0]) {
		r->st->protect_break = 1;
		return 1;
	}
	if (p->stall > 0 && k + 1 >= p->stall) {
		double lo = INFINITY, hi = 0;
		for (int i = k + 1 - p->stall; i <= k; i++) {
			lo = h[i] < lo ? h[i] : lo;
			hi = h[i] > hi ? h[i] : hi;
		}
		if (hi < STALL_RATIO * lo) {
			r->st->stall_break = 1;
			return 1;
		}
	}
	return 0;
}

/* Updates each sample's best from iterate x (its ‖g‖², ‖F‖² in s->gn2,
 * s->fn2), the composite residual and the frozen set. Returns 1 when the
 * stopping rule is met. */
static int run_best(struct run *r, const void *x)
{
	struct solver *s = r->s;
	const struct solver_params *p = r->p;
	int nimp = 0, nconv = 0;
	double G = 0, Fn = 0;
	for (int k = 0; k < s->S; k++) {
		double rk = resid(p->stop, sqrt(s->gn2[k]), sqrt(s->fn2[k]));
		s->improved[k] =
		    !s->done[k] && (!r->have_best || rk < s->best_r[k]);
		if (s->improved[k]) {
			s->best_r[k] = rk;
			s->best_gn2[k] = s->gn2[k];
			s->best_fn2[k] = s->fn2[k];
			nimp++;
		}
		G += s->best_gn2[k];
		Fn += s->best_fn2[k];
		nconv += s->best_r[k] <= p->tol;
	}
	if (nimp == s->S)
		s->be->ops->copy(s->be->ctx, r->best, x, s->n);
	else if (nimp > 0)
		sample_copy_if(s, r->best, x, s->improved);
	r->have_best = 1;
	r->st->abs_residual = sqrt(G);
	r->st->rel_residual = resid(STOP_REL, sqrt(G), sqrt(Fn));
	r->st->residual =
	    p->stop == STOP_ABS ? r->st->abs_residual : r->st->rel_residual;
	r->st->samples_converged = nconv;
	if (p->scope == SCOPE_BATCH)
		return r->st->residual <= p->tol;
	for (int k = 0; k < s->S; k++)
		if (!s->done[k] && s->best_r[k] <= p->tol) {
			s->done[k] = 1;
			r->n_done++;
		}
	return r->n_done == s->S;
}

/* Checks iterate x whose per-sample ‖g‖² and ‖F‖² are in s->gn2, s->fn2
 * (sample_dots, two host reads): the trace, the bests, the breaks.
 * Returns 1 when the solve must stop (rule met, not finite, or a break). */
static int run_check(struct run *r, const void *x)
{
	struct solver *s = r->s;
	double G = 0, Fn = 0;
	for (int k = 0; k < s->S; k++) {
		G += s->gn2[k];
		Fn += s->fn2[k];
	}
	double res = resid(r->p->stop, sqrt(G), sqrt(Fn));
	int k = r->st->iters - 1;
	if (r->trace && *r->trace_len < METHOD_TRACE_MAX)
		r->trace[(*r->trace_len)++] = res;
	if (!isfinite(res) || !isfinite(G) || !isfinite(Fn)) {
		r->st->nonfinite = 1;
		return 1;
	}
	if (run_best(r, x))
		return 1;
	s->hist[k] = res;
	return run_breaks(r, s->hist, k);
}

/* run_check after measuring g = F(x) − x and F(x). */
static int run_measure(struct run *r, const void *x, const void *g,
		       const void *fx)
{
	sample_dots(r->s, r->s->gn2, g, g, r->reads);
	sample_dots(r->s, r->s->fn2, fx, fx, r->reads);
	return run_check(r, x);
}

static void run_eval(struct run *r, void *out, const void *in)
{
	r->F->apply(r->F->ctx, out, in);
	r->st->iters++;
}

/* ----------------------------------------------------------- fixed point */

/* Buffers: x, F(x), g, best. */
static void solve_fixed_point(struct run *r)
{
	struct solver *s = r->s;
	const struct backend_ops *o = s->be->ops;
	void *c = s->be->ctx;
	void *x = vec(s, 0), *fx = vec(s, 1), *g = vec(s, 2);

	o->fill(c, x, 0.0, s->n);
	while (r->st->iters < r->p->max_iter) {
		run_eval(r, fx, x);
		o->copy(c, g, fx, s->n);
		o->axpy(c, g, -1.0, x, s->n);
		if (run_measure(r, x, g, fx))
			return;
		sample_copy_if(s, fx, x, s->done); /* frozen samples stay */
		void *t = x;			   /* x ← F(x) */
		x = fx;
		fx = t;
	}
}

/* --------------------------------------------------------------- broyden */

struct broyden {
	void *U, *V, *coef; /* U, V (h, n) rings; coef (S, h) */
	int h, nu, head;    /* history, pairs in use, oldest once full */
};

/* dx = −B g = g − Uᵀ (V g), per sample. */
static void broyden_step(struct run *r, struct broyden *b, void *dx,
			 const void *g)
{
	struct solver *s = r->s;
	s->be->ops->copy(s->be->ctx, dx, g, s->n);
	if (b->nu > 0) {
		sample_coef(s, b->coef, b->nu, g, b->V, b->nu);
		sample_apply(s, dx, -1.0, b->coef, b->nu, b->U, b->nu, 1.0);
	}
}

/* The rank-1 update from Δx (dx, consumed) and Δg (dg); fx is scratch.
 * v = Bᵀ Δx = −Δx + Vᵀ (U Δx); u = (Δx − B Δg) / (vᵀ Δg). */
static void broyden_update(struct run *r, struct broyden *b, void *dx,
			   const void *dg, void *fx)
{
	struct solver *s = r->s;
	const struct backend_ops *o = s->be->ops;
	void *c = s->be->ctx;
	const size_t n = s->n;
	/* Slot for the new pair; a full history drops its oldest pair first
	 * (zero rows add nothing to the products). */
	int slot = b->nu < b->h ? b->nu : b->head;
	int nact = b->nu < b->h ? b->nu : b->h;
	void *Us = dq_at(s->be, b->U, (size_t)slot * n);
	void *Vs = dq_at(s->be, b->V, (size_t)slot * n);
	if (b->nu == b->h) {
		o->fill(c, Us, 0.0, n);
		o->fill(c, Vs, 0.0, n);
	}
	o->copy(c, fx, dx, n);
	o->scale(c, fx, -1.0, n);
	if (nact > 0) {
		sample_coef(s, b->coef, nact, dx, b->U, nact);
		sample_apply(s, fx, 1.0, b->coef, nact, b->V, nact, 1.0);
	}
	o->axpy(c, dx, 1.0, dg, n); /* u (vᵀΔg) = Δx + Δg − Uᵀ (V Δg) */
	if (nact > 0) {
		sample_coef(s, b->coef, nact, dg, b->V, nact);
		sample_apply(s, dx, -1.0, b->coef, nact, b->U, nact, 1.0);
	}
	sample_dots(s, s->sc, fx, dg, r->reads); /* vᵀ Δg per sample */
	if (b->nu == b->h)
		b->head = (b->head + 1) % b->h;
	int nok = 0;
	for (int k = 0; k < s->S; k++) {
		double den = s->sc[k];
		int ok = den != 0 && isfinite(den) && isfinite(1.0 / den);
		s->sc[k] = ok ? 1.0 / den : 0.0;
		nok += ok;
	}
	if (nok == 0)
		return; /* skip the update; a dropped slot stays 0 */
	sample_scale_into(s, Us, dx, s->sc, b->coef);
	o->copy(c, Vs, fx, n);
	if (b->nu < b->h)
		b->nu++;
}

/* Buffers: x, g, fx, dx, dg, best, U (h, n), V (h, n), coef (S, h). Row i
 * of U and V is the pair (uᵢ, vᵢ); rows 0..nu-1 are in use, and once all
 * h are, `head` is the oldest. B y = −y + Uᵀ (V y), Bᵀ y = −y + Vᵀ (U y),
 * each sample with its own rows' segments. */
static void solve_broyden(struct run *r)
{
	struct solver *s = r->s;
	const struct backend_ops *o = s->be->ops;
	void *c = s->be->ctx;
	const size_t n = s->n;
	const int h = r->p->history;
	void *x = vec(s, 0), *g = vec(s, 1), *fx = vec(s, 2);
	void *dx = vec(s, 3), *dg = vec(s, 4);
	struct broyden b = {.U = vec(s, 6),
			    .V = vec(s, 6 + (size_t)h),
			    .coef = vec(s, 6 + 2 * (size_t)h),
			    .h = h};

	o->fill(c, x, 0.0, n);
	run_eval(r, fx, x);
	o->copy(c, g, fx, n);
	o->axpy(c, g, -1.0, x, n);
	if (run_measure(r, x, g, fx))
		return;
	while (r->st->iters < r->p->max_iter) {
		broyden_step(r, &b, dx, g);
		if (r->n_done)
			sample_zero_if(s, dx, s->done); /* frozen */
		o->axpy(c, x, 1.0, dx, n);
		run_eval(r, fx, x);
		sample_dots(s, s->fn2, fx, fx, r->reads);
		o->axpy(c, fx, -1.0, x, n); /* fx = g_new */
		sample_dots(s, s->gn2, fx, fx, r->reads);
		if (run_check(r, x))
			return;
		if (r->st->iters >= r->p->max_iter)
			return;
		o->copy(c, dg, fx, n);
		o->axpy(c, dg, -1.0, g, n);
		void *t = g; /* g = g_new; fx is free */
		g = fx;
		fx = t;
		broyden_update(r, &b, dx, dg, fx);
	}
}

/* -------------------------------------------------------------- anderson */

/* Solves the bordered system [[0, 1ᵀ], [1, H + λI]] [ν; α] = [1; 0] for
 * the m weights α (Walker & Ni 2011, eq. (1.2) with the constraint as a
 * Lagrange row), by Gaussian elimination with partial pivoting in double.
 * H is the (m, m) Gram matrix stored with row stride ld. Writes α into
 * alpha. Returns -1 when singular (α then the uniform average). */
static int anderson_weights(double *A, double *b, const double *H, int ld,
			    int m, double lambda, double *alpha)
{
	const int q = m + 1;
	for (int i = 0; i < q; i++) {
		b[i] = i == 0 ? 1.0 : 0.0;
		for (int j = 0; j < q; j++) {
			double v;
			if (i == 0 && j == 0)
				v = 0;
			else if (i == 0 || j == 0)
				v = 1;
			else
				v = H[(size_t)(i - 1) * ld + (j - 1)] +
				    (i == j ? lambda : 0.0);
			A[(size_t)i * q + j] = v;
		}
	}
	for (int k = 0; k < q; k++) {
		int piv = k;
		for (int i = k + 1; i < q; i++)
			if (fabs(A[(size_t)i * q + k]) >
			    fabs(A[(size_t)piv * q + k]))
				piv = i;
		if (!(fabs(A[(size_t)piv * q + k]) > 0)) {
			for (int i = 0; i < m; i++)
				alpha[i] = 1.0 / m;
			return -1;
		}
		if (piv != k) {
			for (int j = 0; j < q; j++) {
				double t = A[(size_t)k * q + j];
				A[(size_t)k * q + j] = A[(size_t)piv * q + j];
				A[(size_t)piv * q + j] = t;
			}
			double t = b[k];
			b[k] = b[piv];
			b[piv] = t;
		}
		for (int i = k + 1; i < q; i++) {
			double f = A[(size_t)i * q + k] / A[(size_t)k * q + k];
			for (int j = k; j < q; j++)
				A[(size_t)i * q + j] -=
				    f * A[(size_t)k * q + j];
			b[i] -= f * b[k];
		}
	}
	for (int i = q - 1; i >= 0; i--) {
		double v = b[i];
		for (int j = i + 1; j < q; j++)
			v -= A[(size_t)i * q + j] * b[j];
		b[i] = v / A[(size_t)i * q + i];
	}
	for (int i = 0; i < m; i++)
		alpha[i] = b[i + 1];
	return 0;
}

/* Mixing weights of every sample after the Gram rows of the new G (slot)
 * arrived in s->row, (S, nact): each sample's Gram matrix, its bordered
 * solve, its α into s->alpha (S, nact). */
static void anderson_mix_weights(struct solver *s, int slot, int nact,
				 double lambda)
{
	const int ld = s->max_m;
	for (int k = 0; k < s->S; k++) {
		double *gram = s->gram + (size_t)k * ld * ld;
		const double *row = s->row + (size_t)k * nact;
		for (int j = 0; j < nact; j++) {
			gram[(size_t)slot * ld + j] = row[j];
			gram[(size_t)j * ld + slot] = row[j];
		}
		anderson_weights(s->sys, s->rhs, gram, ld, nact, lambda,
				 s->alpha + (size_t)k * nact);
	}
}

/* Buffers: xn (next iterate), fx, best, X (m, n), G (m, n), coef (S, m).
 * Slot k % m of the rings holds iterate k and its G = F(x) − x. */
static void solve_anderson(struct run *r)
{
	struct solver *s = r->s;
	const struct backend_ops *o = s->be->ops;
	void *c = s->be->ctx;
	const size_t n = s->n;
	const int m = r->p->anderson_m;
	void *xn = vec(s, 0), *fx = vec(s, 1);
	void *X = vec(s, 3), *G = vec(s, 3 + (size_t)m);
	void *coef = vec(s, 3 + 2 * (size_t)m);
	int k = 0;

	o->fill(c, xn, 0.0, n);
	while (r->st->iters < r->p->max_iter) {
		int slot = k % m;
		void *Xs = dq_at(s->be, X, (size_t)slot * n);
		void *Gs = dq_at(s->be, G, (size_t)slot * n);
		run_eval(r, fx, xn);
		o->copy(c, Xs, xn, n);
		o->copy(c, Gs, fx, n);
		o->axpy(c, Gs, -1.0, xn, n);
		if (run_measure(r, xn, Gs, fx))
			return;
		if (r->st->iters >= r->p->max_iter)
			return;
		k++;
		int nact = k < m ? k : m;
		/* Gram rows of the new G against every G in use */
		sample_coef(s, coef, nact, Gs, G, nact);
		o->download(c, s->row, coef, (size_t)s->S * (size_t)nact);
		(*r->reads)++;
		anderson_mix_weights(s, slot, nact, r->p->lambda);
		o->upload(c, coef, s->alpha, (size_t)s->S * (size_t)nact);
		/* xn = αᵀ X + β αᵀ G */
		sample_apply(s, xn, 1.0, coef, nact, X, nact, 0.0);
		sample_apply(s, xn, r->p->beta, coef, nact, G, nact, 1.0);
		if (r->n_done)
			sample_copy_if(s, xn, Xs, s->done); /* frozen */
	}
}

/* Index of the `best` vector in each solver's buffer layout. */
static size_t best_slot(enum solver_kind k)
{
	return k == SOLVER_FIXED_POINT ? 3 : k == SOLVER_BROYDEN ? 5 : 2;
}

const void *solver_solve(struct solver *s, const struct solver_params *p,
			 const struct fp_map *F, struct solve_stats *st,
			 double *trace, int *trace_len, long *host_reads)
{
	struct run r = {
	    .s = s,
	    .p = p,
	    .F = F,
	    .st = st,
	    .trace = trace,
	    .trace_len = trace_len,
	    .reads = host_reads,
	    .best = vec(s, best_slot(p->kind)),
	};
	memset(st, 0, sizeof(*st));
	st->residual = st->abs_residual = st->rel_residual = INFINITY;
	st->samples = s->S;
	if (trace_len)
		*trace_len = 0;
	memset(s->done, 0, (size_t)s->S);
	/* x₀ = 0 stands in when no iterate had a finite residual */
	s->be->ops->fill(s->be->ctx, r.best, 0.0, s->n);
	if (solver_elems(p, s->n) > s->elems || p->max_iter > s->max_iter ||
	    (p->kind == SOLVER_ANDERSON && p->anderson_m > s->max_m) ||
	    samples_of(p) != s->S) {
		st->nonfinite = 1; /* not created for p: a programming error */
		return r.best;
	}
	switch (p->kind) {
	case SOLVER_FIXED_POINT:
		solve_fixed_point(&r);
		break;
	case SOLVER_BROYDEN:
		solve_broyden(&r);
		break;
	case SOLVER_ANDERSON:
		solve_anderson(&r);
		break;
	}
	if (p->scope == SCOPE_BATCH)
		st->converged = r.have_best && st->residual <= p->tol;
	else
		st->converged = r.have_best && st->samples_converged == s->S;
	return r.best;
}
