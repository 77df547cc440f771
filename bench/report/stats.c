/* stats.c — see stats.h. */
#include "stats.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double stats_median(const double *x, int n)
{
	double *s = n > 0 ? malloc((size_t)n * sizeof(*s)) : NULL, m = NAN;
	int k = 0;
	if (!s)
		return NAN;
	for (int i = 0; i < n; i++)
		if (isfinite(x[i]))
			s[k++] = x[i];
	if (k) {
		qsort(s, (size_t)k, sizeof(*s), cmp_double);
		/* halves first: the sum of two huge values would overflow
		 * (the same bits otherwise, halving being exact) */
		m = k % 2 ? s[k / 2] : 0.5 * s[k / 2 - 1] + 0.5 * s[k / 2];
	}
	free(s);
	return m;
}

void stats_mean_sd(const double *x, int n, double *mean, double *sd)
{
	double m = 0, ss = 0;
	*mean = *sd = NAN;
	if (n < 1)
		return;
	for (int i = 0; i < n; i++)
		m += x[i];
	m /= n;
	for (int i = 0; i < n; i++)
		ss += (x[i] - m) * (x[i] - m);
	*mean = m;
	if (n >= 2)
		*sd = sqrt(ss / (n - 1));
}

/* Mean and variance (n − 1) of log x; -1 for a value <= 0 or not finite. */
static int log_moments(const double *x, int n, double *mean, double *var)
{
	double m = 0, ss = 0;
	for (int i = 0; i < n; i++) {
		if (!(x[i] > 0) || !isfinite(x[i]))
			return -1;
		m += log(x[i]);
	}
	m /= n;
	for (int i = 0; i < n; i++)
		ss += (log(x[i]) - m) * (log(x[i]) - m);
	*mean = m;
	*var = ss / (n - 1);
	return 0;
}

int stats_log_interval(const double *x, int n, double level, double *lo,
		       double *hi)
{
	return stats_log_interval_plus(x, n, level, 0, lo, hi);
}

/* The level quantile of half-width se: t with df degrees (Welch's), the
 * normal's where the runs add nothing (df infinite or undefined). */
static double half_width(double level, double df, double se)
{
	if (!(df > 0) || !isfinite(df))
		return gsl_cdf_ugaussian_Pinv(0.5 + level / 2) * se;
	return gsl_cdf_tdist_Pinv(0.5 + level / 2, df) * se;
}

int stats_log_interval_plus(const double *x, int n, double level, double extra,
			    double *lo, double *hi)
{
	double m, v, h, s;
	*lo = *hi = NAN;
	if (n < 2 || log_moments(x, n, &m, &v) != 0)
		return -1;
	s = v / n;
	if (extra > 0)
		h = half_width(level,
			       s > 0 ? (s + extra) * (s + extra) /
					   (s * s / (n - 1))
				     : INFINITY,
			       sqrt(s + extra));
	else
		h = gsl_cdf_tdist_Pinv(0.5 + level / 2, n - 1) * sqrt(s);
	*lo = exp(m - h);
	*hi = exp(m + h);
	return 0;
}

int stats_log_ratio_interval(const double *a, int na, const double *b, int nb,
			     double level, double *lo, double *hi)
{
	return stats_log_ratio_interval_plus(a, na, b, nb, level, 0, lo, hi);
}

int stats_log_ratio_interval_plus(const double *a, int na, const double *b,
				  int nb, double level, double extra,
				  double *lo, double *hi)
{
	double ma, va, mb, vb, sa, sb, se, df, h, runs;
	*lo = *hi = NAN;
	if (na < 2 || nb < 2 || log_moments(a, na, &ma, &va) != 0 ||
	    log_moments(b, nb, &mb, &vb) != 0)
		return -1;
	sa = va / na;
	sb = vb / nb;
	extra = extra > 0 ? extra : 0;
	se = sqrt(sa + sb + extra);
	if (se == 0) {
		*lo = *hi = exp(ma - mb);
		return 0;
	}
	/* Welch–Satterthwaite; a side without spread contributes nothing,
	 * and neither does the known extra */
	runs = (sa ? sa * sa / (na - 1) : 0) + (sb ? sb * sb / (nb - 1) : 0);
	df = runs > 0 ? (sa + sb + extra) * (sa + sb + extra) / runs : INFINITY;
	h = half_width(level, df, se);
	*lo = exp(ma - mb - h);
	*hi = exp(ma - mb + h);
	return 0;
}

/* ---- Mann–Whitney U ---- */

struct ranked {
	double v;
	int from_a;
};

static int cmp_ranked(const void *x, const void *y)
{
	double a = ((const struct ranked *)x)->v,
	       b = ((const struct ranked *)y)->v;
	return (a > b) - (a < b);
}

/* Rank sum of a's values (average ranks for ties) over the sorted pool of
 * n (finite values); the pool's midranks, doubled to be integers, into
 * r2[0..n); *tie_term = sum over tie groups of t^3 - t. */
static double rank_sum_a(const struct ranked *s, int n, int *r2,
			 double *tie_term)
{
	double ra = 0;
	*tie_term = 0;
	for (int i = 0; i < n;) {
		int j = i + 1; /* at least one: never stuck on a value */
		while (j < n && s[j].v == s[i].v)
			j++;
		double rank = 0.5 * (i + 1 + j), t = j - i; /* ranks i+1..j */
		for (int k = i; k < j; k++) {
			ra += s[k].from_a ? rank : 0;
			r2[k] = i + 1 + j;
		}
		*tie_term += t * t * t - t;
		i = j;
	}
	return ra;
}

/*
 * The exact permutation distribution of the sum S of na of the n pooled
 * (doubled) midranks r2, every choice of na positions equally likely under
 * the null: *le = P(S <= s2), *ge = P(S >= s2). Counts by choosing items
 * one at a time, c[k][s] = ways to pick k of the items so far with sum s;
 * O(n · na · sum r2), a few million steps at 20 + 20. Without ties this is
 * Mann & Whitney's (1947) distribution of U. 0, or -1 out of memory.
 */
static int exact_tails(const int *r2, int n, int na, long s2, double *le,
		       double *ge)
{
	long max = 0;
	double *c, tot = 0;
	for (int i = 0; i < n; i++)
		max += r2[i];
	c = calloc((size_t)(na + 1) * (size_t)(max + 1), sizeof(*c));
	if (!c)
		return -1;
#define C(k, s) c[(size_t)(k) * (size_t)(max + 1) + (size_t)(s)]
	C(0, 0) = 1;
	for (int i = 0; i < n; i++)
		for (int k = i + 1 < na ? i + 1 : na; k >= 1; k--)
			for (long s = max; s >= r2[i]; s--)
				C(k, s) += C(k - 1, s - r2[i]);
	*le = *ge = 0;
	for (long s = 0; s <= max; s++) {
		tot += C(na, s);
		*le += s <= s2 ? C(na, s) : 0;
		*ge += s >= s2 ? C(na, s) : 0;
	}
#undef C
	free(c);
	*le /= tot;
	*ge /= tot;
	return 0;
}

double stats_mann_whitney_min_p(int na, int nb)
{
	double c = 1; /* C(na + nb, na), as a double: exact to 2^53 */
	if (na < 1 || nb < 1)
		return NAN;
	for (int k = 1; k <= na; k++)
		c = c * (nb + k) / k;
	return fmin(1.0, 2 / c);
}

int stats_mann_whitney_need_n(double alpha)
{
	if (!(alpha > 0))
		return 0;
	if (alpha > 1)
		return 1;
	/* min_p(n, n) = 2 / C(2n, n) falls by about 4 a step: n stays
	 * below 40 for any alpha a double can hold above 1e-22 */
	for (int n = 1; n < 1000; n++)
		if (stats_mann_whitney_min_p(n, n) < alpha)
			return n;
	return 0;
}

/* The finite values of a[0..na) into s with flag from_a; their count. */
static int pool(struct ranked *s, const double *a, int na, int from_a)
{
	int k = 0;
	for (int i = 0; i < na; i++)
		if (isfinite(a[i]))
			s[k++] = (struct ranked){a[i], from_a};
	return k;
}

int stats_mann_whitney(const double *a, int na, const double *b, int nb,
		       double *u, double *p)
{
	int n, *r2;
	struct ranked *s;
	double tie, ra, mu, sd, z, le, ge;
	*u = *p = NAN;
	if (na < 1 || nb < 1)
		return -1;
	s = malloc((size_t)(na + nb) * sizeof(*s));
	r2 = malloc((size_t)(na + nb) * sizeof(*r2));
	if (!s || !r2 || !(na = pool(s, a, na, 1)) ||
	    !(nb = pool(s + na, b, nb, 0))) {
		free(s);
		free(r2);
		return -1;
	}
	n = na + nb;
	qsort(s, (size_t)n, sizeof(*s), cmp_ranked);
	ra = rank_sum_a(s, n, r2, &tie);
	*u = ra - 0.5 * na * (na + 1.0);
	free(s);
	if (na <= STATS_MWU_EXACT_MAX && nb <= STATS_MWU_EXACT_MAX) {
		int rc = exact_tails(r2, n, na, lround(2 * ra), &le, &ge);
		free(r2);
		if (rc != 0) {
			*u = NAN;
			return -1;
		}
		*p = fmin(1.0, 2 * fmin(le, ge));
		return 0;
	}
	free(r2);
	mu = 0.5 * na * nb;
	sd = sqrt(na * (double)nb / 12.0 *
		  ((n + 1.0) - tie / ((double)n * (n - 1.0))));
	if (sd == 0) {
		*p = 1;
		return 0;
	}
	z = (fabs(*u - mu) - 0.5) / sd;
	*p = fmin(1.0, 2 * gsl_cdf_ugaussian_Q(z > 0 ? z : 0));
	return 0;
}
