/* test_stats.c — bench/report/stats.h against values computed independently with
 * SciPy 1.10 (scipy.stats.t.ppf, numpy's ddof=1, mannwhitneyu) or by
 * enumeration in Python: the geometric-mean t interval, Welch's ratio
 * interval, the cases without an interval, the U test (exact with ties at
 * small n, non-finite values left out) and its smallest p. */
#include <criterion/criterion.h>
#include <math.h>

#include "stats.h"

Test(stats, median_mean_sd)
{
	double odd[] = {3, NAN, 1, 2}, even[] = {4, 1, 3, 2}, m, sd;
	cr_assert_float_eq(stats_median(odd, 4), 2.0, 0);
	cr_assert_float_eq(stats_median(even, 4), 2.5, 0);
	cr_assert(isnan(stats_median(odd + 1, 1)));
	stats_mean_sd(even, 4, &m, &sd);
	cr_assert_float_eq(m, 2.5, 1e-15);
	cr_assert_float_eq(sd, sqrt(5.0 / 3.0), 1e-15);
	stats_mean_sd(even, 1, &m, &sd);
	cr_assert_float_eq(m, 4.0, 0);
	cr_assert(isnan(sd));
}

Test(stats, geometric_mean_interval)
{
	/* scipy: exp(mean(log x) -+ t.ppf(0.975, 2) * std(log x) / sqrt 3) */
	double x[] = {100, 110, 95}, lo, hi;
	cr_assert_eq(stats_log_interval(x, 3, 0.95, &lo, &hi), 0);
	cr_assert_float_eq(lo, 84.3551019636694, 1e-9);
	cr_assert_float_eq(hi, 122.07671632605015, 1e-9);
	cr_assert_eq(stats_log_interval(x, 1, 0.95, &lo, &hi), -1);
	cr_assert(isnan(lo) && isnan(hi));
	x[1] = 0;
	cr_assert_eq(stats_log_interval(x, 3, 0.95, &lo, &hi), -1);
}

Test(stats, welch_ratio_interval)
{
	/* scipy: Welch-Satterthwaite df 4.6163, t.ppf(0.975, df) */
	double a[] = {100, 110, 95}, b[] = {50, 52, 60, 55}, lo, hi;
	double c[] = {7, 7}, d[] = {2, 2, 2};
	cr_assert_eq(stats_log_ratio_interval(a, 3, b, 4, 0.95, &lo, &hi), 0);
	cr_assert_float_eq(lo, 1.6075270803801731, 1e-9);
	cr_assert_float_eq(hi, 2.186967111198423, 1e-9);
	cr_assert_eq(stats_log_ratio_interval(c, 2, d, 3, 0.95, &lo, &hi), 0);
	cr_assert_float_eq(lo, 3.5, 1e-12);
	cr_assert_float_eq(hi, 3.5, 1e-12);
	cr_assert_eq(stats_log_ratio_interval(a, 1, b, 4, 0.95, &lo, &hi), -1);
	cr_assert(isnan(lo) && isnan(hi));
}

Test(stats, mann_whitney_against_scipy)
{
	/* scipy.stats.mannwhitneyu(a, b, alternative='two-sided',
	 * method='exact'): U 0, p 0.05714285714285714 */
	double a[] = {1.0, 2.0, 3.5}, b[] = {4.0, 5.0, 6.0, 7.0}, u, p;
	cr_assert_eq(stats_mann_whitney(a, 3, b, 4, &u, &p), 0);
	cr_assert_float_eq(u, 0, 0);
	cr_assert_float_eq(p, 0.05714285714285714, 1e-12);
	cr_assert_eq(stats_mann_whitney(b, 4, a, 3, &u, &p), 0);
	cr_assert_float_eq(u, 12, 0);
	cr_assert_float_eq(p, 0.05714285714285714, 1e-12);
	/* identical samples: no evidence of a difference */
	cr_assert_eq(stats_mann_whitney(a, 3, a, 3, &u, &p), 0);
	cr_assert_float_eq(p, 1.0, 1e-12);
	cr_assert_eq(stats_mann_whitney(a, 0, b, 4, &u, &p), -1);
	cr_assert(isnan(p));
}

Test(stats, mann_whitney_large_samples)
{
	/* 40 against 50 draws (numpy default_rng(1), N(100, 5) and
	 * N(103, 5), one decimal; ties): scipy asymptotic with continuity:
	 * U 681, p 0.009697389481357751 */
	double x[] = {101.7, 104.1, 101.7, 93.5,  104.5, 102.2, 97.3,  102.9,
		      101.8, 101.5, 100.1, 102.7, 96.3,	 99.2,	97.6,  103.0,
		      100.2, 98.5,  96.1,  98.7,  100.0, 98.6,	106.5, 105.0,
		      86.4,  90.6,  99.1,  97.9,  101.1, 101.1, 110.6, 94.4,
		      98.1,  110.2, 103.2, 103.3, 97.4,	 91.8,	100.8, 100.5};
	double y[] = {96.9,  99.6,  102.6, 98.3,  102.5, 103.5, 103.2, 100.5,
		      106.0, 107.5, 104.6, 98.9,  106.7, 100.5, 107.4, 97.6,
		      107.6, 102.9, 96.8,  101.4, 103.3, 104.4, 98.1,  97.5,
		      104.0, 100.7, 104.2, 106.8, 94.8,	 104.3, 109.1, 101.5,
		      98.9,  106.8, 104.3, 107.5, 101.3, 95.6,	102.4, 100.8,
		      106.9, 104.0, 94.8,  97.0,  107.4, 106.4, 99.8,  103.0,
		      105.2, 105.3};
	double u, p;
	cr_assert_eq(stats_mann_whitney(x, 40, y, 50, &u, &p), 0);
	cr_assert_float_eq(u, 681, 0);
	cr_assert_float_eq(p, 0.009697389481357751, 1e-9);
}

/* G18: a NaN among the values once never advanced the rank loop (the
 * test's timeout is the check); values that are not finite are left out. */
Test(stats, mann_whitney_nan_left_out, .timeout = 10)
{
	double a[] = {1.0, NAN, 2.0, 3.5}, b[] = {4.0, 5.0, NAN, 6.0, 7.0};
	double u, p;
	cr_assert_eq(stats_mann_whitney(a, 4, b, 5, &u, &p), 0);
	cr_assert_float_eq(u, 0, 0);
	cr_assert_float_eq(p, 0.05714285714285714, 1e-12);
	cr_assert_eq(stats_mann_whitney(a + 1, 1, b, 5, &u, &p), -1);
	cr_assert(isnan(p));
}

/* G10: ties at small n take the exact permutation distribution of the
 * midrank sum (two-sided: twice the smaller tail, at most 1); values by
 * enumerating every split of the pooled values in Python. */
Test(stats, mann_whitney_exact_with_ties)
{
	double a[] = {2, 2, 2}, b[] = {1, 1, 1}, u, p;
	double c[] = {3, 1, 4, 1, 5}, d[] = {9, 2, 6, 5, 3, 5};
	cr_assert_eq(stats_mann_whitney(a, 3, b, 3, &u, &p), 0);
	cr_assert_float_eq(u, 9, 0);
	cr_assert_float_eq(p, 0.1, 1e-12);
	cr_assert_eq(stats_mann_whitney(c, 5, d, 6, &u, &p), 0);
	cr_assert_float_eq(u, 6.5, 0);
	cr_assert_float_eq(p, 0.1471861471861472, 1e-12);
	/* every value tied: no evidence at all */
	cr_assert_eq(stats_mann_whitney(b, 3, b, 3, &u, &p), 0);
	cr_assert_float_eq(p, 1.0, 1e-12);
}

/* G7: the smallest two-sided p the exact test can reach with na and nb
 * values, 2 / C(na + nb, na): 0.1 at 3+3, 2/70 at 4+4. */
Test(stats, mann_whitney_min_p)
{
	cr_assert_float_eq(stats_mann_whitney_min_p(3, 3), 0.1, 1e-15);
	cr_assert_float_eq(stats_mann_whitney_min_p(4, 4), 2.0 / 70, 1e-15);
	cr_assert_float_eq(stats_mann_whitney_min_p(1, 1), 1.0, 0);
	cr_assert_float_eq(stats_mann_whitney_min_p(30, 30),
			   2 / 118264581564861424.0, 1e-27);
	cr_assert(isnan(stats_mann_whitney_min_p(0, 3)));
}

/* The runs a side a comparison needs at alpha: the first n whose
 * 2 / C(2n, n) is below it (3 + 3 reach 0.1 exactly, not below). */
Test(stats, mann_whitney_need_n)
{
	cr_assert_eq(stats_mann_whitney_need_n(0.05), 4);
	cr_assert_eq(stats_mann_whitney_need_n(0.1), 4);
	cr_assert_eq(stats_mann_whitney_need_n(0.01), 5);
	cr_assert_eq(stats_mann_whitney_need_n(0.001), 7);
	cr_assert_eq(stats_mann_whitney_need_n(1), 2);
	cr_assert_eq(stats_mann_whitney_need_n(1e-9), 17);
	cr_assert_eq(stats_mann_whitney_need_n(0), 0);
	cr_assert_eq(stats_mann_whitney_need_n(NAN), 0);
}

/* G20.10: the median of two huge values is not their overflowing sum
 * halved. */
Test(stats, median_of_huge_values)
{
	double x[] = {1e308, 1e308};
	cr_assert_float_eq(stats_median(x, 2), 1e308, 0);
}
