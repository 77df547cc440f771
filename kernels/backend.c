/* backend.c — backend registry and the tracked allocator shared by every
 * backend: live and peak bytes per category, kept in an open-addressing table
 * from pointer to (bytes, category). O(1) per alloc/free. */
#include "backend.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"

struct alloc_entry {
	void *p; /* NULL: empty; TOMBSTONE: deleted */
	size_t bytes;
	int cat;
};

/* What backend_create allocates: the public struct and, behind it, the
 * allocator's table (open addressing, a power-of-2 capacity). */
struct backend_owned {
	struct backend be;
	struct alloc_entry *table;
	size_t cap;
	size_t used; /* live entries + tombstones */
};

static struct backend_owned *owned(const struct backend *be)
{
	return (struct backend_owned *)((char *)be -
					offsetof(struct backend_owned, be));
}

static char tombstone_byte;
#define TOMBSTONE ((void *)&tombstone_byte)

static const char *const category_names[MEM_NCAT] = {
    "params", "grads",	   "optimizer", "head",	   "depth",
    "solver", "workspace", "host",	"managed",
};

const char *mem_category_name(enum mem_category c)
{
	return (c >= 0 && c < MEM_NCAT) ? category_names[c] : "?";
}

static const char *const precision_names[] = {"fp32", "tf32", "bf16"};

const char *dq_precision_name(enum dq_precision p)
{
	return (p >= DQ_PREC_FP32 && p <= DQ_PREC_BF16) ? precision_names[p]
							: "?";
}

double dq_precision_eps(enum dq_precision p, size_t elem)
{
	if (p == DQ_PREC_BF16)
		return 0x1p-7;
	return elem == sizeof(double) ? 0x1p-52 : 0x1p-23;
}

int dq_precision_parse(const char *s)
{
	for (int i = 0; i <= DQ_PREC_BF16; i++)
		if (s && strcmp(s, precision_names[i]) == 0)
			return i;
	return -1;
}

const char *const backend_names[] = {
    "cpu",
    "cpu64",
#ifdef DQ_HAVE_CUDA
    "cuda",
#endif
    NULL,
};

#ifdef DQ_HAVE_CUDA
#define CUDA_COMPILED 1
#else
#define CUDA_COMPILED 0
#endif

static const struct backend_caps caps[] = {
    {"cpu", 1, 0, 0, 0, 0, 0, 0},
    {"cpu64", 1, 0, 0, 0, 0, 0, 0},
    /* bf16 tensor cores from Ampere (8.0) on; bf16 operand copies */
    {"cuda", CUDA_COMPILED, 1, 1, 8, 1, 1, 2},
};

const struct backend_caps *backend_caps_known(const char *name)
{
	for (size_t i = 0; name && i < sizeof(caps) / sizeof(caps[0]); i++)
		if (!strcmp(caps[i].name, name))
			return &caps[i];
	return NULL;
}

const struct backend_caps *backend_caps(const char *name)
{
	const struct backend_caps *k = backend_caps_known(name);
	return k && k->compiled ? k : NULL;
}

int backend_create(struct backend **out, const char *name, int threads,
		   char *err, size_t errlen)
{
	struct backend_owned *o = calloc(1, sizeof(*o));
	struct backend *be = o ? &o->be : NULL;
	int rc = -1;

	*out = NULL;
	if (!o) {
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
		free(o);
		return -1;
	}
	o->cap = 64;
	o->table = calloc(o->cap, sizeof(*o->table));
	be->scal = be_raw_alloc(be, BACKEND_SCALARS * sizeof(double));
	if (!o->table || !be->scal) {
		snprintf(err, errlen, "out of %s memory",
			 o->table ? "device" : "host");
		if (be->scal)
			be_raw_free(be, be->scal);
		free(o->table);
		be_destroy(be);
		free(o);
		return -1;
	}
	*out = be;
	return 0;
}

/* Memory of category cat from where that category lives. */
static void *cat_alloc(const struct backend *be, int cat, size_t bytes)
{
	if (cat == MEM_HOST)
		return be_host_alloc(be, bytes);
	if (cat == MEM_MANAGED)
		return be_managed_alloc(be, bytes);
	return be_raw_alloc(be, bytes);
}

static void cat_free(const struct backend *be, int cat, void *p)
{
	if (cat == MEM_HOST)
		be_host_free(be, p);
	else if (cat == MEM_MANAGED)
		be_managed_free(be, p);
	else
		be_raw_free(be, p);
}

void backend_destroy(struct backend *be)
{
	if (!be)
		return;
	struct backend_owned *o = owned(be);
	for (size_t i = 0; i < o->cap; i++) {
		void *p = o->table[i].p;
		if (!p || p == TOMBSTONE)
			continue;
		cat_free(be, o->table[i].cat, p);
	}
	free(o->table);
	be_raw_free(be, be->scal);
	be_destroy(be);
	free(o);
}

size_t backend_alloc_table_cap(const struct backend *be)
{
	return owned(be)->cap;
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
static int table_grow(struct backend_owned *o)
{
	size_t cap = 64;
	while (cap < 4 * (o->be.mem.n_allocs + 1))
		cap *= 2;
	struct alloc_entry *t = calloc(cap, sizeof(*t));
	if (!t)
		return -1;
	for (size_t i = 0; i < o->cap; i++) {
		struct alloc_entry e = o->table[i];
		if (!e.p || e.p == TOMBSTONE)
			continue;
		size_t j = hash_ptr(e.p, cap);
		while (t[j].p)
			j = (j + 1) & (cap - 1);
		t[j] = e;
	}
	free(o->table);
	o->table = t;
	o->cap = cap;
	o->used = o->be.mem.n_allocs;
	return 0;
}

static void account(struct backend *be, int cat, size_t bytes, int sign)
{
	struct backend_mem_stats *m = &be->mem;
	/* totals: device memory only (MEM_HOST and MEM_MANAGED are not) */
	size_t dev = cat == MEM_HOST || cat == MEM_MANAGED ? 0 : bytes;
	if (sign > 0) {
		m->live[cat] += bytes;
		m->live_total += dev;
		m->n_allocs++;
	} else {
		m->live[cat] -= bytes;
		m->live_total -= dev;
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
	struct backend_owned *o = owned(be);
	if (cat < 0 || cat >= MEM_NCAT)
		return NULL;
	if (2 * (o->used + 1) > o->cap && table_grow(o) != 0)
		return NULL;
	/* Zero-sized requests still get a unique pointer so that free and the
	 * table work uniformly. */
	void *p = cat_alloc(be, cat, bytes ? bytes : 1);
	if (!p)
		return NULL;
	size_t j = hash_ptr(p, o->cap);
	while (o->table[j].p && o->table[j].p != TOMBSTONE)
		j = (j + 1) & (o->cap - 1);
	if (!o->table[j].p)
		o->used++;
	o->table[j] = (struct alloc_entry){p, bytes, (int)cat};
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
	struct backend_owned *o = owned(be);
	size_t j = hash_ptr(p, o->cap);
	for (size_t probes = 0; probes < o->cap; probes++) {
		struct alloc_entry *e = &o->table[j];
		if (!e->p)
			break;
		if (e->p == p) {
			int cat = e->cat;
			account(be, cat, e->bytes, -1);
			e->p = TOMBSTONE;
			cat_free(be, cat, p);
			return;
		}
		j = (j + 1) & (o->cap - 1);
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
