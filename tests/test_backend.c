/*
 * test_backend.c — the backend registry and the tracked allocator
 * (kernels/backend.c) on the CPU backends: exact live/peak byte counts per
 * category, the depth+solver high-water mark, peak reset, table growth,
 * zero-size allocations, error messages of backend_create, the CPU
 * backend's info / timer / alignment, and the be_* call wrappers (they
 * reach the ops; their asserts abort on a bad shape or pointer).
 */
#include "backend.h"
#include "backend_impl.h"
#include "dq_build.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static struct backend *make(const char *name)
{
	struct backend *be = NULL;
	char err[256] = "";
	int rc = backend_create(&be, name, 0, err, sizeof(err));
	cr_assert_eq(rc, 0, "backend_create(%s): %s", name, err);
	cr_assert_not_null(be);
	return be;
}

static void assert_zero_live(const struct backend *be)
{
	for (int c = 0; c < MEM_NCAT; c++)
		cr_assert_eq(be->mem.live[c], 0, "live[%s] = %zu",
			     mem_category_name(c), be->mem.live[c]);
	cr_assert_eq(be->mem.live_total, 0);
	cr_assert_eq(be->mem.n_allocs, 0);
}

Test(backend, names_and_elem)
{
	int have_cpu = 0, have_cpu64 = 0;
	for (const char *const *n = backend_names; *n; n++) {
		have_cpu |= strcmp(*n, "cpu") == 0;
		have_cpu64 |= strcmp(*n, "cpu64") == 0;
	}
	cr_assert(have_cpu && have_cpu64);
	struct backend *f = make("cpu"), *d = make("cpu64");
	cr_assert_eq(f->elem, 4);
	cr_assert_eq(d->elem, 8);
	cr_assert_str_eq(f->ops->name, "cpu");
	cr_assert_str_eq(d->ops->name, "cpu64");
	backend_destroy(f);
	backend_destroy(d);
	cr_assert_str_eq(mem_category_name(MEM_PARAMS), "params");
	cr_assert_str_eq(mem_category_name(MEM_WORKSPACE), "workspace");
	cr_assert_str_eq(mem_category_name(MEM_NCAT), "?");
}

/* A scripted sequence with every number written out. */
Test(backend, accounting_exact)
{
	struct backend *be = make("cpu64"); /* elem = 8 bytes */
	const struct backend_mem_stats *m = &be->mem;

	void *a = backend_alloc(be, 10, MEM_PARAMS);	   /* 80 B */
	void *b = backend_alloc_bytes(be, 100, MEM_DEPTH); /* 100 B */
	cr_assert(a && b);
	cr_assert_eq(m->live[MEM_PARAMS], 80);
	cr_assert_eq(m->live[MEM_DEPTH], 100);
	cr_assert_eq(m->live_total, 180);
	cr_assert_eq(m->peak_total, 180);
	cr_assert_eq(m->n_allocs, 2);

	backend_free(be, a);
	cr_assert_eq(m->live[MEM_PARAMS], 0);
	cr_assert_eq(m->peak[MEM_PARAMS], 80);
	cr_assert_eq(m->live_total, 100);

	backend_free(be, b); /* depth back to 0; its peak stays 100 */
	void *c = backend_alloc_bytes(be, 50, MEM_SOLVER);
	cr_assert_eq(m->live[MEM_SOLVER], 50);
	cr_assert_eq(m->peak[MEM_DEPTH], 100);
	cr_assert_eq(m->peak[MEM_SOLVER], 50);
	/* depth and solver never live together yet: the joint peak is 100,
	 * not 100 + 50. */
	cr_assert_eq(m->peak_depth_solver, 100);

	void *d1 = backend_alloc_bytes(be, 30, MEM_DEPTH); /* ds = 80 */
	cr_assert_eq(m->peak_depth_solver, 100);
	void *d2 = backend_alloc_bytes(be, 80, MEM_DEPTH); /* ds = 160 */
	cr_assert_eq(m->live[MEM_DEPTH], 110);
	cr_assert_eq(m->peak[MEM_DEPTH], 110);
	cr_assert_eq(m->peak_depth_solver, 160);
	/* The separate peaks sum to 160 here too; free solver, grow depth so
	 * that they differ: depth peak 210, solver peak 50, sum 260, while
	 * the joint high-water mark is 210. */
	backend_free(be, c);
	void *d3 = backend_alloc_bytes(be, 100, MEM_DEPTH); /* depth 210 */
	cr_assert_eq(m->peak[MEM_DEPTH], 210);
	cr_assert_eq(m->peak[MEM_SOLVER], 50);
	cr_assert_eq(m->peak_depth_solver, 210);
	cr_assert_eq(m->peak_total, 210);

	void *g = backend_alloc(be, 3, MEM_GRADS); /* 24 B */
	cr_assert_eq(m->live_total, 234);
	cr_assert_eq(m->peak_total, 234);
	cr_assert_eq(m->peak_depth_solver, 210);

	backend_free(be, d1);
	backend_free(be, d2);
	backend_free(be, d3);
	backend_free(be, g);
	backend_free(be, NULL); /* ignored */
	assert_zero_live(be);
	cr_assert_eq(m->peak_total, 234);
	cr_assert_eq(m->peak[MEM_GRADS], 24);
	cr_assert_eq(m->peak[MEM_OPTIMIZER], 0);
	backend_destroy(be);
}

Test(backend, reset_peak)
{
	struct backend *be = make("cpu");
	const struct backend_mem_stats *m = &be->mem;
	void *a = backend_alloc(be, 100, MEM_DEPTH); /* 400 B */
	void *b = backend_alloc(be, 50, MEM_SOLVER); /* 200 B */
	void *w = backend_alloc(be, 25, MEM_WORKSPACE);
	backend_free(be, a);
	cr_assert_eq(m->peak_depth_solver, 600);
	backend_mem_reset_peak(be);
	cr_assert_eq(m->peak[MEM_DEPTH], 0);
	cr_assert_eq(m->peak[MEM_SOLVER], 200);
	cr_assert_eq(m->peak[MEM_WORKSPACE], 100);
	cr_assert_eq(m->peak_total, 300);
	cr_assert_eq(m->peak_depth_solver, 200);
	void *c = backend_alloc(be, 10, MEM_DEPTH);
	cr_assert_eq(m->peak_depth_solver, 240);
	cr_assert_eq(m->peak_total, 340);
	backend_free(be, b);
	backend_free(be, c);
	backend_free(be, w);
	assert_zero_live(be);
	backend_destroy(be);
}

/* 5000 live allocations force many rehashes of the pointer table; frees in
 * an interleaved order leave tombstones behind. Category host is counted
 * per category but not in the device totals. */
Test(backend, many_allocations)
{
	enum { NA = 5000 };
	struct backend *be = make("cpu");
	static void *p[NA];
	size_t want = 0;
	for (int i = 0; i < NA; i++) {
		p[i] = backend_alloc_bytes(be, (size_t)(i % 97) + 1,
					   (enum mem_category)(i % MEM_NCAT));
		cr_assert_not_null(p[i]);
		if (i % MEM_NCAT != MEM_HOST)
			want += (size_t)(i % 97) + 1;
	}
	cr_assert_gt(be->mem.live[MEM_HOST], 0);
	cr_assert_eq(be->mem.n_allocs, NA);
	cr_assert_eq(be->mem.live_total, want);
	cr_assert_eq(be->mem.peak_total, want);
	cr_assert_geq(backend_alloc_table_cap(be), 2 * NA);
	/* free evens, reallocate half, then free everything */
	for (int i = 0; i < NA; i += 2) {
		backend_free(be, p[i]);
		if (i % MEM_NCAT != MEM_HOST)
			want -= (size_t)(i % 97) + 1;
	}
	cr_assert_eq(be->mem.live_total, want);
	for (int i = 0; i < NA; i += 2)
		p[i] = backend_alloc_bytes(be, 8, MEM_HEAD);
	for (int i = NA - 1; i >= 0; i--)
		backend_free(be, p[i]);
	assert_zero_live(be);
	backend_destroy(be);
}

Test(backend, zero_size_and_alignment)
{
	struct backend *be = make("cpu64");
	void *a = backend_alloc(be, 0, MEM_PARAMS);
	void *b = backend_alloc_bytes(be, 0, MEM_PARAMS);
	cr_assert(a && b && a != b, "zero-size allocations are unique");
	cr_assert_eq(be->mem.live[MEM_PARAMS], 0);
	cr_assert_eq(be->mem.n_allocs, 2);
	void *c = backend_alloc(be, 3, MEM_HEAD);
	cr_assert_eq((uintptr_t)c % 64, 0, "64-byte aligned");
	cr_assert_null(backend_alloc(be, 1, MEM_NCAT), "bad category");
	cr_assert_null(backend_alloc(be, SIZE_MAX / 2, MEM_PARAMS),
		       "overflowing element count");
	backend_free(be, a);
	backend_free(be, b);
	backend_free(be, c);
	assert_zero_live(be);
	/* destroy releases what is still live */
	(void)backend_alloc(be, 1000, MEM_DEPTH);
	backend_destroy(be);
}

Test(backend, unknown_name)
{
	struct backend *be = (struct backend *)0x1;
	char err[256] = "";
	int rc = backend_create(&be, "tpu9000", 0, err, sizeof(err));
	cr_assert_eq(rc, -1);
	cr_assert_null(be);
	cr_assert_not_null(strstr(err, "tpu9000"), "message: %s", err);
	cr_assert_not_null(strstr(err, "cpu"), "lists choices: %s", err);
	cr_assert_not_null(strstr(err, "cpu64"), "lists cpu64: %s", err);
}

Test(backend, cuda_missing_is_clear)
{
	struct backend *be = NULL;
	char err[256] = "";
	int rc = backend_create(&be, "cuda", 0, err, sizeof(err));
	if (rc == 0) {
		/* a CUDA build on a machine with a GPU */
		cr_assert(DQ_CUDA_BUILD);
		backend_destroy(be);
		return;
	}
	cr_assert_eq(rc, -1);
	cr_assert_null(be);
	cr_assert_not_null(strcasestr(err, "cuda"), "message: %s", err);
	if (!DQ_CUDA_BUILD)
		cr_assert_not_null(strstr(err, "no CUDA backend"),
				   "message: %s", err);
	else
		cr_assert_not_null(strcasestr(err, "device"), "message: %s",
				   err);
}

Test(backend, info_timer_threads)
{
	struct backend *be = NULL;
	char err[256];
	cr_assert_eq(backend_create(&be, "cpu", 1, err, sizeof(err)), 0);
	struct backend_info info;
	be_info(be, &info);
	cr_assert_not_null(strstr(info.name, "OpenBLAS"), "%s", info.name);
	cr_assert_not_null(strstr(info.name, "float32"), "%s", info.name);
	cr_assert_gt(info.total_mem_bytes, (size_t)1 << 26);
	cr_assert_eq(info.compute_major, 0);

	be_timer_mark(be, 0);
	struct timespec ts = {0, 5 * 1000 * 1000};
	nanosleep(&ts, NULL);
	be_sync(be);
	be_timer_mark(be, BACKEND_TIMER_SLOTS - 1);
	double ms = be_timer_elapsed_ms(be, 0, BACKEND_TIMER_SLOTS - 1);
	cr_assert(ms >= 4.5 && ms < 5000, "elapsed %g ms", ms);
	backend_destroy(be);

	struct backend *d = make("cpu64");
	be_info(d, &info);
	cr_assert_not_null(strstr(info.name, "float64"), "%s", info.name);
	backend_destroy(d);
}

/* The be_* wrappers reach the ops; the optional members answer -1 on the
 * CPU, which has none of them. */
Test(backend, wrappers_call_the_ops)
{
	struct backend *be = make("cpu64");
	double h[6] = {1, 2, 3, 4, 5, 6}, g[6];
	void *x = backend_alloc(be, 6, MEM_WORKSPACE);
	be_upload(be, x, h, 6);
	be_scale(be, x, 2.0, 6);
	be_zero_rows(be, x, 2, 1, 3); /* elements 0 and 3 */
	be_download(be, g, x, 6);
	cr_assert(g[0] == 0 && g[1] == 4 && g[3] == 0 && g[5] == 12);
	cr_assert_eq(be_dot(be, x, x, 6), 4 * (4 + 9 + 25 + 36));
	struct backend_pool_stats ps = {.total_bytes = 1};
	cr_assert_eq(be_pool_stats(be, &ps), -1);
	cr_assert_eq(ps.total_bytes, 0);
	cr_assert_eq(be_pool_reset_peak(be), -1);
	cr_assert_eq(be_set_tf32(be, 1), -1);
	backend_free(be, x);
	backend_destroy(be);
}

/* The wrappers' asserts are on (b_ndebug=false): a row stride shorter than
 * the row, a NULL buffer of nonzero size and bad heads abort. */
Test(backend, wrapper_rejects_short_stride, .signal = SIGABRT)
{
	struct backend *be = make("cpu");
	void *a = backend_alloc(be, 16, MEM_WORKSPACE);
	/* A (3,4) stored with row stride 3 */
	be_gemm(be, 0, 0, 3, 4, 4, 1.0, a, 3, a, 4, 0.0, a, 4);
}

Test(backend, wrapper_rejects_null, .signal = SIGABRT)
{
	struct backend *be = make("cpu");
	void *a = backend_alloc(be, 5, MEM_WORKSPACE);
	be_copy(be, NULL, a, 5);
}

Test(backend, wrapper_rejects_bad_heads, .signal = SIGABRT)
{
	struct backend *be = make("cpu");
	void *a = backend_alloc(be, 64, MEM_WORKSPACE);
	be_attention_forward(be, a, a, a, 1, 2, 6, 4); /* 6 % 4 != 0 */
}
