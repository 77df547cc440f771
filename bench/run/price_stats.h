/* price_stats.h — the statistics of `deqbench price` (bench/run/price.h),
 * pure functions the tests reach with fixed numbers:
 *   - the round-robin order of one round: a permutation of the units drawn
 *     from a seeded generator, a new one each round (Google Benchmark's
 *     --benchmark_enable_random_interleaving: repetitions of every
 *     benchmark in a random order, so a slow phase of the machine falls on
 *     all of them alike);
 *   - a distribution-free 95% interval of a median: the order statistics
 *     x_(l) and x_(n+1-l) with l the largest index such that
 *     P(Bin(n, 1/2) <= l - 1) <= 2.5% (exact binomial; the interval covers
 *     the population median with probability >= 95% for any continuous
 *     distribution; Hollander & Wolfe, Nonparametric Statistical Methods,
 *     §3.6); it exists from n = 6 samples;
 *   - the stop rule, nvbench's noise criterion as used here:
 *     a unit is done when that interval lies within ±rel (2%) of its
 *     median; the measurement stops when every unit is done, or at the
 *     time cap. nvbench's cold measurements stop when the relative
 *     standard deviation drops below --max-noise (0.5%) after --min-samples
 *     (10) samples, or at --timeout (15 s of wall time), and warn of the
 *     criteria a timed-out measurement left unmet (docs/cli_help.md); here
 *     the noise is the median's interval (robust to the outliers a shared
 *     machine adds), the minimum the same 10 samples, and `deqbench price`
 *     warns likewise.
 */
#ifndef DQ_BENCH_PRICE_STATS_H
#define DQ_BENCH_PRICE_STATS_H

#include <stdint.h>

/* The fewest samples before a unit can be done (an interval exists from
 * 6; 10 keeps one lucky streak from ending the measurement). */
#define PRICE_MIN_ROUNDS 10

/* order[0..n) := a uniformly random permutation of 0..n-1 (Fisher-Yates
 * on splitmix64, kernels/rng.h) drawn from *state, which advances. */
void price_shuffle(int *order, int n, uint64_t *state);

/* The median of x[0..n) and its distribution-free 95% interval [*lo, *hi]
 * (above). x is sorted in place. Returns 0, or -1 when n < 6 (no interval
 * of that coverage exists: *lo, *hi are then min and max; *med is the
 * median for any n >= 1). */
int price_median_interval(double *x, int n, double *med, double *lo,
			  double *hi);

/* 1 when the median of x[0..n) is known to within ±rel: n >=
 * PRICE_MIN_ROUNDS and its 95% interval lies in [med (1 - rel), med (1 +
 * rel)]. x is sorted in place. */
int price_done(double *x, int n, double rel);

/* Least squares a + b h through (h[i], y[i]), i < n (n >= 2 distinct
 * h): the solver_update price's intercept and slope. */
void price_fit_line(const double *h, const double *y, int n, double *a,
		    double *b);

#endif

/* One measurement (price_measure): per unit its samples (ms), and how it
 * ended. */
struct price_series {
	double *ms; /* rounds samples, in the order taken */
	int n;
	double median, lo, hi; /* of ms (price_median_interval) */
	int have_interval;     /* n >= 6 */
	int done;	       /* price_done at the end */
};

/* What price_measure calls: sample(ctx, u) runs unit u once and returns
 * its milliseconds; now_s() a monotonic clock in seconds (both injected,
 * so the tests drive the loop with fake units and a fake clock). */
struct price_clock {
	double (*sample)(void *ctx, int unit);
	double (*now_s)(void *ctx);
	void *ctx;
};

/* Measures n units round-robin: `warmup` untimed rounds, then rounds of
 * every unit once in a new random order (price_shuffle from seed), until
 * every unit is done (price_done with rel) or cap_s seconds have passed
 * since the first timed round (the clock read after each round; the done
 * test after round PRICE_MIN_ROUNDS, then every r/16 rounds, so at most
 * ~6% more rounds than needed; at most max_rounds). out[0..n) get the samples (free with price_series_free);
 * *rounds the timed rounds. If order_log is not NULL, each round's order
 * is appended to it (rounds x n ints, max_rounds x n room). 0, or -1 when
 * out of memory. */
int price_measure(int n, const struct price_clock *clk, int warmup,
		  double cap_s, double rel, int max_rounds, uint64_t seed,
		  struct price_series *out, int *rounds, int *order_log);
void price_series_free(struct price_series *s, int n);
