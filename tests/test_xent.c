/*
 * test_xent.c — softmax cross-entropy on the CPU backends: xent_train (the
 * training step's fused softmax + backward, kernels/backend.h) against a
 * float64 reference computed here with libm, and against xent_forward then
 * xent_backward. The float32 backend computes exp with its own polynomial
 * (kernels/cpu/cpu_backend.c, exp_nonpos), so the rows span logits from
 * -120 to +40 around the maximum: every range of the exponent, the
 * underflow below -87.3, rows shorter than the vector lanes and longer
 * than a summation chunk.
 */
#include "backend.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 12345;
static double urand(void) /* [0, 1) */
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(rng >> 11) / 9007199254740992.0;
}

static struct backend *make(const char *name)
{
	struct backend *be = NULL;
	char err[256] = "";
	cr_assert_eq(backend_create(&be, name, 0, err, sizeof(err)), 0,
		     "backend_create(%s): %s", name, err);
	return be;
}

/* Logits (N,V) in double: row n spread uniformly over [-120, 0] with one
 * entry at +40 (max subtraction needed) on odd rows. Targets random. */
static void make_case(double *l, int32_t *tg, int N, int V)
{
	for (int n = 0; n < N; n++) {
		for (int j = 0; j < V; j++)
			l[(size_t)n * V + j] = -120.0 * urand();
		if (n % 2)
			l[(size_t)n * V + (n * 7) % V] = 40.0;
		tg[n] = (int32_t)(urand() * V);
	}
}

/* Reference in double: mean loss, dlogits = scale (softmax - onehot), and
 * w = 1 + |l - max| / 8 per element: l - max rounds in the backend's
 * type (half an ulp: at most |l - max| 2^-25 relative error in exp). */
static double reference(double *dl, double *w, const double *l,
			const int32_t *tg, int N, int V, double scale)
{
	double total = 0;
	for (int n = 0; n < N; n++) {
		const double *r = l + (size_t)n * V;
		double mx = -INFINITY, sum = 0;
		for (int j = 0; j < V; j++)
			mx = fmax(mx, r[j]);
		for (int j = 0; j < V; j++)
			sum += exp(r[j] - mx);
		for (int j = 0; j < V; j++) {
			dl[(size_t)n * V + j] = scale * exp(r[j] - mx) / sum;
			w[(size_t)n * V + j] = 1 + fabs(r[j] - mx) / 8;
		}
		dl[(size_t)n * V + tg[n]] -= scale;
		total += log(sum) + mx - r[tg[n]];
	}
	return total / N;
}

/* Runs xent_train (fused = 1) or xent_forward + xent_backward on backend
 * be over the case, in place as the model does; dlogits out in double. */
static double run(struct backend *be, int fused, double *out, const double *l,
		  const int32_t *tg, int N, int V, double scale)
{
	size_t n = (size_t)N * V;
	void *d = backend_alloc(be, n, MEM_HEAD);
	int32_t *dt =
	    backend_alloc_bytes(be, (size_t)N * sizeof(*tg), MEM_HEAD);
	be_upload(be, d, l, n);
	be_upload_bytes(be, dt, tg, (size_t)N * sizeof(*tg));
	double loss;
	if (fused) {
		loss = be_xent_train_host(be, d, d, dt, N, V, scale);
	} else {
		loss = be_xent_forward(be, d, d, dt, N, V);
		be_xent_backward(be, d, d, dt, N, V, scale);
	}
	be_download(be, out, d, n);
	backend_free(be, d);
	backend_free(be, dt);
	return loss;
}

/* Max over elements of |a - b| / (w |b| + f): the error in units of the
 * bound rtol (w |b| + f) checked below, f = scale at the target (its
 * p - 1 cancels), 1e-31 scale elsewhere: relative to the probability for
 * every other element down to p ~ 1e-31, absolute below (float's exp is
 * 0 below -87.3, where exp < 1.2e-38). */
static double worst(const double *a, const double *b, const double *w,
		    const int32_t *tg, int N, int V, double scale)
{
	double e = 0;
	for (int n = 0; n < N; n++)
		for (int j = 0; j < V; j++) {
			size_t i = (size_t)n * V + j;
			double f = j == tg[n] ? scale : 1e-31 * scale;
			e = fmax(e,
				 fabs(a[i] - b[i]) / (w[i] * fabs(b[i]) + f));
		}
	return e;
}

static void check_shape(int N, int V)
{
	size_t n = (size_t)N * V, sz = n * sizeof(double);
	double *l = malloc(sz), *ref = malloc(sz), *w = malloc(sz);
	double *a = malloc(sz), *b = malloc(sz);
	int32_t *tg = malloc((size_t)N * sizeof(*tg));
	double scale = 0.37 / N, e;
	make_case(l, tg, N, V);
	const char *names[] = {"cpu64", "cpu"};
	/* dlogits within rtol (w |ref| + scale) (worst above), w = 1 + |l -
	 * max| / 8: cpu64 rtol 1e-14; cpu (float: l - max rounded, polynomial exp
	 * within 2 ulp, float lane sums) 5e-7, against the reference of the
	 * float-rounded logits; the loss to 1e-14 and 1e-6 relative */
	const double rtol[] = {1e-14, 5e-7}, ltol[] = {1e-14, 1e-6};
	for (int k = 0; k < 2; k++) {
		struct backend *be = make(names[k]);
		if (k) /* the float backend sees the logits rounded */
			for (size_t i = 0; i < n; i++)
				l[i] = (float)l[i];
		double lref = reference(ref, w, l, tg, N, V, scale);
		double lf = run(be, 1, a, l, tg, N, V, scale);
		double ls = run(be, 0, b, l, tg, N, V, scale);
		cr_assert(lf == ls, "%s N=%d V=%d: fused loss %.17g vs %.17g",
			  names[k], N, V, lf, ls);
		cr_assert(fabs(lf - lref) <= ltol[k] * lref,
			  "%s N=%d V=%d: loss %.17g vs reference %.17g",
			  names[k], N, V, lf, lref);
		e = worst(a, ref, w, tg, N, V, scale);
		cr_assert(e <= rtol[k], "%s N=%d V=%d: fused dlogits error %g",
			  names[k], N, V, e);
		e = worst(b, ref, w, tg, N, V, scale);
		cr_assert(e <= rtol[k],
			  "%s N=%d V=%d: two-pass dlogits error %g", names[k],
			  N, V, e);
		backend_destroy(be);
	}
	free(l), free(ref), free(w), free(a), free(b), free(tg);
}

Test(xent, train_matches_reference)
{
	static const int shapes[][2] = {{3, 1},	  {5, 7},    {4, 16},	{3, 17},
					{6, 511}, {4, 1037}, {2, 10000}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(*shapes); s++)
		check_shape(shapes[s][0], shapes[s][1]);
}

/* The probability of the target near 1 (loss near 0) and near 0: the loss
 * keeps its relative accuracy at both ends in float32. */
Test(xent, extreme_rows)
{
	int N = 2, V = 300;
	double *l = calloc((size_t)N * V, sizeof(double));
	double *ref = malloc((size_t)N * V * sizeof(double));
	double *w = malloc((size_t)N * V * sizeof(double));
	double *a = malloc((size_t)N * V * sizeof(double));
	int32_t tg[2] = {3, 4};
	l[3] = 30.0;	 /* row 0: target dominates */
	l[V + 5] = 30.0; /* row 1: another entry dominates */
	double lref = reference(ref, w, l, tg, N, V, 1.0 / N);
	struct backend *be = make("cpu");
	double lf = run(be, 1, a, l, tg, N, V, 1.0 / N);
	cr_assert(fabs(lf - lref) <= 1e-6 * lref, "loss %.17g vs %.17g", lf,
		  lref);
	backend_destroy(be);
	free(l), free(ref), free(w), free(a);
}
