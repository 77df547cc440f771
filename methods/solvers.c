/* solvers.c — fixed-point solvers on backend vectors; see solvers.h for the
 * algorithms, stopping rules and memory formulas.
 *
 * Only backend vector ops are used (copy, fill, axpy, scale, norm, dot) plus
 * GEMMs with one row for the Broyden and Anderson coefficient products
 * (c = x Vᵀ, y += c U), so the coefficients stay on the device and a
 * Broyden iteration reads back three numbers (two norms, one dot) whatever
 * its history. */
#include "solvers.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct solver {
	struct backend *be;
	size_t n;
	void *buf; /* MEM_SOLVER, max over the parameter sets */
	size_t elems;
	int max_m;     /* anderson history the host arrays fit */
	double *gram;  /* (max_m, max_m) Gᵢ·Gⱼ, symmetric */
	double *sys;   /* (max_m+1)² bordered system */
	double *rhs;   /* max_m+1: solution after solve */
	double *row;   /* max_m: new Gram row, downloaded */
	double *alpha; /* max_m: mixing weights, uploaded */
};

size_t solver_elems(const struct solver_params *p, size_t n)
{
	size_t h;
	switch (p->kind) {
	case SOLVER_FIXED_POINT:
		return 4 * n;
	case SOLVER_BROYDEN:
		h = (size_t)p->history;
		/* saturate rather than wrap (a history of 1e5 on a large
		 * state): backend_alloc then refuses the size */
		if ((6.0 + 2.0 * (double)h) * (double)n + (double)h >= 0x1p62)
			return SIZE_MAX;
		return 6 * n + 2 * h * n + h;
	case SOLVER_ANDERSON:
		h = (size_t)p->anderson_m;
		if ((3.0 + 2.0 * (double)h) * (double)n + (double)h >= 0x1p62)
			return SIZE_MAX;
		return 3 * n + 2 * h * n + h;
	}
	return 0;
}

int solver_create(struct solver **out, struct backend *be, size_t n,
		  const struct solver_params *p, int np, char *err,
		  size_t errlen)
{
	struct solver *s = calloc(1, sizeof(*s));
	*out = NULL;
	if (!s)
		goto oom_host;
	s->be = be;
	s->n = n;
	for (int i = 0; i < np; i++) {
		size_t e = solver_elems(&p[i], n);
		if (e > s->elems)
			s->elems = e;
		if (p[i].kind == SOLVER_ANDERSON && p[i].anderson_m > s->max_m)
			s->max_m = p[i].anderson_m;
	}
	if (s->max_m > 0) {
		size_t m = (size_t)s->max_m;
		s->gram = calloc(m * m, sizeof(double));
		s->sys = calloc((m + 1) * (m + 1), sizeof(double));
		s->rhs = calloc(m + 1, sizeof(double));
		s->row = calloc(m, sizeof(double));
		s->alpha = calloc(m, sizeof(double));
		if (!s->gram || !s->sys || !s->rhs || !s->row || !s->alpha)
			goto oom_host;
	}
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
	free(s->gram);
	free(s->sys);
	free(s->rhs);
	free(s->row);
	free(s->alpha);
	free(s);
}

/* ---------------------------------------------------------------- common */

/* Book-keeping shared by the three solvers: evaluation count, residuals,
 * the lowest-residual iterate and the trace. */
struct run {
	struct solver *s;
	const struct solver_params *p;
	const struct fp_map *F;
	struct solve_stats *st;
	double *trace;
	int *trace_len;
	long *reads;
	void *best; /* n elements */
	double best_r;
	int have_best;
};

static void *vec(struct solver *s, size_t i)
{
	return dq_at(s->be, s->buf, i * s->n);
}

/* Records the residual of iterate x whose g = F(x) − x has norm gn and
 * F(x) norm fn. Returns 1 when the solve must stop (converged or not
 * finite). */
static int run_check(struct run *r, const void *x, double gn, double fn)
{
	const struct backend_ops *o = r->s->be->ops;
	double rel = fn > 0 ? gn / fn : (gn == 0 ? 0.0 : INFINITY);
	double res = r->p->stop == STOP_ABS ? gn : rel;

	if (r->trace && *r->trace_len < METHOD_TRACE_MAX)
		r->trace[(*r->trace_len)++] = res;
	if (!isfinite(res) || !isfinite(gn) || !isfinite(fn)) {
		r->st->nonfinite = 1;
		return 1;
	}
	if (!r->have_best || res < r->best_r) {
		o->copy(r->s->be->ctx, r->best, x, r->s->n);
		r->best_r = res;
		r->st->residual = res;
		r->st->abs_residual = gn;
		r->st->rel_residual = rel;
		r->have_best = 1;
	}
	return res <= r->p->tol;
}

static double run_norm(struct run *r, const void *x)
{
	(*r->reads)++;
	return r->s->be->ops->norm(r->s->be->ctx, x, r->s->n);
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
		if (run_check(r, x, run_norm(r, g), run_norm(r, fx)))
			return;
		void *t = x; /* x ← F(x) */
		x = fx;
		fx = t;
	}
}

/* --------------------------------------------------------------- broyden */

/* Buffers: x, g, fx, dx, dg, best, U (h, n), V (h, n), c (h). Row i of U
 * and V is the pair (uᵢ, vᵢ); rows 0..nu-1 are in use, and once all h are,
 * `head` is the oldest. B y = −y + Uᵀ (V y) and Bᵀ y = −y + Vᵀ (U y). */
static void solve_broyden(struct run *r)
{
	struct solver *s = r->s;
	const struct backend_ops *o = s->be->ops;
	void *c = s->be->ctx;
	const size_t n = s->n;
	const int h = r->p->history, N = (int)n;
	void *x = vec(s, 0), *g = vec(s, 1), *fx = vec(s, 2);
	void *dx = vec(s, 3), *dg = vec(s, 4);
	void *U = vec(s, 6), *V = vec(s, 6 + (size_t)h);
	void *coef = vec(s, 6 + 2 * (size_t)h);
	int nu = 0, head = 0;

	o->fill(c, x, 0.0, n);
	run_eval(r, fx, x);
	o->copy(c, g, fx, n);
	o->axpy(c, g, -1.0, x, n);
	if (run_check(r, x, run_norm(r, g), run_norm(r, fx)))
		return;
	while (r->st->iters < r->p->max_iter) {
		/* dx = −B g = g − Uᵀ (V g) */
		o->copy(c, dx, g, n);
		if (nu > 0) {
			o->gemm(c, 0, 1, 1, nu, N, 1.0, g, N, V, N, 0.0, coef,
				nu);
			o->gemm(c, 0, 0, 1, N, nu, -1.0, coef, nu, U, N, 1.0,
				dx, N);
		}
		o->axpy(c, x, 1.0, dx, n);
		run_eval(r, fx, x);
		double fn = run_norm(r, fx);
		o->axpy(c, fx, -1.0, x, n); /* fx = g_new */
		if (run_check(r, x, run_norm(r, fx), fn))
			return;
		if (r->st->iters >= r->p->max_iter)
			return;
		o->copy(c, dg, fx, n);
		o->axpy(c, dg, -1.0, g, n);
		void *t = g; /* g = g_new; fx is free */
		g = fx;
		fx = t;

		/* Slot for the new pair; a full history drops its oldest
		 * pair first (zero rows add nothing to the products). */
		int slot = nu < h ? nu : head, nact = nu < h ? nu : h;
		if (nu == h) {
			o->fill(c, dq_at(s->be, U, (size_t)slot * n), 0.0, n);
			o->fill(c, dq_at(s->be, V, (size_t)slot * n), 0.0, n);
		}
		/* v = Bᵀ Δx = −Δx + Vᵀ (U Δx), into fx */
		o->copy(c, fx, dx, n);
		o->scale(c, fx, -1.0, n);
		if (nact > 0) {
			o->gemm(c, 0, 1, 1, nact, N, 1.0, dx, N, U, N, 0.0,
				coef, nact);
			o->gemm(c, 0, 0, 1, N, nact, 1.0, coef, nact, V, N, 1.0,
				fx, N);
		}
		/* u·(vᵀΔg) = Δx − B Δg = Δx + Δg − Uᵀ (V Δg), into dx */
		o->axpy(c, dx, 1.0, dg, n);
		if (nact > 0) {
			o->gemm(c, 0, 1, 1, nact, N, 1.0, dg, N, V, N, 0.0,
				coef, nact);
			o->gemm(c, 0, 0, 1, N, nact, -1.0, coef, nact, U, N,
				1.0, dx, N);
		}
		(*r->reads)++;
		double den = o->dot(c, fx, dg, n);
		if (nu == h)
			head = (head + 1) % h;
		if (den == 0 || !isfinite(den) || !isfinite(1.0 / den))
			continue; /* skip the update; a dropped slot stays 0 */
		o->copy(c, dq_at(s->be, U, (size_t)slot * n), dx, n);
		o->scale(c, dq_at(s->be, U, (size_t)slot * n), 1.0 / den, n);
		o->copy(c, dq_at(s->be, V, (size_t)slot * n), fx, n);
		if (nu < h)
			nu++;
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

/* Buffers: xn (next iterate), fx, best, X (m, n), G (m, n), c (m). Slot
 * k % m of the rings holds iterate k and its G = F(x) − x. */
static void solve_anderson(struct run *r)
{
	struct solver *s = r->s;
	const struct backend_ops *o = s->be->ops;
	void *c = s->be->ctx;
	const size_t n = s->n;
	const int m = r->p->anderson_m, N = (int)n, ld = s->max_m;
	void *xn = vec(s, 0), *fx = vec(s, 1);
	void *X = vec(s, 3), *G = vec(s, 3 + (size_t)m);
	void *coef = vec(s, 3 + 2 * (size_t)m);
	double *row = s->row, *alpha = s->alpha;
	int k = 0;

	o->fill(c, xn, 0.0, n);
	while (r->st->iters < r->p->max_iter) {
		int slot = k % m;
		void *Xs = dq_at(s->be, X, (size_t)slot * n);
		void *Gs = dq_at(s->be, G, (size_t)slot * n);
		run_eval(r, fx, xn);
		double fn = run_norm(r, fx);
		o->copy(c, Xs, xn, n);
		o->copy(c, Gs, fx, n);
		o->axpy(c, Gs, -1.0, xn, n);
		if (run_check(r, xn, run_norm(r, Gs), fn))
			return;
		if (r->st->iters >= r->p->max_iter)
			return;
		k++;
		int nact = k < m ? k : m;
		/* Gram row of the new G against every G in use */
		o->gemm(c, 0, 1, 1, nact, N, 1.0, Gs, N, G, N, 0.0, coef, nact);
		o->download(c, row, coef, (size_t)nact);
		(*r->reads)++;
		for (int j = 0; j < nact; j++) {
			s->gram[(size_t)slot * ld + j] = row[j];
			s->gram[(size_t)j * ld + slot] = row[j];
		}
		anderson_weights(s->sys, s->rhs, s->gram, ld, nact,
				 r->p->lambda, alpha);
		o->upload(c, coef, alpha, (size_t)nact);
		/* xn = αᵀ X + β αᵀ G */
		o->gemm(c, 0, 0, 1, N, nact, 1.0, coef, nact, X, N, 0.0, xn, N);
		o->gemm(c, 0, 0, 1, N, nact, r->p->beta, coef, nact, G, N, 1.0,
			xn, N);
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
	if (trace_len)
		*trace_len = 0;
	/* x₀ = 0 stands in when no iterate had a finite residual */
	s->be->ops->fill(s->be->ctx, r.best, 0.0, s->n);
	if (solver_elems(p, s->n) > s->elems ||
	    (p->kind == SOLVER_ANDERSON && p->anderson_m > s->max_m)) {
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
	st->converged = r.have_best && r.best_r <= p->tol;
	return r.best;
}
