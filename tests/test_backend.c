/*
 * test_backend.c — the backend registry and the tracked allocator
 * (kernels/backend.c) on the CPU backends: exact live/peak byte counts per
 * category, the depth+solver high-water mark, peak reset, table growth,
 * zero-size allocations, error messages of backend_create, the CPU
 * backend's info / timer / alignment, and the be_* call wrappers (they
 * reach the ops; their asserts abort on a bad shape or pointer; the
 * optional ops answer be_has_*). The facade, from the sources
 * (DQ_SOURCE_ROOT): every op of struct backend_ops has its wrapper, and no
 * file under models/, methods/ or bench/ reaches the ops table.
 */
#include "backend.h"
#include "backend_impl.h"
#include "dq_build.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
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
	cr_assert_str_eq(be_name(f), "cpu");
	cr_assert_str_eq(be_name(d), "cpu64");
	backend_destroy(f);
	backend_destroy(d);
	cr_assert_str_eq(mem_category_name(MEM_PARAMS), "params");
	cr_assert_str_eq(mem_category_name(MEM_WORKSPACE), "workspace");
	cr_assert_str_eq(mem_category_name(MEM_NCAT), "?");
}

/* backend_caps: one record per compiled backend, known before any exists
 * (backend_caps_known: per known backend, compiled or not);
 * the CPU ones emulate everything (no GPU, no TF32 switch, bf16 on any
 * machine), an unknown name has none, and each matches what a created
 * backend offers (be_has_device, be_has_managed, be_has_graphs). */
Test(backend, static_caps)
{
	for (const char *const *n = backend_names; *n; n++) {
		const struct backend_caps *k = backend_caps(*n);
		cr_assert_not_null(k, "%s has no caps", *n);
		cr_assert_str_eq(k->name, *n);
		if (strcmp(*n, "cuda")) {
			struct backend *b = make(*n);
			cr_assert(!k->gpu && !k->tf32 && !k->bf16_min_major &&
				  !k->graphs && !k->managed);
			cr_assert_eq(k->tf32, be_has_device(b));
			cr_assert_eq(k->managed, be_has_managed(b));
			cr_assert_eq(k->graphs, be_has_graphs(b));
			backend_destroy(b);
		} else {
			cr_assert(k->gpu && k->tf32 && k->bf16_min_major == 8);
		}
	}
	cr_assert_null(backend_caps("tpu"));
	cr_assert_null(backend_caps(NULL));
	/* every known backend has a record, compiled in or not: plan sizes
	 * a device=cuda run on a CPU-only build from it */
	const struct backend_caps *cu = backend_caps_known("cuda");
	int have_cuda = 0;
	for (const char *const *n = backend_names; *n; n++)
		have_cuda |= !strcmp(*n, "cuda");
	cr_assert_not_null(cu);
	cr_assert(cu->gpu && cu->bf16_operand_bytes == 2);
	cr_assert_eq(cu->compiled, have_cuda);
	cr_assert_eq(backend_caps_known("cpu")->bf16_operand_bytes, 0);
	cr_assert_null(backend_caps_known("tpu"));
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

/* Allocation i's category: each in turn but managed, which the cpu
 * backend has not (test_managed.c tests it with stand-in ops). */
static enum mem_category cat_of(int i)
{
	enum mem_category c = (enum mem_category)(i % MEM_NCAT);
	return c == MEM_MANAGED ? MEM_HOST : c;
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
		p[i] = backend_alloc_bytes(be, (size_t)(i % 97) + 1, cat_of(i));
		cr_assert_not_null(p[i]);
		if (cat_of(i) != MEM_HOST)
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
		if (cat_of(i) != MEM_HOST)
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
	cr_assert_eq(be_norm(be, x, 6), sqrt(4 * (4 + 9 + 25 + 36)));
	struct backend_pool_stats ps = {.total_bytes = 1};
	cr_assert_eq(be_pool_stats(be, &ps), -1);
	cr_assert_eq(ps.total_bytes, 0);
	cr_assert_eq(be_pool_reset_peak(be), -1);
	cr_assert_eq(be_set_tf32(be, 1), -1);
	cr_assert(!be_has_pool(be) && !be_has_device(be));
	cr_assert(!be_has_host_alloc(be) && !be_has_managed(be));
	cr_assert(!be_has_graphs(be));
	cr_assert_str_eq(be_name(be), "cpu64");
	/* no host_alloc: MEM_HOST bytes come from raw_alloc */
	void *p = be_host_alloc(be, 16);
	cr_assert_not_null(p);
	be_host_free(be, p);
	backend_free(be, x);
	backend_destroy(be);
}

/* The solver-control wrappers reach their ops: 2 samples of 1 segment of
 * 3 elements, segment dots into device doubles, then copy_masked (sample
 * 1 only) and scale_recip (by the dots). */
Test(backend, solver_control_wrappers)
{
	struct backend *be = make("cpu64");
	double h[6] = {1, 2, 2, 0, 3, 4}, g[6], *dots = NULL;
	void *x = backend_alloc(be, 6, MEM_WORKSPACE);
	void *y = backend_alloc(be, 6, MEM_WORKSPACE);
	dots = backend_alloc_bytes(be, 4 * sizeof(double), MEM_SOLVER);
	be_upload(be, x, h, 6);
	be_dot_segments(be, dots, x, x, 2, 3);
	be_download_bytes(be, g, dots, 2 * sizeof(double));
	cr_assert(g[0] == 9 && g[1] == 25, "%g %g", g[0], g[1]);
	double flag[2] = {0, 1};
	be_upload_bytes(be, dots + 2, flag, sizeof(flag));
	be_fill(be, y, 7.0, 6);
	be_copy_masked(be, y, x, dots + 2, 2, 1, 3);
	be_download(be, g, y, 6);
	cr_assert(g[0] == 7 && g[2] == 7 && g[3] == 0 && g[5] == 4);
	be_scale_recip(be, y, x, dots, 2, 1, 3);
	be_download(be, g, y, 6);
	cr_assert(g[0] == 1.0 / 9 && g[4] == 3.0 / 25, "%g %g", g[0], g[4]);
	backend_free(be, dots);
	backend_free(be, x);
	backend_free(be, y);
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

/* ---- the facade (backend_call.h): every op has a be_* wrapper, and the code
 * above the kernels reaches the ops only through them ---- */

/* The whole of DQ_SOURCE_ROOT/rel, NUL-terminated (free it). */
static char *read_source(const char *rel)
{
	const char *root = getenv("DQ_SOURCE_ROOT");
	char path[4096];
	cr_assert_not_null(root, "DQ_SOURCE_ROOT must give the source tree");
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot read %s", path);
	char *s = NULL;
	size_t n = 0, cap = 0, got;
	do {
		if (cap - n < 4096) {
			cap = cap ? 2 * cap : 65536;
			s = realloc(s, cap);
			cr_assert_not_null(s);
		}
		got = fread(s + n, 1, cap - n - 1, f);
		n += got;
	} while (got > 0);
	fclose(f);
	s[n] = 0;
	return s;
}

#define MAX_OPS 96

/* The tables of struct backend_ops (backend.h), each a struct
 * backend_<table>_ops. */
static const char *const tables[] = {"core",	"math",	  "host", "pool",
				     "managed", "device", "graph"};
#define N_TABLES (int)(sizeof(tables) / sizeof(tables[0]))

/* The function pointers (*op) of every table in backend.h (h), and
 * `name`. Returns how many. */
static int op_names(const char *h, char names[][48])
{
	int n = 0;
	cr_assert_not_null(strstr(h, "struct backend_ops {"));
	snprintf(names[n++], 48, "name");
	for (int t = 0; t < N_TABLES; t++) {
		char head[64];
		snprintf(head, sizeof(head), "struct backend_%s_ops {",
			 tables[t]);
		const char *a = strstr(h, head);
		cr_assert_not_null(a, "backend.h: no %s", head);
		const char *end = strstr(a, "\n};");
		cr_assert_not_null(end);
		for (const char *p = strstr(a, "(*"); p && p < end;
		     p = strstr(p + 2, "(*")) {
			size_t k = strspn(
			    p + 2, "abcdefghijklmnopqrstuvwxyz0123456789_");
			cr_assert(k > 0 && k < 48 && p[2 + k] == ')');
			cr_assert_lt(n, MAX_OPS);
			snprintf(names[n++], 48, "%.*s", (int)k, p + 2);
		}
	}
	return n;
}

/* No table over 50 members. */
Test(facade, tables_stay_small)
{
	char *h = read_source("kernels/backend.h");
	for (int t = 0; t < N_TABLES; t++) {
		char head[64];
		int k = 0;
		snprintf(head, sizeof(head), "struct backend_%s_ops {",
			 tables[t]);
		const char *a = strstr(h, head), *end = strstr(a, "\n};");
		for (const char *p = strstr(a, "(*"); p && p < end;
		     p = strstr(p + 2, "(*"))
			k++;
		cr_assert(k >= 2 && k <= 50, "%s has %d members", head, k);
	}
	free(h);
}

Test(facade, every_op_has_a_wrapper)
{
	char *h = read_source("kernels/backend.h"), names[MAX_OPS][48];
	char *w0 = read_source("kernels/backend_call.h"),
	     *w1 = read_source("kernels/backend_call_ext.h"), def[96], mac[96];
	int n = op_names(h, names), missing = 0;
	/* the wrappers of both files, as one text */
	size_t l0 = strlen(w0), l1 = strlen(w1);
	char *w = malloc(l0 + l1 + 1);
	cr_assert_not_null(w);
	memcpy(w, w0, l0);
	memcpy(w + l0, w1, l1 + 1);
	free(w0);
	free(w1);
	cr_assert_gt(n, 40, "backend.h: only %d ops parsed", n);
	for (int i = 0; i < n; i++) {
		snprintf(def, sizeof(def), "be_%.47s(const struct backend *be",
			 names[i]);
		snprintf(mac, sizeof(mac), "DQ_MOVE_WRAPPER(%.47s,", names[i]);
		if (!strstr(w, def) && !strstr(w, mac)) {
			cr_log_error(
			    "backend_call*.h: op %s has no be_%s wrapper",
			    names[i], names[i]);
			missing++;
		}
	}
	cr_assert_eq(missing, 0, "%d ops without a wrapper", missing);
	free(h);
	free(w);
}

static int ident_char(char c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

/* 1 when line l (up to its newline) reaches the ops tables: names the
 * type struct backend_ops, reads be->ops (any `...be->ops`), or reads
 * ->ops-><table> or ->ops->name (method_ops and revolve_ops have their
 * own members: layout, forward, advance, ...). */
static int raw_op_line(const char *l, size_t len)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%.*s", (int)(len < 511 ? len : 511), l);
	if (strstr(buf, "struct backend_ops"))
		return 1;
	for (const char *p = strstr(buf, "be->ops"); p;
	     p = strstr(p + 1, "be->ops"))
		if ((p == buf || !ident_char(p[-1])) && !ident_char(p[7]))
			return 1;
	for (const char *p = strstr(buf, "->ops->"); p;
	     p = strstr(p + 1, "->ops->"))
		for (int i = -1; i < N_TABLES; i++) {
			const char *t = i < 0 ? "name" : tables[i];
			size_t k = strlen(t);
			if (!strncmp(p + 7, t, k) && !ident_char(p[7 + k]))
				return 1;
		}
	return 0;
}

/* Raw op calls in every .c/.h file under DQ_SOURCE_ROOT/dir (recursive),
 * each logged as file:line. */
static int raw_calls_under(const char *dir)
{
	const char *root = getenv("DQ_SOURCE_ROOT");
	char path[4096];
	int bad = 0;
	snprintf(path, sizeof(path), "%s/%s", root, dir);
	DIR *d = opendir(path);
	cr_assert_not_null(d, "cannot list %s", path);
	for (struct dirent *e; (e = readdir(d));) {
		char rel[2048];
		struct stat sb;
		size_t k = strlen(e->d_name);
		if (e->d_name[0] == '.')
			continue;
		snprintf(rel, sizeof(rel), "%s/%s", dir, e->d_name);
		snprintf(path, sizeof(path), "%s/%s", root, rel);
		cr_assert_eq(stat(path, &sb), 0, "cannot stat %s", path);
		if (S_ISDIR(sb.st_mode)) {
			bad += raw_calls_under(rel);
			continue;
		}
		if (k < 2 || e->d_name[k - 2] != '.' ||
		    (e->d_name[k - 1] != 'c' && e->d_name[k - 1] != 'h'))
			continue;
		char *s = read_source(rel);
		int line = 1;
		for (const char *l = s; *l; line++) {
			const char *nl = strchr(l, '\n');
			size_t len = nl ? (size_t)(nl - l) : strlen(l);
			if (raw_op_line(l, len)) {
				cr_log_error(
				    "%s:%d: a raw backend op call; use "
				    "its be_* wrapper (backend.h)",
				    rel, line);
				bad++;
			}
			l += len + (nl != NULL);
		}
		free(s);
	}
	closedir(d);
	return bad;
}

Test(facade, no_raw_op_calls_above_the_kernels)
{
	static const char *const dirs[] = {"models", "methods", "bench"};
	int bad = 0;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		bad += raw_calls_under(dirs[i]);
	cr_assert_eq(bad, 0, "%d raw op calls above the kernels", bad);
	/* the scan sees them: a line of each kind */
	const char *probe[] = {"o->x; const struct backend_ops *o = be->ops;",
			       "x = rc->be->ops;",
			       "s->be2->ops->core->copy(c, a);"};
	for (int i = 0; i < 3; i++)
		cr_assert(raw_op_line(probe[i], strlen(probe[i])), "%s",
			  probe[i]);
	const char *fine[] = {"me->ops->forward(me, u, z, 1);",
			      "be->opsx; xbe->ops", "be_copy(be, a, b, n);"};
	for (int i = 0; i < 3; i++)
		cr_assert(!raw_op_line(fine[i], strlen(fine[i])), "%s",
			  fine[i]);
}

/* be_anderson_weights: the new G's slot must be one of the nact in use. */
Test(backend, wrapper_rejects_anderson_slot, .signal = SIGABRT)
{
	struct backend *be = make("cpu64");
	struct dq_solve_ctl c = {.S = 1, .P = 1, .ring = 1, .m = 2};
	dq_ctl_layout(&c);
	c.st = backend_alloc_bytes(be, (size_t)c.total * sizeof(double),
				   MEM_SOLVER);
	void *a = backend_alloc(be, 4, MEM_WORKSPACE);
	be_anderson_weights(be, &c, a, a, 1, 1, 0.0); /* slot 1, nact 1 */
}

Test(backend, wrapper_rejects_unset_ctl, .signal = SIGABRT)
{
	struct backend *be = make("cpu64");
	struct dq_solve_ctl c = {.S = 1, .P = 1};
	be_solve_check(be, &c); /* st not set */
}
