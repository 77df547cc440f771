/* health.c — see health.h: the training-health verdict of a run. */
#include "health.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median of x[0..n) (n <= HEALTH_WINDOW), NaNs left out; NAN when none. */
static double window_median(const double *x, int n)
{
	double s[HEALTH_WINDOW];
	int k = 0;
	for (int i = 0; i < n; i++)
		if (isfinite(x[i]))
			s[k++] = x[i];
	if (!k)
		return NAN;
	qsort(s, (size_t)k, sizeof(*s), cmp_double);
	return k % 2 ? s[k / 2] : 0.5 * (s[k / 2 - 1] + s[k / 2]);
}

/* Steps that are spikes (health.h's rule). */
static int count_spikes(const double *loss, const double *gnorm, int n)
{
	int spikes = 0;
	double lmin = INFINITY;
	for (int i = 0; i < n; i++) {
		int bad = !isfinite(loss[i]) || !isfinite(gnorm[i]) ||
			  loss[i] > lmin + HEALTH_LOSS_MARGIN;
		if (i >= HEALTH_WINDOW_MIN) {
			int w = i < HEALTH_WINDOW ? i : HEALTH_WINDOW;
			double med = window_median(gnorm + i - w, w);
			bad |= isfinite(med) &&
			       gnorm[i] > HEALTH_SPIKE_FACTOR * med;
		}
		spikes += bad;
		if (isfinite(loss[i]) && loss[i] < lmin)
			lmin = loss[i];
	}
	return spikes;
}

/* loss_final (mean of the last w steps) and loss_min (lowest mean of w
 * consecutive steps), w = clamp(n/10, 1, 50). */
static void loss_windows(const double *loss, int n, double *final, double *min)
{
	int w = n / 10 < 1 ? 1 : n / 10 > 50 ? 50 : n / 10;
	double sum = 0, best = INFINITY;
	for (int i = 0; i < n; i++) {
		sum += loss[i];
		if (i >= w)
			sum -= loss[i - w];
		if (i >= w - 1 && sum / w < best)
			best = sum / w;
	}
	*final = sum / w;
	*min = best;
}

/* Median and maximum of the finite norms. */
static void gnorm_stats(const double *g, int n, double *med, double *max)
{
	double *s = malloc((size_t)n * sizeof(*s));
	int k = 0;
	*med = *max = NAN;
	if (!s)
		return;
	for (int i = 0; i < n; i++)
		if (isfinite(g[i]))
			s[k++] = g[i];
	if (k) {
		qsort(s, (size_t)k, sizeof(*s), cmp_double);
		*med = k % 2 ? s[k / 2] : 0.5 * (s[k / 2 - 1] + s[k / 2]);
		*max = s[k - 1];
	}
	free(s);
}

/* Share of c[from..to) with HEALTH_CONVERGED_BIT set. */
static double conv_share(const int *c, int from, int to)
{
	int k = 0;
	for (int i = from; i < to; i++)
		k += (c[i] & HEALTH_CONVERGED_BIT) != 0;
	return to > from ? (double)k / (to - from) : NAN;
}

void health_assess(const double *loss, const double *gnorm, int n,
		   const int *fwd_conv, int nc, int diverged, struct health *h)
{
	memset(h, 0, sizeof(*h));
	h->steps = n;
	h->gnorm_median = h->gnorm_max = h->loss_final = h->loss_min = NAN;
	h->fwd_converged = h->fwd_converged_last = NAN;
	h->unconverged = -1;
	if (n > 0) {
		gnorm_stats(gnorm, n, &h->gnorm_median, &h->gnorm_max);
		h->spike_steps = count_spikes(loss, gnorm, n);
		loss_windows(loss, n, &h->loss_final, &h->loss_min);
	}
	if (fwd_conv && nc > 0) {
		int last = nc / 10 < 1 ? 1 : nc / 10;
		h->fwd_converged = conv_share(fwd_conv, 0, nc);
		h->fwd_converged_last = conv_share(fwd_conv, nc - last, nc);
		h->unconverged = h->fwd_converged < HEALTH_MIN_CONVERGED ||
				 h->fwd_converged_last < HEALTH_MIN_CONVERGED;
	}
	if (diverged)
		h->verdict = HEALTH_DIVERGED;
	else if (h->spike_steps > HEALTH_SPIKE_SHARE * n ||
		 !(h->loss_final <= h->loss_min + HEALTH_LOSS_MARGIN) ||
		 (n > 0 && h->loss_final > loss[0] + HEALTH_REGRESS_MARGIN))
		h->verdict = n > 0 ? HEALTH_UNSTABLE : HEALTH_HEALTHY;
	else
		h->verdict = HEALTH_HEALTHY;
}

const char *health_verdict_name(enum health_verdict v)
{
	return v == HEALTH_DIVERGED   ? "diverged"
	       : v == HEALTH_UNSTABLE ? "unstable"
				      : "healthy";
}

static json_t *num_or_null(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

json_t *health_json(const struct health *h)
{
	json_t *o = json_object();
	json_object_set_new(o, "verdict",
			    json_string(health_verdict_name(h->verdict)));
	json_object_set_new(o, "unconverged",
			    h->unconverged < 0 ? json_null()
					       : json_boolean(h->unconverged));
	json_object_set_new(o, "steps", json_integer(h->steps));
	json_object_set_new(o, "grad_norm_median",
			    num_or_null(h->gnorm_median));
	json_object_set_new(o, "grad_norm_max", num_or_null(h->gnorm_max));
	json_object_set_new(o, "spike_steps", json_integer(h->spike_steps));
	json_object_set_new(o, "loss_final", num_or_null(h->loss_final));
	json_object_set_new(o, "loss_min", num_or_null(h->loss_min));
	json_object_set_new(o, "fwd_converged", num_or_null(h->fwd_converged));
	json_object_set_new(o, "fwd_converged_last",
			    num_or_null(h->fwd_converged_last));
	return o;
}

/* arr as *n doubles (null: NAN), room for at least min entries, those
 * past the array NAN; NULL when arr is not an array. */
static double *doubles_of_n(const json_t *arr, int *n, int min)
{
	size_t i;
	json_t *v;
	double *x;
	int cap;
	if (!json_is_array(arr))
		return NULL;
	*n = (int)json_array_size(arr);
	cap = *n > min ? *n : min;
	x = malloc(((size_t)cap + 1) * sizeof(*x));
	if (!x)
		return NULL;
	for (int k = *n; k < cap; k++)
		x[k] = NAN;
	json_array_foreach(arr, i, v) x[i] =
	    json_is_number(v)	 ? json_number_value(v)
	    : json_is_boolean(v) ? (double)json_is_true(v)
				 : NAN;
	return x;
}

static double *doubles_of(const json_t *arr, int *n)
{
	return doubles_of_n(arr, n, 0);
}

json_t *health_of_record(const json_t *rec)
{
	const json_t *tr = json_object_get(rec, "trace");
	const json_t *fwd =
	    json_object_get(json_object_get(rec, "solver"), "forward");
	const char *st = json_string_value(json_object_get(rec, "status"));
	int nl = 0, ng = 0, nf = 0, nc = 0;
	double *loss = doubles_of(json_object_get(tr, "loss"), &nl);
	/* the diverged step has a loss and no norm: the norm array is one
	 * shorter, its missing entries NaN (as the run's log) */
	double *g = doubles_of_n(json_object_get(tr, "grad_norm"), &ng, nl);
	double *fc = json_is_object(fwd)
			 ? doubles_of(json_object_get(tr, "fwd_converged"), &nf)
			 : NULL;
	int *conv = NULL;
	json_t *out = NULL;
	if (loss && g) {
		struct health h;
		json_int_t k =
		    json_integer_value(json_object_get(fwd, "steps"));
		nc = fc && k > 0 && k <= nf ? (int)k : 0;
		if (nc && (conv = malloc((size_t)nc * sizeof(*conv))))
			for (int i = 0; i < nc; i++)
				conv[i] = fc[nf - nc + i] == 1.0;
		health_assess(loss, g, nl, conv, conv ? nc : 0,
			      st && !strcmp(st, "diverged"), &h);
		out = health_json(&h);
	}
	free(loss);
	free(g);
	free(fc);
	free(conv);
	return out;
}
