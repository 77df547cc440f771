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
		m = k % 2 ? s[k / 2] : 0.5 * (s[k / 2 - 1] + s[k / 2]);
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
	double m, v, h;
	*lo = *hi = NAN;
	if (n < 2 || log_moments(x, n, &m, &v) != 0)
		return -1;
	h = gsl_cdf_tdist_Pinv(0.5 + level / 2, n - 1) * sqrt(v / n);
	*lo = exp(m - h);
	*hi = exp(m + h);
	return 0;
}

int stats_log_ratio_interval(const double *a, int na, const double *b, int nb,
			     double level, double *lo, double *hi)
{
	double ma, va, mb, vb, sa, sb, se, df, h;
	*lo = *hi = NAN;
	if (na < 2 || nb < 2 || log_moments(a, na, &ma, &va) != 0 ||
	    log_moments(b, nb, &mb, &vb) != 0)
		return -1;
	sa = va / na;
	sb = vb / nb;
	se = sqrt(sa + sb);
	if (se == 0) {
		*lo = *hi = exp(ma - mb);
		return 0;
	}
	/* Welch–Satterthwaite; a side without spread contributes nothing */
	df = (sa + sb) * (sa + sb) /
	     ((sa ? sa * sa / (na - 1) : 0) + (sb ? sb * sb / (nb - 1) : 0));
	h = gsl_cdf_tdist_Pinv(0.5 + level / 2, df) * se;
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
 * n; *tie_term = sum over tie groups of t^3 - t. */
static double rank_sum_a(const struct ranked *s, int n, double *tie_term)
{
	double ra = 0;
	*tie_term = 0;
	for (int i = 0; i < n;) {
		int j = i;
		while (j < n && s[j].v == s[i].v)
			j++;
		double rank = 0.5 * (i + 1 + j), t = j - i; /* ranks i+1..j */
		for (int k = i; k < j; k++)
			ra += s[k].from_a ? rank : 0;
		*tie_term += t * t * t - t;
		i = j;
	}
	return ra;
}

/* P(U <= u) for sample sizes m, n without ties: the count of
 * arrangements with U = k satisfies c(m, n, k) = c(m-1, n, k-n) +
 * c(m, n-1, k) (Mann & Whitney 1947, eq. 1); over C(m+n, m). */
static double exact_cdf(int m, int n, double u)
{
	int K = m * n, w = K + 1;
	double *c = calloc((size_t)(m + 1) * (n + 1) * w, sizeof(*c)), tot = 0,
	       below = 0;
#define C(i, j, k) c[((size_t)(i) * (n + 1) + (j)) * w + (k)]
	if (!c)
		return NAN;
	for (int i = 0; i <= m; i++)
		for (int j = 0; j <= n; j++)
			for (int k = 0; k <= i * j; k++)
				C(i, j, k) =
				    (i == 0 || j == 0)
					? (k == 0)
					: (k >= j ? C(i - 1, j, k - j) : 0) +
					      C(i, j - 1, k);
	for (int k = 0; k <= K; k++) {
		tot += C(m, n, k);
		below += k <= u + 1e-9 ? C(m, n, k) : 0;
	}
#undef C
	free(c);
	return below / tot;
}

int stats_mann_whitney(const double *a, int na, const double *b, int nb,
		       double *u, double *p)
{
	int n = na + nb;
	struct ranked *s;
	double tie, mu, sd, z;
	*u = *p = NAN;
	if (na < 1 || nb < 1 || !(s = malloc((size_t)n * sizeof(*s))))
		return -1;
	for (int i = 0; i < na; i++)
		s[i] = (struct ranked){a[i], 1};
	for (int i = 0; i < nb; i++)
		s[na + i] = (struct ranked){b[i], 0};
	qsort(s, (size_t)n, sizeof(*s), cmp_ranked);
	*u = rank_sum_a(s, n, &tie) - 0.5 * na * (na + 1.0);
	free(s);
	if (tie == 0 && na <= STATS_MWU_EXACT_MAX &&
	    nb <= STATS_MWU_EXACT_MAX) {
		/* two-sided: twice the smaller tail, U's distribution being
		 * symmetric about na nb / 2 */
		double lo = fmin(*u, (double)na * nb - *u);
		*p = fmin(1.0, 2 * exact_cdf(na, nb, lo));
		return 0;
	}
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
