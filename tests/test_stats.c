/* test_stats.c — bench/stats.h against values computed independently with
 * SciPy 1.10 (scipy.stats.t.ppf, numpy's ddof=1): the geometric-mean t
 * interval, Welch's ratio interval, and the cases without an interval. */
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
