/* backend.c — backend registry and the tracked allocator shared by every
 * backend: live and peak bytes per category, kept in an open-addressing table
 * from pointer to (bytes, category). O(1) per alloc/free. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"

struct backend_alloc_entry {
	void *p; /* NULL: empty; TOMBSTONE: deleted */
	size_t bytes;
	int cat;
};

static char tombstone_byte;
#define TOMBSTONE ((void *)&tombstone_byte)

static const char *const category_names[MEM_NCAT] = {
    "params", "grads", "optimizer", "head", "depth", "solver", "workspace",
};

const char *mem_category_name(enum mem_category c)
{
	return (c >= 0 && c < MEM_NCAT) ? category_names[c] : "?";
}

const char *const backend_names[] = {
    "cpu",
    "cpu64",
#ifdef DQ_HAVE_CUDA
    "cuda",
#endif
    NULL,
};

int backend_create(struct backend **out, const char *name, int threads,
		   char *err, size_t errlen)
{
	struct backend *be = calloc(1, sizeof(*be));
	int rc = -1;

	*out = NULL;
	if (!be) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	if (strcmp(name, "cpu") == 0)
		rc = backend_cpu_init(be, 0, threads, err, errlen);
	else if (strcmp(name, "cpu64") == 0)
		rc = backend_cpu_init(be, 1, threads, err, errlen);
	else if (strcmp(name, "cuda") == 0) {
#ifdef DQ_HAVE_CUDA
		rc = backend_cuda_init(be, err, errlen);
#else
		snprintf(err, errlen,
			 "device=cuda: this build has no CUDA backend; "
			 "reconfigure with -Dcuda=enabled on a machine with "
			 "the CUDA toolkit");
#endif
	} else {
		snprintf(err, errlen, "unknown device '%s'; use %s", name,
#ifdef DQ_HAVE_CUDA
			 "cpu, cpu64 or cuda"
#else
			 "cpu or cpu64"
#endif
		);
	}
	if (rc != 0) {
		free(be);
		return -1;
	}
	be->table_cap = 64;
	be->table = calloc(be->table_cap, sizeof(*be->table));
	if (!be->table) {
		be->ops->destroy(be->ctx);
		free(be);
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	*out = be;
	return 0;
}

void backend_destroy(struct backend *be)
{
	if (!be)
		return;
	for (size_t i = 0; i < be->table_cap; i++) {
		void *p = be->table[i].p;
		if (p && p != TOMBSTONE)
			be->ops->raw_free(be->ctx, p);
	}
	free(be->table);
	be->ops->destroy(be->ctx);
	free(be);
}

static size_t hash_ptr(const void *p, size_t cap)
{
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (size_t)x & (cap - 1);
}

/* Rehashes (dropping tombstones) into a table at least 4x the live count,
 * so the load factor of live + tombstones stays under 1/2. */
static int table_grow(struct backend *be)
{
	size_t cap = 64;
	while (cap < 4 * (be->mem.n_allocs + 1))
		cap *= 2;
	struct backend_alloc_entry *t = calloc(cap, sizeof(*t));
	if (!t)
		return -1;
	for (size_t i = 0; i < be->table_cap; i++) {
		struct backend_alloc_entry e = be->table[i];
		if (!e.p || e.p == TOMBSTONE)
			continue;
		size_t j = hash_ptr(e.p, cap);
		while (t[j].p)
			j = (j + 1) & (cap - 1);
		t[j] = e;
	}
	free(be->table);
	be->table = t;
	be->table_cap = cap;
	be->table_used = be->mem.n_allocs;
	return 0;
}

static void account(struct backend *be, int cat, size_t bytes, int sign)
{
	struct backend_mem_stats *m = &be->mem;
	if (sign > 0) {
		m->live[cat] += bytes;
		m->live_total += bytes;
		m->n_allocs++;
	} else {
		m->live[cat] -= bytes;
		m->live_total -= bytes;
		m->n_allocs--;
	}
	if (m->live[cat] > m->peak[cat])
		m->peak[cat] = m->live[cat];
	if (m->live_total > m->peak_total)
		m->peak_total = m->live_total;
	size_t ds = m->live[MEM_DEPTH] + m->live[MEM_SOLVER];
	if (ds > m->peak_depth_solver)
		m->peak_depth_solver = ds;
}

void *backend_alloc_bytes(struct backend *be, size_t bytes,
			  enum mem_category cat)
{
	if (cat < 0 || cat >= MEM_NCAT)
		return NULL;
	if (2 * (be->table_used + 1) > be->table_cap && table_grow(be) != 0)
		return NULL;
	/* Zero-sized requests still get a unique pointer so that free and the
	 * table work uniformly. */
	void *p = be->ops->raw_alloc(be->ctx, bytes ? bytes : 1);
	if (!p)
		return NULL;
	size_t j = hash_ptr(p, be->table_cap);
	while (be->table[j].p && be->table[j].p != TOMBSTONE)
		j = (j + 1) & (be->table_cap - 1);
	if (!be->table[j].p)
		be->table_used++;
	be->table[j] = (struct backend_alloc_entry){p, bytes, (int)cat};
	account(be, cat, bytes, +1);
	return p;
}

void *backend_alloc(struct backend *be, size_t n, enum mem_category cat)
{
	if (n > SIZE_MAX / be->elem)
		return NULL;
	return backend_alloc_bytes(be, n * be->elem, cat);
}

void backend_free(struct backend *be, void *p)
{
	if (!p)
		return;
	size_t j = hash_ptr(p, be->table_cap);
	for (size_t probes = 0; probes < be->table_cap; probes++) {
		if (!be->table[j].p)
			break;
		if (be->table[j].p == p) {
			account(be, be->table[j].cat, be->table[j].bytes, -1);
			be->table[j].p = TOMBSTONE;
			be->ops->raw_free(be->ctx, p);
			return;
		}
		j = (j + 1) & (be->table_cap - 1);
	}
	fprintf(stderr, "deqbench: backend_free of untracked pointer %p\n", p);
	abort();
}

void backend_mem_reset_peak(struct backend *be)
{
	struct backend_mem_stats *m = &be->mem;
	for (int c = 0; c < MEM_NCAT; c++)
		m->peak[c] = m->live[c];
	m->peak_total = m->live_total;
	m->peak_depth_solver = m->live[MEM_DEPTH] + m->live[MEM_SOLVER];
}
