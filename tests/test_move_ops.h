/* test_move_ops.h — checks of the two ops that only move values, zero_rows
 * and transpose, on any backend (test_vec_ops.c runs them on "cpu" and
 * "cpu64", test_cuda_vec_ops.c on "cuda"). The reference is written here on
 * the host from the values the device holds, in the backend's element type,
 * and compared bit for bit: the ops move values (transpose's add rounds
 * once, an IEEE addition that the host float/double add reproduces), so
 * every backend must give exactly the reference and so the same bits as the
 * CPU.
 * Needs test_ops_util.h (rnd, pool_*) first. Header-only, static. */
#ifndef DQ_TEST_MOVE_OPS_H
#define DQ_TEST_MOVE_OPS_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

/* Equal bits as far as a double can tell: the same value, the same sign of
 * zero, nan for nan. */
static inline int same_value(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	return a == b && signbit(a) == signbit(b);
}

/* d + s rounded once in the backend's type. */
static inline double add_in(const struct backend *be, double d, double s)
{
	if (be->elem == sizeof(float))
		return (double)((float)d + (float)s);
	return d + s;
}

/* The (rows, cols, ld) block at offset off of an n-element buffer of
 * random values is +0 afterwards, everything else untouched. */
static inline void check_zero_rows_at(struct backend *be, size_t n, size_t off,
				      size_t rows, size_t cols, size_t ld)
{
	struct pool pl = {be, {0}, 0};
	double *h = rnd(n, 1), *got = zeros(n);
	void *d = pool_up(&pl, h, n);
	pool_down(&pl, h, d, n);
	be_zero_rows(be, dq_at(be, d, off), rows, cols, ld);
	pool_down(&pl, got, d, n);
	for (size_t i = 0; i < n; i++) {
		size_t r = (i - off) / ld, c = (i - off) % ld;
		int in = i >= off && r < rows && c < cols;
		cr_assert(same_value(got[i], in ? 0.0 : h[i]),
			  "zero_rows %zux%zu ld %zu: [%zu] = %g", rows, cols,
			  ld, i, got[i]);
	}
	pool_free(&pl);
	free(h), free(got);
}

/* One position of every sequence of a (B,T,C) tensor (trellisnet's use),
 * a wide block for the parallel paths, and the empty ones. */
static inline void check_zero_rows(struct backend *be)
{
	check_zero_rows_at(be, 3 * 5 * 4, 0, 3, 4, 5 * 4);
	check_zero_rows_at(be, 3 * 5 * 4, 2 * 4, 3, 4, 5 * 4);
	check_zero_rows_at(be, 1000 * 50 + 7, 3, 1000, 37, 50);
	check_zero_rows_at(be, 9, 1, 2, 4, 4); /* ld = cols */
	check_zero_rows_at(be, 9, 1, 0, 4, 4); /* no rows */
	check_zero_rows_at(be, 9, 1, 2, 0, 4); /* no columns */
}

/* transpose of an (R,C) src with nan, ±inf and -0 planted: add = 0 into a
 * dst full of nan (which must not be read), add = 1 onto random values. */
static inline void check_transpose_at(struct backend *be, int R, int C)
{
	size_t n = (size_t)R * C;
	struct pool pl = {be, {0}, 0};
	double *s = rnd(n, 1), *d0 = rnd(n, 1), *got = zeros(n);
	const double special[4] = {NAN, INFINITY, -INFINITY, -0.0};
	for (size_t i = 0; i < 4 && i < n; i++)
		s[(i * 7919) % n] = special[i];
	void *ds = pool_up(&pl, s, n), *dd = pool_up(&pl, d0, n);
	pool_down(&pl, s, ds, n);
	pool_down(&pl, d0, dd, n);
	void *dn = pool_new(&pl, n, NAN);
	be_transpose(be, dn, ds, R, C, 0);
	be_transpose(be, dd, ds, R, C, 1);
	for (int add = 0; add < 2; add++) {
		pool_down(&pl, got, add ? dd : dn, n);
		for (size_t i = 0; i < n; i++) {
			size_t c = i / (size_t)R, r = i % (size_t)R;
			double v = s[r * (size_t)C + c];
			double want = add ? add_in(be, d0[i], v) : v;
			cr_assert(same_value(got[i], want),
				  "transpose %dx%d add=%d [%zu]: %g vs %g", R,
				  C, add, i, got[i], want);
		}
	}
	pool_free(&pl);
	free(s), free(d0), free(got);
}

/* trellisnet's (4 h in, 2) weights and back, odd and square shapes, one
 * large enough for the parallel paths, single rows and columns. */
static inline void check_transpose(struct backend *be)
{
	const int shapes[][2] = {{1, 1}, {96, 2}, {2, 96}, {5, 7},
				 {7, 5}, {1, 9},  {9, 1},  {333, 129}};
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		check_transpose_at(be, shapes[i][0], shapes[i][1]);
}

#endif
