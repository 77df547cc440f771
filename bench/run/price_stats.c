/* price_stats.c — see price_stats.h. */
#include "price_stats.h"

#include <gsl/gsl_cdf.h>
#include <stdlib.h>

#include "../../kernels/rng.h"

void price_shuffle(int *order, int n, uint64_t *state)
{
	for (int i = 0; i < n; i++)
		order[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(splitmix64(state) % (uint64_t)(i + 1));
		int t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int price_median_interval(double *x, int n, double *med, double *lo, double *hi)
{
	int l = 0;
	qsort(x, (size_t)n, sizeof(double), cmp_double);
	*med = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
	/* l (1-based): the largest with P(Bin(n, 1/2) <= l - 1) <= 0.025 */
	while (l < n / 2 &&
	       gsl_cdf_binomial_P((unsigned)l, 0.5, (unsigned)n) <= 0.025)
		l++;
	if (l == 0) {
		*lo = x[0];
		*hi = x[n - 1];
		return -1;
	}
	*lo = x[l - 1];
	*hi = x[n - l];
	return 0;
}

int price_done(double *x, int n, double rel)
{
	double med, lo, hi;
	if (n < PRICE_MIN_ROUNDS ||
	    price_median_interval(x, n, &med, &lo, &hi) != 0)
		return 0;
	return lo >= med * (1 - rel) && hi <= med * (1 + rel);
}

void price_fit_line(const double *h, const double *y, int n, double *a,
		    double *b)
{
	double mh = 0, my = 0, shh = 0, shy = 0;
	for (int i = 0; i < n; i++) {
		mh += h[i] / n;
		my += y[i] / n;
	}
	for (int i = 0; i < n; i++) {
		shh += (h[i] - mh) * (h[i] - mh);
		shy += (h[i] - mh) * (y[i] - my);
	}
	*b = shh > 0 ? shy / shh : 0;
	*a = my - *b * mh;
}

/* Every series done (price_done on a sorted copy in scratch). */
static int all_done(struct price_series *s, int n, int rounds, double rel,
		    double *scratch)
{
	for (int u = 0; u < n; u++) {
		for (int i = 0; i < rounds; i++)
			scratch[i] = s[u].ms[i];
		if (!price_done(scratch, rounds, rel))
			return 0;
	}
	return 1;
}

/* The summary of each series (median, interval, done) from its samples. */
static void summarise(struct price_series *s, int n, int rounds, double rel,
		      double *scratch)
{
	for (int u = 0; u < n; u++) {
		s[u].n = rounds;
		for (int i = 0; i < rounds; i++)
			scratch[i] = s[u].ms[i];
		if (rounds == 0) {
			s[u].median = s[u].lo = s[u].hi = 0;
			continue;
		}
		s[u].have_interval =
		    price_median_interval(scratch, rounds, &s[u].median,
					  &s[u].lo, &s[u].hi) == 0;
		s[u].done = price_done(scratch, rounds, rel);
	}
}

int price_measure(int n, const struct price_clock *clk, int warmup,
		  double cap_s, double rel, int max_rounds, uint64_t seed,
		  struct price_series *out, int *rounds, int *order_log)
{
	int *order = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1)), r = 0;
	int next = PRICE_MIN_ROUNDS; /* the round of the next stop test */
	double *scratch = malloc(sizeof(double) * (size_t)max_rounds), t0;
	int rc = order && scratch ? 0 : -1;
	for (int u = 0; u < n; u++) {
		out[u] = (struct price_series){0};
		out[u].ms = malloc(sizeof(double) * (size_t)max_rounds);
		rc |= out[u].ms ? 0 : -1;
	}
	for (int w = 0; w < warmup && rc == 0; w++) {
		price_shuffle(order, n, &seed);
		for (int i = 0; i < n; i++)
			clk->sample(clk->ctx, order[i]);
	}
	t0 = clk->now_s(clk->ctx);
	while (rc == 0 && r < max_rounds) {
		price_shuffle(order, n, &seed);
		for (int i = 0; i < n; i++)
			out[order[i]].ms[r] = clk->sample(clk->ctx, order[i]);
		if (order_log)
			for (int i = 0; i < n; i++)
				order_log[(size_t)r * n + i] = order[i];
		r++;
		if (clk->now_s(clk->ctx) - t0 >= cap_s)
			break;
		/* the test sorts every series: made every r/16 rounds, it
		 * costs O(R log R) over R rounds instead of O(R² log R) */
		if (r >= next) {
			next = r + 1 + r / 16;
			if (all_done(out, n, r, rel, scratch))
				break;
		}
	}
	if (rc == 0)
		summarise(out, n, r, rel, scratch);
	*rounds = r;
	free(order);
	free(scratch);
	return rc;
}

void price_series_free(struct price_series *s, int n)
{
	for (int u = 0; u < n; u++) {
		free(s[u].ms);
		s[u].ms = NULL;
	}
}
