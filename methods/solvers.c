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
#include "solver_impl.h"

#include "../kernels/solve_ctl.h"
#include "../kernels/solve_fused.h"
#include "keys.h"

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

/* The control block's layout for the sets p[0..np) on vectors of n
 * elements (st left NULL). */
static struct dq_solve_ctl ctl_for(const struct solver_params *p, int np,
				   size_t n)
{
	struct dq_solve_ctl c = {.S = samples_of(&p[0]),
				 .P = parts_of(&p[0]),
				 .ring = 1,
				 .trace_cap = METHOD_TRACE_MAX};
	for (int i = 0; i < np; i++) {
		if (p[i].kind == SOLVER_ANDERSON && p[i].anderson_m > c.m)
			c.m = p[i].anderson_m;
		if (p[i].max_iter > c.max_iter)
			c.max_iter = p[i].max_iter;
		if (p[i].stall > c.ring)
			c.ring = p[i].stall;
		if (solver_fused(&p[i]) && p[i].kind == SOLVER_BROYDEN &&
		    p[i].history > c.hb)
			c.hb = p[i].history;
		if (solver_fused(&p[i]) && p[i].kind == SOLVER_ANDERSON &&
		    p[i].anderson_m > c.ma)
			c.ma = p[i].anderson_m;
	}
	size_t len = n / ((size_t)c.S * (size_t)c.P);
	c.nchunk = c.hb || c.ma ? dq_fu_chunks((long)(len ? len : 1)) : 0;
	dq_ctl_layout(&c);
	return c;
}

/* Bytes of the vectors (elem bytes each), rounded up to 8 for the
 * doubles of the control block that follows them. */
static size_t vec_bytes(size_t elems, size_t elem)
{
	return (elems * elem + 7) / 8 * 8;
}

size_t solver_mem_bytes(const struct solver_params *p, int np, size_t n,
			size_t elem)
{
	size_t e = 0;
	for (int i = 0; i < np; i++) {
		size_t x = solver_elems(&p[i], n);
		e = x > e ? x : e;
	}
	if (e == SIZE_MAX || (double)e * (double)elem >= 0x1p62)
		return SIZE_MAX;
	if (np == 0)
		return 0;
	struct dq_solve_ctl c = ctl_for(p, np, n);
	return vec_bytes(e, elem) + (size_t)c.total * sizeof(double);
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
	s->ctl = ctl_for(p, np, n);
	s->hb_cap = s->ctl.hb;
	s->ma_cap = s->ctl.ma;
	s->S = s->ctl.S;
	s->P = s->ctl.P;
	s->max_iter = s->ctl.max_iter;
	for (int i = 0; i < np; i++) {
		size_t e = solver_elems(&p[i], n);
		if (e > s->elems)
			s->elems = e;
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
	s->head =
	    calloc((size_t)(DQ_CTL_HEAD + s->ctl.trace_cap), sizeof(double));
	s->zeros = calloc((size_t)(s->S > DQ_FU_HEAD ? s->S : DQ_FU_HEAD),
			  sizeof(double));
	if (!s->head || !s->zeros)
		goto oom_host;
	size_t bytes = solver_mem_bytes(p, np, n, be->elem);
	s->buf = bytes == SIZE_MAX ? NULL
				   : backend_alloc_bytes(be, bytes, MEM_SOLVER);
	if (!s->buf) {
		snprintf(err, errlen,
			 "out of device memory for the solver state (%zu "
			 "elements); lower f_history/b_history or anderson_m",
			 s->elems);
		solver_destroy(s);
		return -1;
	}
	s->ctl.st = (double *)((char *)s->buf + vec_bytes(s->elems, be->elem));
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
	for (int i = 0; i < SOLVER_GRAPHS; i++)
		be_graph_free(s->be, s->cache[i].g);
	backend_free(s->be, s->buf);
	free(s->head);
	free(s->zeros);
	free(s);
}

/* ---------------------------------------------------------- per sample */

/* Segment p of sample k of x. */
static void *seg_of(const struct solver *s, const void *x, int k, int p)
{
	return dq_at(s->be, x, ((size_t)p * (size_t)s->S + (size_t)k) * s->len);
}

/* Per-segment dots x·y into the control block at offset o: no host read. */
static void seg_dots(struct solver *s, long o, const void *x, const void *y)
{
	be_dot_segments(s->be, solver_ctl_at(s, o), x, y,
			(size_t)s->S * (size_t)s->P, s->len);
}

/* dst_k = src_k (0 when src is NULL) for every sample k whose flag at
 * offset o of the control block is set. */
static void copy_if(struct solver *s, void *dst, const void *src, long o)
{
	be_copy_masked(s->be, dst, src, solver_ctl_at(s, o), s->S, s->P,
		       s->len);
}

/* coef (S, ldc) row k = x_k R_kᵀ over the first `rows` rows of the ring R
 * (rows, n): one batched GEMM per segment, summed. */
static void sample_coef(struct solver *s, void *coef, int ldc, const void *x,
			const void *R, int rows)
{
	const struct backend *be = s->be;
	for (int p = 0; p < s->P; p++)
		be_gemm_batched(be, 0, 1, 1, rows, (int)s->len, 1.0,
				seg_of(s, x, 0, p), (int)s->len, s->len,
				seg_of(s, R, 0, p), (int)s->n, s->len,
				p ? 1.0 : 0.0, coef, ldc, (size_t)ldc, s->S);
}

/* y_k = a coef_k R_k + beta y_k: coef (S, ldc), R (rows, n). */
static void sample_apply(struct solver *s, void *y, double a, const void *coef,
			 int ldc, const void *R, int rows, double beta)
{
	const struct backend *be = s->be;
	for (int p = 0; p < s->P; p++)
		be_gemm_batched(be, 0, 0, 1, (int)s->len, rows, a, coef, ldc,
				(size_t)ldc, seg_of(s, R, 0, p), (int)s->n,
				s->len, beta, seg_of(s, y, 0, p), (int)s->len,
				s->len, s->S);
}

/* ---------------------------------------------------------------- common */

/* After an evaluation's per-segment ‖g‖² and ‖F‖² reached seg_g and
 * seg_f: the device's check, then the improved samples of iterate x into
 * the best iterate. Returns 1 when the host must stop issuing work: the
 * device said so at a read (every r->sync evaluations, one host read), or
 * max_iter evaluations were issued. Between reads the host goes on; the
 * device ignores what follows its stop (dq_ctl_check leaves GO at 0 and
 * the improved flags clear), so only time is lost, never the result. */
static int run_check(struct run *r, const void *x)
{
	struct solver *s = r->s;
	be_solve_check(s->be, &s->ctl);
	copy_if(s, r->best, x, s->ctl.o_imp);
	return solver_run_poll(r);
}

/* g = F(x) − x from fx = F(x) (g may be fx: then fx is g afterwards),
 * per-segment ‖F(x)‖² and ‖g‖² into the control block (one op: two
 * launches on a GPU), then run_check. */
static int run_measure(struct run *r, const void *x, void *g, const void *fx)
{
	struct solver *s = r->s;
	be_residual_dots(s->be, g, fx, x, solver_ctl_at(s, s->ctl.o_seg_f),
			 solver_ctl_at(s, s->ctl.o_seg_g),
			 (size_t)s->S * (size_t)s->P, s->len);
	return run_check(r, x);
}

/* Frozen samples (scope sample): dst_k = src_k, or 0 when src is NULL. */
static void run_freeze(struct run *r, void *dst, const void *src)
{
	if (r->p->scope == SCOPE_SAMPLE)
		copy_if(r->s, dst, src, r->s->ctl.o_done);
}

/* ----------------------------------------------------------- fixed point */

/* Buffers: x, F(x), g, best. x and F(x) swap roles each iteration. */
static void solve_fixed_point(struct run *r)
{
	struct solver *s = r->s;
	const struct backend *be = s->be;
	void *x = solver_vec(s, 0), *fx = solver_vec(s, 1),
	     *g = solver_vec(s, 2);

	be_fill(be, x, 0.0, s->n);
	for (;;) {
		solver_run_eval(r, fx, x);
		if (run_measure(r, x, g, fx))
			return;
		run_freeze(r, fx, x); /* frozen samples stay */
		void *t = x;	      /* x ← F(x) */
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
	r->updates++;
	r->history_sum += b->nu;
	be_copy(s->be, dx, g, s->n);
	if (b->nu > 0) {
		sample_coef(s, b->coef, b->nu, g, b->V, b->nu);
		sample_apply(s, dx, -1.0, b->coef, b->nu, b->U, b->nu, 1.0);
	}
}

/* The rank-1 update from Δx (dx, consumed) and Δg (dg); fx is scratch.
 * v = Bᵀ Δx = −Δx + Vᵀ (U Δx); u = (Δx − B Δg) / (vᵀ Δg), with u = 0
 * for a sample whose vᵀ Δg is 0 or not finite (scale_recip: the pair then
 * adds nothing, and its slot is used all the same, so the host knows every
 * slot without reading). */
static void broyden_update(struct run *r, struct broyden *b, void *dx,
			   const void *dg, void *fx)
{
	struct solver *s = r->s;
	const struct backend *be = s->be;
	const size_t n = s->n;
	/* Slot for the new pair; a full history drops its oldest pair first
	 * (zero rows add nothing to the products). */
	int slot = b->nu < b->h ? b->nu : b->head;
	int nact = b->nu < b->h ? b->nu : b->h;
	void *Us = dq_at(s->be, b->U, (size_t)slot * n);
	void *Vs = dq_at(s->be, b->V, (size_t)slot * n);
	if (b->nu == b->h) {
		be_fill(be, Us, 0.0, n);
		be_fill(be, Vs, 0.0, n);
	}
	/* v goes straight into its slot while the history has room (the
	 * products read rows below it); a full one reads the zeroed slot,
	 * so v is made in fx and copied in at the end */
	void *v = b->nu < b->h ? Vs : fx;
	be_sub(be, v, NULL, dx, n);
	if (nact > 0) {
		sample_coef(s, b->coef, nact, dx, b->U, nact);
		sample_apply(s, v, 1.0, b->coef, nact, b->V, nact, 1.0);
	}
	be_axpy(be, dx, 1.0, dg, n); /* u (vᵀΔg) = Δx + Δg − Uᵀ (V Δg) */
	if (nact > 0) {
		sample_coef(s, b->coef, nact, dg, b->V, nact);
		sample_apply(s, dx, -1.0, b->coef, nact, b->U, nact, 1.0);
	}
	seg_dots(s, s->ctl.o_seg_d, v, dg); /* vᵀ Δg per segment */
	if (b->nu == b->h)
		b->head = (b->head + 1) % b->h;
	be_scale_recip(be, Us, dx, solver_ctl_at(s, s->ctl.o_seg_d), s->S, s->P,
		       s->len);
	if (v != Vs)
		be_copy(be, Vs, v, n);
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
	const struct backend *be = s->be;
	const size_t n = s->n;
	const int h = r->p->history;
	void *x = solver_vec(s, 0), *g = solver_vec(s, 1),
	     *fx = solver_vec(s, 2);
	void *dx = solver_vec(s, 3), *dg = solver_vec(s, 4);
	struct broyden b = {.U = solver_vec(s, 6),
			    .V = solver_vec(s, 6 + (size_t)h),
			    .coef = solver_vec(s, 6 + 2 * (size_t)h),
			    .h = h};

	be_fill(be, x, 0.0, n);
	solver_run_eval(r, fx, x);
	if (run_measure(r, x, g, fx))
		return;
	for (;;) {
		broyden_step(r, &b, dx, g);
		run_freeze(r, dx, NULL); /* frozen: Δx = 0 */
		be_axpy(be, x, 1.0, dx, n);
		solver_run_eval(r, fx, x);
		if (run_measure(r, x, fx, fx)) /* fx = g_new */
			return;
		be_sub(be, dg, fx, g, n);
		void *t = g; /* g = g_new; fx is free */
		g = fx;
		fx = t;
		broyden_update(r, &b, dx, dg, fx);
	}
}

/* -------------------------------------------------------------- anderson */

/* Buffers: xn (next iterate), fx, best, X (m, n), G (m, n), coef (S, m).
 * Slot k % m of the rings holds iterate k and its G = F(x) − x. Each
 * sample's Gram matrix lives in the control block; its weights come from
 * the bordered solve on the device (anderson_weights). */
static void solve_anderson(struct run *r)
{
	struct solver *s = r->s;
	const struct backend *be = s->be;
	const size_t n = s->n;
	const int m = r->p->anderson_m;
	void *xn = solver_vec(s, 0), *fx = solver_vec(s, 1);
	void *X = solver_vec(s, 3), *G = solver_vec(s, 3 + (size_t)m);
	void *coef = solver_vec(s, 3 + 2 * (size_t)m);
	int k = 0;

	be_fill(be, xn, 0.0, n);
	for (;;) {
		int slot = k % m;
		void *Xs = dq_at(s->be, X, (size_t)slot * n);
		void *Gs = dq_at(s->be, G, (size_t)slot * n);
		solver_run_eval(r, fx, xn);
		be_copy(be, Xs, xn, n);
		if (run_measure(r, xn, Gs, fx))
			return;
		k++;
		int nact = k < m ? k : m;
		r->updates++;
		r->history_sum += nact;
		/* Gram rows of the new G against every G in use, then each
		 * sample's weights into coef */
		sample_coef(s, coef, nact, Gs, G, nact);
		be_anderson_weights(be, &s->ctl, coef, coef, slot, nact,
				    r->p->lambda);
		/* xn = αᵀ X + β αᵀ G */
		sample_apply(s, xn, 1.0, coef, nact, X, nact, 0.0);
		sample_apply(s, xn, r->p->beta, coef, nact, G, nact, 1.0);
		run_freeze(r, xn, Xs); /* frozen */
	}
}

/* The solver's own iterations of a solve of `evals` evaluations with p,
 * and the history they ran over summed (solve_stats.updates and
 * history_sum): what a recorded solve (solver_graphs) ran, whose
 * recording issued every segment up to max_iter. The same counts as the
 * eager loops make (solve_broyden: step t at min(t, h) pairs, t = 0 …
 * evals − 2; solve_anderson: mixing k at min(k, m) iterates, k = 1 …
 * evals − 1). */
static void updates_of(const struct solver_params *p, int evals, long *u,
		       long *hs)
{
	*u = *hs = 0;
	if (p->kind == SOLVER_FIXED_POINT)
		return;
	for (int t = 0; t + 1 < evals; t++) {
		int h = p->kind == SOLVER_BROYDEN ? t : t + 1;
		int cap =
		    p->kind == SOLVER_BROYDEN ? p->history : p->anderson_m;
		(*u)++;
		*hs += h < cap ? h : cap;
	}
}

/* Index of the `best` vector in each solver's buffer layout. */
static size_t best_slot(enum solver_kind k)
{
	return k == SOLVER_FIXED_POINT ? 3 : k == SOLVER_BROYDEN ? 5 : 2;
}

/* The control block's head for a new solve with p, uploaded (not a read):
 * going on, no evaluation yet, every sample unfrozen and without a best. */
static void ctl_start(struct solver *s, const struct solver_params *p)
{
	struct dq_solve_ctl *c = &s->ctl;
	c->stop_rel = p->stop == STOP_REL;
	c->per_sample = p->scope == SCOPE_SAMPLE;
	c->stall = p->stall;
	c->tol = p->tol;
	c->protect = p->protect;
	c->stall_ratio = STALL_RATIO;
	c->max_iter = p->max_iter;
	/* the fused rings at this solve's own history (the layout fits the
	 * largest; the vectors' places come from p) */
	c->hb = solver_fused(p) && p->kind == SOLVER_BROYDEN ? p->history : 0;
	c->ma =
	    solver_fused(p) && p->kind == SOLVER_ANDERSON ? p->anderson_m : 0;
	c->lambda = p->lambda;
	c->beta = p->beta;
	memset(s->head, 0, DQ_CTL_HEAD * sizeof(double));
	s->head[DQ_CTL_GO] = 1;
	s->head[DQ_CTL_RES] = s->head[DQ_CTL_ABS] = s->head[DQ_CTL_REL] =
	    INFINITY;
	const struct backend *be = s->be;
	be_upload_bytes(be, c->st, s->head, DQ_CTL_HEAD * sizeof(double));
	be_upload_bytes(be, solver_ctl_at(s, c->o_done), s->zeros,
			(size_t)s->S * sizeof(double));
	if (c->hb || c->ma)
		be_upload_bytes(be, solver_ctl_at(s, c->o_fused), s->zeros,
				DQ_FU_HEAD * sizeof(double));
}

/* The decision's numbers into st and the trace: one host read. */
static void ctl_finish(struct solver *s, const struct solver_params *p,
		       struct solve_stats *st, double *trace, int *trace_len,
		       long *reads)
{
	const double *h = s->head;
	int tl = 0;
	be_download_bytes(s->be, s->head, s->ctl.st,
			  (size_t)(DQ_CTL_HEAD + s->ctl.trace_cap) *
			      sizeof(double));
	(*reads)++;
	st->iters = (int)h[DQ_CTL_ITERS];
	st->residual = h[DQ_CTL_RES];
	st->abs_residual = h[DQ_CTL_ABS];
	st->rel_residual = h[DQ_CTL_REL];
	st->samples_converged = (int)h[DQ_CTL_NCONV];
	st->nonfinite = h[DQ_CTL_NONFINITE] != 0;
	st->protect_break = h[DQ_CTL_PROTECT] != 0;
	st->stall_break = h[DQ_CTL_STALL] != 0;
	if (trace) {
		tl = (int)h[DQ_CTL_TRACE_LEN];
		tl = tl < METHOD_TRACE_MAX ? tl : METHOD_TRACE_MAX;
		memcpy(trace, h + DQ_CTL_HEAD, (size_t)tl * sizeof(double));
	}
	if (trace_len)
		*trace_len = tl;
	int have = h[DQ_CTL_HAVE_BEST] != 0;
	if (p->scope == SCOPE_BATCH)
		st->converged = have && st->residual <= p->tol;
	else
		st->converged = have && st->samples_converged == s->S;
}

int solver_graphs(struct solver *s, int on)
{
	s->graphs = on && be_has_graphs(s->be);
	return s->graphs;
}

/* The iterations of r's solver kind, from x₀ = 0 (the device's check
 * decides where they stop; the host issues until run_check says so). */
static void solve_run(struct run *r)
{
	switch (r->p->kind) {
	case SOLVER_FIXED_POINT:
		solve_fixed_point(r);
		break;
	case SOLVER_BROYDEN:
		solve_broyden(r);
		break;
	case SOLVER_ANDERSON:
		solve_anderson(r);
		break;
	}
}

static void solve_graph(struct run *r)
{
	struct solver *s = r->s;
	struct solve_graph *g = solver_graph_find(s, r->p, r->F);
	if (!g) {
		g = solver_graph_slot(s, r->p, r->F);
		r->graph = 1;
		be_graph_loop_begin(s->be);
		solve_run(r);
		g->g = be_graph_loop_end(s->be);
	}
	be_graph_launch(s->be, g->g);
}

const void *solver_solve(struct solver *s, const struct solver_params *p,
			 const struct fp_map *F, struct solve_stats *st,
			 double *trace, int *trace_len, long *host_reads)
{
	struct run r = {
	    .s = s,
	    .p = p,
	    .F = F,
	    .reads = host_reads,
	    .best = solver_vec(s, best_slot(p->kind)),
	    .sync = p->sync_every > 0 ? p->sync_every : 1,
	};
	memset(st, 0, sizeof(*st));
	st->solver = p->kind;
	st->tol = p->tol;
	st->stop = p->stop;
	st->residual = st->abs_residual = st->rel_residual = INFINITY;
	st->samples = s->S;
	if (trace_len)
		*trace_len = 0;
	/* x₀ = 0 stands in when no iterate had a finite residual */
	be_fill(s->be, r.best, 0.0, s->n);
	if (solver_elems(p, s->n) > s->elems || p->max_iter > s->max_iter ||
	    (p->kind == SOLVER_ANDERSON && p->anderson_m > s->ctl.m) ||
	    (solver_fused(p) && p->kind == SOLVER_BROYDEN &&
	     p->history > s->hb_cap) ||
	    (solver_fused(p) && p->kind == SOLVER_ANDERSON &&
	     p->anderson_m > s->ma_cap) ||
	    p->stall > s->ctl.ring || samples_of(p) != s->S ||
	    parts_of(p) != s->P) {
		st->nonfinite = 1; /* not created for p: a programming error */
		return r.best;
	}
	ctl_start(s, p);
	if (solver_fused(p) && p->kind == SOLVER_BROYDEN)
		solve_broyden_fused(&r);
	else if (solver_fused(p))
		solve_anderson_fused(&r);
	else if (s->graphs)
		solve_graph(&r);
	else
		solve_run(&r);
	ctl_finish(s, p, st, trace, trace_len, host_reads);
	/* a device-side loop runs the evaluations the device checked */
	st->evals = s->graphs ? st->iters : r.launched;
	st->updates = r.updates;
	st->history_sum = r.history_sum;
	if (s->graphs || solver_fused(p))
		updates_of(p, st->evals, &st->updates, &st->history_sum);
	return r.best;
}
