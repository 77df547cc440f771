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

/* Median of the finite x[0..n); NAN when none. */
static double median_of(const double *x, int n)
{
	double med, max;
	gnorm_stats(x, n, &med, &max);
	return med;
}

/* The trends of health.h over deciles of the n norms (n >=
 * HEALTH_TREND_STEPS); clip 0: no clip share. */
static void norm_trends(const double *g, int n, double clip, struct health *h)
{
	int d = n / 10, k = 0;
	double early = median_of(g + d, d), late = median_of(g + n - d, d);
	double med, max;
	gnorm_stats(g + d, n - d, &med, &max);
	h->norm_growth = early > 0 ? late / early : NAN;
	h->norm_peak = med > 0 ? max / med : NAN;
	if (clip > 0) {
		int e = 0;
		for (int i = n - d; i < n; i++)
			k += isfinite(g[i]) && g[i] > clip;
		for (int i = d; i < 2 * d; i++)
			e += isfinite(g[i]) && g[i] > clip;
		h->clip_share_last = (double)k / d;
		h->clip_share_early = (double)e / d;
	}
}

/* Share of the nc solves' flags with HEALTH_CONVERGED_BIT, overall and in
 * the last 10% (at least one); the count with HEALTH_NONFINITE_BIT. */
static int solve_shares(const int *f, int nc, double *all, double *last)
{
	int tail = nc / 10 < 1 ? 1 : nc / 10, bad = 0;
	*all = conv_share(f, 0, nc);
	*last = conv_share(f, nc - tail, nc);
	for (int i = 0; i < nc; i++)
		bad += (f[i] & HEALTH_NONFINITE_BIT) != 0;
	return bad;
}

/* The flags and the verdict of h from its figures (health.h's rules);
 * loss0: the first step's loss. */
static void judge(struct health *h, double loss0, int diverged)
{
	int n = h->steps, nc = h->steps_solved;
	int long_run = n >= HEALTH_TREND_STEPS;
	double margin = long_run ? HEALTH_SMOOTH_MARGIN : HEALTH_LOSS_MARGIN;
	h->flags = 0;
	if (h->norm_growth > HEALTH_GROWTH_MAX)
		h->flags |= HEALTH_F_GROWTH;
	if (h->norm_peak > HEALTH_PEAK_MAX)
		h->flags |= HEALTH_F_PEAK;
	if (h->clip_share_last > HEALTH_CLIP_SHARE_MAX &&
	    h->clip_share_last - h->clip_share_early >= HEALTH_CLIP_SHARE_MAX)
		h->flags |= HEALTH_F_CLIP;
	if (long_run && h->loss_final > h->loss_min + HEALTH_SMOOTH_MARGIN)
		h->flags |= HEALTH_F_REGRESS;
	if (nc > 0 && h->nonfinite_solves > HEALTH_SPIKE_SHARE * nc)
		h->flags |= HEALTH_F_NONFINITE;
	if (h->unconverged >= 0)
		h->unconverged = h->fwd_converged < HEALTH_MIN_CONVERGED ||
				 h->fwd_converged_last < HEALTH_MIN_CONVERGED ||
				 h->bwd_converged < HEALTH_MIN_CONVERGED ||
				 h->bwd_converged_last < HEALTH_MIN_CONVERGED;
	if (diverged)
		h->verdict = HEALTH_DIVERGED;
	else if (n > 0 && (h->spike_steps > HEALTH_SPIKE_SHARE * n ||
			   !(h->loss_final <= h->loss_min + margin) ||
			   h->loss_final > loss0 + HEALTH_REGRESS_MARGIN ||
			   (h->flags & ~HEALTH_F_NONFINITE)))
		h->verdict = HEALTH_UNSTABLE;
	else
		h->verdict = HEALTH_HEALTHY;
}

void health_assess(const double *loss, const double *gnorm, int n,
		   const int *fwd_conv, int nc, int diverged,
		   const struct health_more *more, struct health *h)
{
	memset(h, 0, sizeof(*h));
	h->steps = n;
	h->gnorm_median = h->gnorm_max = h->loss_final = h->loss_min = NAN;
	h->fwd_converged = h->fwd_converged_last = NAN;
	h->bwd_converged = h->bwd_converged_last = NAN;
	h->norm_growth = h->norm_peak = NAN;
	h->clip_share_early = h->clip_share_last = NAN;
	h->unconverged = -1;
	if (n > 0) {
		gnorm_stats(gnorm, n, &h->gnorm_median, &h->gnorm_max);
		h->spike_steps = count_spikes(loss, gnorm, n);
		loss_windows(loss, n, &h->loss_final, &h->loss_min);
	}
	if (n >= HEALTH_TREND_STEPS)
		norm_trends(gnorm, n, more ? more->clip : 0, h);
	if (fwd_conv && nc > 0) {
		h->steps_solved = nc;
		h->unconverged = 0;
		h->nonfinite_solves = solve_shares(
		    fwd_conv, nc, &h->fwd_converged, &h->fwd_converged_last);
		if (more && more->bwd_flags)
			h->nonfinite_solves +=
			    solve_shares(more->bwd_flags, nc, &h->bwd_converged,
					 &h->bwd_converged_last);
	}
	judge(h, n > 0 ? loss[0] : NAN, diverged);
}

const char *health_flag_name(enum health_flag f)
{
	switch (f) {
	case HEALTH_F_GROWTH:
		return "norm growth";
	case HEALTH_F_PEAK:
		return "norm peak";
	case HEALTH_F_CLIP:
		return "clip-bound";
	case HEALTH_F_REGRESS:
		return "loss regression";
	case HEALTH_F_NONFINITE:
		return "solver non-finite";
	}
	return "?";
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
	json_object_set_new(o, "bwd_converged", num_or_null(h->bwd_converged));
	json_object_set_new(o, "bwd_converged_last",
			    num_or_null(h->bwd_converged_last));
	json_object_set_new(o, "norm_growth", num_or_null(h->norm_growth));
	json_object_set_new(o, "norm_peak", num_or_null(h->norm_peak));
	json_object_set_new(o, "clip_share_early",
			    num_or_null(h->clip_share_early));
	json_object_set_new(o, "clip_share_last",
			    num_or_null(h->clip_share_last));
	json_object_set_new(o, "nonfinite_solves",
			    json_integer(h->nonfinite_solves));
	json_t *fl = json_array();
	for (int f = 1; f <= HEALTH_F_NONFINITE; f <<= 1)
		if (h->flags & f)
			json_array_append_new(fl, json_string(health_flag_name(
						      (enum health_flag)f)));
	json_object_set_new(o, "flags", fl);
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

/* The last nc entries of the trace's boolean array key as
 * HEALTH_CONVERGED_BIT flags; NULL when the trace lacks it. */
static int *conv_flags(const json_t *tr, const char *key, int nc)
{
	int n = 0;
	double *x = doubles_of(json_object_get(tr, key), &n);
	int *f = x && n >= nc ? malloc((size_t)nc * sizeof(*f) + 1) : NULL;
	for (int i = 0; f && i < nc; i++)
		f[i] = x[n - nc + i] == 1.0 ? HEALTH_CONVERGED_BIT : 0;
	free(x);
	return f;
}

static int nonfinite_of(const json_t *solver, const char *dir)
{
	return (int)json_integer_value(
	    json_object_get(json_object_get(solver, dir), "nonfinite_steps"));
}

json_t *health_of_record(const json_t *rec)
{
	const json_t *tr = json_object_get(rec, "trace");
	const json_t *sv = json_object_get(rec, "solver");
	const json_t *fwd = json_object_get(sv, "forward");
	const char *st = json_string_value(json_object_get(rec, "status"));
	int nl = 0, ng = 0, nc = 0, diverged = st && !strcmp(st, "diverged");
	double *loss = doubles_of(json_object_get(tr, "loss"), &nl);
	/* the diverged step has a loss and no norm: the norm array is one
	 * shorter, its missing entries NaN (as the run's log) */
	double *g = doubles_of_n(json_object_get(tr, "grad_norm"), &ng, nl);
	int *fc = NULL, *bc = NULL;
	json_t *out = NULL;
	if (loss && g) {
		struct health h;
		struct health_more more = {
		    .clip = json_number_value(json_object_get(
			json_object_get(rec, "config"), "clip"))};
		json_int_t k =
		    json_integer_value(json_object_get(fwd, "steps"));
		nc = json_is_object(fwd) && k > 0 ? (int)k : 0;
		fc = nc ? conv_flags(tr, "fwd_converged", nc) : NULL;
		bc = fc ? conv_flags(tr, "bwd_converged", nc) : NULL;
		more.bwd_flags =
		    json_is_object(json_object_get(sv, "backward")) ? bc : NULL;
		health_assess(loss, g, nl, fc, fc ? nc : 0, diverged, &more,
			      &h);
		if (fc) {
			h.nonfinite_solves = nonfinite_of(sv, "forward") +
					     nonfinite_of(sv, "backward");
			judge(&h, nl > 0 ? loss[0] : NAN, diverged);
		}
		out = health_json(&h);
	}
	free(loss);
	free(g);
	free(fc);
	free(bc);
	return out;
}
