/*
 * stats.h — the statistics `report` and the findings put beside a number:
 * medians, mean ± sd, and 95% intervals over repeated runs (seeds,
 * repeats) of one configuration. The t quantiles come from GSL
 * (gsl_cdf_tdist_Pinv).
 *
 * Intervals are taken on the log scale, because times are positive and
 * their noise is multiplicative (a shared machine slows a run by a factor):
 * - one configuration: the t interval of the mean of log x over its runs,
 *   exponentiated (an interval for the geometric mean of the per-run
 *   medians), df = n − 1;
 * - a ratio of two configurations (× unroll): Welch's t interval of the
 *   difference of the mean logs, exponentiated, with Welch–Satterthwaite
 *   degrees of freedom; the runs of the two need not be paired.
 * Both need at least 2 runs on each side; with one run there is no
 * interval (NAN), and the report says n = 1.
 */
#ifndef DQ_BENCH_STATS_H
#define DQ_BENCH_STATS_H

/* Median of x[0..n) (mean of the middle two for even n), NaNs left out;
 * NAN when none is finite. x is not changed. */
double stats_median(const double *x, int n);

/* Mean and sample standard deviation (n − 1) of x[0..n); *sd NAN when
 * n < 2, both NAN when n < 1. */
void stats_mean_sd(const double *x, int n, double *mean, double *sd);

/* The level (e.g. 0.95) t interval of the geometric mean of x[0..n) (all
 * > 0): [*lo, *hi]. 0, or -1 with both NAN (n < 2, a value <= 0 or not
 * finite). */
int stats_log_interval(const double *x, int n, double level, double *lo,
		       double *hi);

/* The level Welch t interval of the ratio of the geometric means of
 * a[0..na) and b[0..nb) (all > 0), a over b: [*lo, *hi]. 0, or -1 with
 * both NAN (na or nb < 2, a value <= 0 or not finite). Two sides without
 * spread give lo = hi = the ratio. */
int stats_log_ratio_interval(const double *a, int na, const double *b, int nb,
			     double level, double *lo, double *hi);

/* The two intervals above with a known variance `extra` (>= 0) of the log
 * estimate added to the runs' (the price part of a priced time: report's
 * --price, report_cost.h): standard error sqrt(s² + extra), s² the runs'
 * (v/n; Welch's sa + sb); degrees of freedom by Welch–Satterthwaite with
 * extra taken as known (infinite degrees: the normal quantile when the runs
 * have no spread). extra = 0 gives the functions above, bit for bit. With
 * no spread and extra = 0: lo = hi. n (na, nb) >= 2 as above. */
int stats_log_interval_plus(const double *x, int n, double level, double extra,
			    double *lo, double *hi);
int stats_log_ratio_interval_plus(const double *a, int na, const double *b,
				  int nb, double level, double extra,
				  double *lo, double *hi);

/* Largest sample sizes for which stats_mann_whitney computes the exact
 * permutation distribution of U, ties or not; above, the normal
 * approximation. */
#define STATS_MWU_EXACT_MAX 20

/*
 * stats_mann_whitney — the two-sided Mann–Whitney U test of a[0..na)
 * against b[0..nb) (Mann & Whitney 1947; as Google Benchmark's compare.py
 * and scipy.stats.mannwhitneyu): *u = U of a (the number of pairs with
 * a > b, ties counting 1/2), *p the two-sided p-value. Values that are not
 * finite are left out. With at most STATS_MWU_EXACT_MAX values a side, p
 * is exact: the permutation distribution of a's sum of midranks over
 * every split of the pooled values, twice the smaller tail (at most 1; as
 * scipy.stats.permutation_test; without ties the distribution of U that
 * scipy's method='exact' uses). Larger samples take the normal
 * approximation with the tie correction of the variance and a continuity
 * correction of 1/2. 0, or -1 with *u and *p NAN when a side has no finite
 * value or out of memory.
 */
int stats_mann_whitney(const double *a, int na, const double *b, int nb,
		       double *u, double *p);

/* The smallest two-sided p stats_mann_whitney can return for na and nb
 * values (without ties; ties only raise it): 2 / C(na + nb, na), at most 1.
 * 3 + 3 values: 0.1, so no difference is significant at alpha 0.05;
 * 4 + 4: 0.029. NAN when na or nb < 1. */
double stats_mann_whitney_min_p(int na, int nb);

/* The fewest values a side, n, for which stats_mann_whitney_min_p(n, n)
 * falls below alpha (in (0, 1]): the runs a side a comparison needs before
 * any difference can be called at alpha. alpha 0.05: 4 (2/70 = 0.029);
 * 0.01: 5 (2/252 = 0.0079); 0.001: 7. 1 for alpha above 1 (no test
 * needed), 0 for alpha <= 0 or NaN (no n will do). */
int stats_mann_whitney_need_n(double alpha);

#endif
