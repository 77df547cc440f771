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
