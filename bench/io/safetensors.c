/*
 * safetensors.c — safetensors reader and atomic writer; see safetensors.h.
 */
#include "safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "fileio.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c copies little-endian data as is"
#endif

static const char *const dtype_names[] = {"F32", "F64", "I32"};
static const size_t dtype_sizes[] = {4, 8, 4};

const char *st_dtype_name(enum st_dtype dt)
{
	return (unsigned)dt < 3 ? dtype_names[dt] : "?";
}

size_t st_dtype_size(enum st_dtype dt)
{
	return (unsigned)dt < 3 ? dtype_sizes[dt] : 0;
}

/* "[4, 3]" into buf. */
static const char *shape_str(char *buf, size_t len, int ndim,
			     const int64_t *shape)
{
	size_t o = 0;
	o += (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < ndim && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "",
				      (long long)shape[i]);
	if (o < len)
		snprintf(buf + o, len - o, "]");
	return buf;
}

/* prod(shape) into *numel; -1 on a negative dim or size_t overflow. */
static int shape_numel(int ndim, const int64_t *shape, size_t esize,
		       size_t *numel)
{
	size_t n = 1;
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0)
			return -1;
		if (shape[i] && n > SIZE_MAX / esize / (uint64_t)shape[i])
			return -1;
		n *= (size_t)shape[i];
	}
	*numel = n;
	return 0;
}

/* ---- writer -------------------------------------------------------------- */

struct wtensor {
	char *name;
	enum st_dtype dtype;
	int ndim;
	int64_t shape[ST_MAX_DIMS];
	size_t nbytes;
	const void *data;
};

struct st_writer {
	struct wtensor *t;
	size_t n, cap;
	json_t *meta;
};

struct st_writer *st_writer_new(void)
{
	struct st_writer *w = calloc(1, sizeof(*w));
	if (w && !(w->meta = json_object())) {
		free(w);
		return NULL;
	}
	return w;
}

void st_writer_free(struct st_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		free(w->t[i].name);
	free(w->t);
	json_decref(w->meta);
	free(w);
}

int st_writer_add(struct st_writer *w, const char *name, enum st_dtype dtype,
		  int ndim, const int64_t *shape, const void *data, char *err,
		  size_t errlen)
{
	struct wtensor *t;
	size_t numel;
	if (!name || !*name || !strcmp(name, "__metadata__")) {
		errmsg_set(err, errlen,
			   "safetensors: tensor name '%s' not allowed",
			   name ? name : "(null)");
		return -1;
	}
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->t[i].name, name)) {
			errmsg_set(err, errlen,
				   "safetensors: tensor '%s' added twice",
				   name);
			return -1;
		}
	if ((unsigned)dtype >= 3 || ndim < 0 || ndim > ST_MAX_DIMS ||
	    (ndim && !shape) ||
	    shape_numel(ndim, shape, dtype_sizes[dtype & 3], &numel) != 0) {
		errmsg_set(
		    err, errlen,
		    "safetensors: tensor '%s': bad dtype, ndim (%d) or shape",
		    name, ndim);
		return -1;
	}
	if (numel && !data) {
		errmsg_set(err, errlen, "safetensors: tensor '%s': no data",
			   name);
		return -1;
	}
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		struct wtensor *nt = realloc(w->t, cap * sizeof(*nt));
		if (!nt)
			goto oom;
		w->t = nt;
		w->cap = cap;
	}
	t = &w->t[w->n];
	memset(t, 0, sizeof(*t));
	if (!(t->name = strdup(name)))
		goto oom;
	t->dtype = dtype;
	t->ndim = ndim;
	if (ndim)
		memcpy(t->shape, shape, (size_t)ndim * sizeof(*shape));
	t->nbytes = numel * dtype_sizes[dtype];
	t->data = data;
	w->n++;
	return 0;
oom:
	errmsg_set(err, errlen, "safetensors: out of memory adding '%s'", name);
	return -1;
}

int st_writer_set_metadata(struct st_writer *w, const char *key,
			   const char *value)
{
	json_t *v = json_string(value);
	return v && json_object_set_new(w->meta, key, v) == 0 ? 0 : -1;
}

/* F64 first (8-byte aligned after the padded header), then 4-byte dtypes:
 * every tensor lands aligned to its element size. */
static size_t *write_order(const struct st_writer *w)
{
	size_t *o = malloc((w->n ? w->n : 1) * sizeof(*o)), m = 0;
	if (!o)
		return NULL;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < w->n; i++)
			if ((w->t[i].dtype == ST_F64) == (pass == 0))
				o[m++] = i;
	return o;
}

int st_writer_write(struct st_writer *w, const char *path, char *err,
		    size_t errlen)
{
	static const char spaces[8] = "        ";
	json_t *h = json_object();
	char *js = NULL;
	size_t *order = write_order(w), off = 0, jl;
	struct iovec *iov = calloc(w->n + 3, sizeof(*iov));
	unsigned char len8[8];
	uint64_t hl64;
	int rc = -1;
	if (!h || !order || !iov)
		goto oom;
	if (json_object_size(w->meta) &&
	    json_object_set(h, "__metadata__", w->meta) != 0)
		goto oom;
	for (size_t k = 0; k < w->n; k++) {
		const struct wtensor *t = &w->t[order[k]];
		json_t *shape = json_array(), *o;
		for (int d = 0; d < t->ndim; d++)
			json_array_append_new(shape, json_integer(t->shape[d]));
		o = json_pack("{s:s, s:o, s:[I, I]}", "dtype",
			      dtype_names[t->dtype], "shape", shape,
			      "data_offsets", (json_int_t)off,
			      (json_int_t)(off + t->nbytes));
		if (!o || json_object_set_new(h, t->name, o) != 0) {
			errmsg_set(err, errlen,
				   "%s: tensor '%s': cannot encode the header "
				   "entry (name not UTF-8?)",
				   path, t->name);
			goto out;
		}
		off += t->nbytes;
		iov[3 + k] = (struct iovec){(void *)t->data, t->nbytes};
	}
	if (!(js = json_dumps(h, JSON_COMPACT)))
		goto oom;
	jl = strlen(js);
	hl64 = (jl + 7) / 8 * 8; /* pad with spaces: data starts 8-aligned */
	memcpy(len8, &hl64, 8);
	iov[0] = (struct iovec){len8, 8};
	iov[1] = (struct iovec){js, jl};
	iov[2] = (struct iovec){(void *)spaces, (size_t)hl64 - jl};
	rc = fileio_replace(path, iov, (int)w->n + 3, err, errlen);
	goto out;
oom:
	errmsg_set(err, errlen, "%s: out of memory writing the header", path);
out:
	free(iov);
	free(js);
	free(order);
	json_decref(h);
	return rc;
}

/* ---- reader -------------------------------------------------------------- */

struct rt {
	struct st_tensor t;
	uint64_t begin, end;
};

static int cmp_rt(const void *a, const void *b)
{
	const struct rt *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static int parse_dtype(const char *s, enum st_dtype *dt)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, dtype_names[i])) {
			*dt = (enum st_dtype)i;
			return 0;
		}
	return -1;
}

/* An entry's "shape" (an array) into r->t.ndim, shape, numel and nbytes
 * (r->t.dtype set). 0, or -1 with a message. */
static int parse_shape(const char *path, const char *name, json_t *shape,
		       struct rt *r, char *err, size_t errlen)
{
	char sb[160];
	size_t numel;
	if (json_array_size(shape) > ST_MAX_DIMS) {
		errmsg_set(err, errlen, "%s: tensor '%s': %zu dims, at most %d",
			   path, name, json_array_size(shape), ST_MAX_DIMS);
		return -1;
	}
	r->t.ndim = (int)json_array_size(shape);
	for (int d = 0; d < r->t.ndim; d++) {
		json_t *x = json_array_get(shape, (size_t)d);
		if (!json_is_integer(x) || json_integer_value(x) < 0) {
			errmsg_set(err, errlen,
				   "%s: tensor '%s': shape entries must be "
				   "non-negative integers",
				   path, name);
			return -1;
		}
		r->t.shape[d] = json_integer_value(x);
	}
	if (shape_numel(r->t.ndim, r->t.shape, dtype_sizes[r->t.dtype],
			&numel) != 0) {
		errmsg_set(err, errlen, "%s: tensor '%s': shape %s overflows",
			   path, name,
			   shape_str(sb, sizeof(sb), r->t.ndim, r->t.shape));
		return -1;
	}
	r->t.numel = numel;
	r->t.nbytes = numel * dtype_sizes[r->t.dtype];
	return 0;
}

/* An entry's "data_offsets" (an array) into r->begin, r->end: [BEGIN, END]
 * spanning exactly r->t.nbytes. 0, or -1 with a message. */
static int parse_offsets(const char *path, const char *name, json_t *offs,
			 struct rt *r, char *err, size_t errlen)
{
	json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
	char sb[160];
	if (json_array_size(offs) != 2 || !json_is_integer(b) ||
	    !json_is_integer(e) || json_integer_value(b) < 0 ||
	    json_integer_value(e) < json_integer_value(b)) {
		errmsg_set(err, errlen,
			   "%s: tensor '%s': data_offsets must be [BEGIN, END] "
			   "with 0 <= BEGIN <= END",
			   path, name);
		return -1;
	}
	r->begin = (uint64_t)json_integer_value(b);
	r->end = (uint64_t)json_integer_value(e);
	if (r->end - r->begin != r->t.nbytes) {
		errmsg_set(
		    err, errlen,
		    "%s: tensor '%s': %s %s needs %zu bytes, data_offsets "
		    "give %llu",
		    path, name, dtype_names[r->t.dtype],
		    shape_str(sb, sizeof(sb), r->t.ndim, r->t.shape),
		    r->t.nbytes, (unsigned long long)(r->end - r->begin));
		return -1;
	}
	return 0;
}

/* Parses one header entry into *r; -1 with a message. */
static int parse_entry(const char *path, const char *name, json_t *v,
		       struct rt *r, char *err, size_t errlen)
{
	json_t *dt = json_object_get(v, "dtype"),
	       *shape = json_object_get(v, "shape"),
	       *offs = json_object_get(v, "data_offsets");
	r->t.name = name;
	if (!json_is_object(v) || !json_is_string(dt) ||
	    !json_is_array(shape) || !json_is_array(offs)) {
		errmsg_set(err, errlen,
			   "%s: tensor '%s': entry needs dtype, shape and "
			   "data_offsets",
			   path, name);
		return -1;
	}
	if (parse_dtype(json_string_value(dt), &r->t.dtype) != 0) {
		errmsg_set(err, errlen,
			   "%s: tensor '%s': dtype %s not supported (F32, F64, "
			   "I32)",
			   path, name, json_string_value(dt));
		return -1;
	}
	if (parse_shape(path, name, shape, r, err, errlen) != 0 ||
	    parse_offsets(path, name, offs, r, err, errlen) != 0)
		return -1;
	return 0;
}

/* Reads the 8-byte header length, the header (*hdr, *hl bytes) and the data
 * section (f->data_, *dlen bytes) of the open file FP. 0, or -1 with a
 * message (*hdr may be allocated). */
static int read_sections(FILE *fp, const char *path, struct st_file *f,
			 char **hdr, uint64_t *hl, uint64_t *dlen, char *err,
			 size_t errlen)
{
	struct stat st;
	unsigned char len8[8];
	if (fstat(fileno(fp), &st) != 0 || st.st_size < 8 ||
	    fread(len8, 1, 8, fp) != 8) {
		errmsg_set(err, errlen,
			   "%s: too short for a safetensors file (%lld bytes)",
			   path, (long long)st.st_size);
		return -1;
	}
	memcpy(hl, len8, 8);
	if (*hl > ST_MAX_HEADER || *hl > (uint64_t)st.st_size - 8 || *hl < 2) {
		errmsg_set(
		    err, errlen,
		    "%s: header length %llu is not sane (file %lld bytes, "
		    "limit %u); truncated or not safetensors",
		    path, (unsigned long long)*hl, (long long)st.st_size,
		    ST_MAX_HEADER);
		return -1;
	}
	*dlen = (uint64_t)st.st_size - 8 - *hl;
	if (!(*hdr = malloc(*hl)) || fread(*hdr, 1, *hl, fp) != *hl ||
	    !(f->data_ = malloc(*dlen ? *dlen : 1)) ||
	    fread(f->data_, 1, *dlen, fp) != *dlen) {
		errmsg_set(err, errlen, "%s: read failed: %s", path,
			   strerror(errno));
		return -1;
	}
	return 0;
}

/* The header HDR[0..hl) as a JSON object whose __metadata__, if present,
 * maps strings to strings; NULL with a message. */
static json_t *parse_header(const char *path, const char *hdr, uint64_t hl,
			    char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_loadb(hdr, hl, JSON_REJECT_DUPLICATES, &je), *meta;
	const char *k;
	json_t *mv;
	int okm;
	if (!root || !json_is_object(root)) {
		errmsg_set(err, errlen,
			   "%s: header is not a JSON object: %s (column %d)",
			   path, root ? "not an object" : je.text,
			   root ? 0 : je.column);
		json_decref(root);
		return NULL;
	}
	meta = json_object_get(root, "__metadata__");
	if (!meta)
		return root;
	okm = json_is_object(meta);
	json_object_foreach(meta, k, mv) okm = okm && json_is_string(mv);
	if (!okm) {
		errmsg_set(err, errlen,
			   "%s: __metadata__ must map strings to strings",
			   path);
		json_decref(root);
		return NULL;
	}
	return root;
}

/* The tensor entries of ROOT (every member but __metadata__) into a new
 * array *r of *nr, sorted by data offsets. 0, or -1 with a message (*r may
 * be allocated). */
static int parse_entries(const char *path, json_t *root, struct rt **r,
			 size_t *nr, char *err, size_t errlen)
{
	size_t cap = json_object_size(root);
	const char *key;
	json_t *v;
	*nr = 0;
	if (!(*r = calloc(cap ? cap : 1, sizeof(**r)))) {
		errmsg_set(err, errlen, "%s: out of memory", path);
		return -1;
	}
	json_object_foreach(root, key, v)
	{
		if (!strcmp(key, "__metadata__"))
			continue;
		if (parse_entry(path, key, v, &(*r)[*nr], err, errlen) != 0)
			return -1;
		(*nr)++;
	}
	qsort(*r, *nr, sizeof(**r), cmp_rt);
	return 0;
}

/* The sorted entries R[0..nr) must tile the data section [0, dlen)
 * exactly: nothing past its end, no overlap, no gap, nothing after the
 * last. 0, or -1 with a message. */
static int check_layout(const char *path, const struct rt *r, size_t nr,
			uint64_t dlen, char *err, size_t errlen)
{
	uint64_t expect = 0;
	for (size_t i = 0; i < nr; i++) {
		char why[128];
		if (r[i].end > dlen)
			snprintf(why, sizeof(why),
				 "run past the data (%llu bytes); file "
				 "truncated?",
				 (unsigned long long)dlen);
		else if (r[i].begin != expect)
			snprintf(why, sizeof(why),
				 "%s the previous tensor, which ends at %llu",
				 r[i].begin < expect ? "overlap"
						     : "leave a gap after",
				 (unsigned long long)expect);
		else {
			expect = r[i].end;
			continue;
		}
		errmsg_set(err, errlen,
			   "%s: tensor '%s': data_offsets [%llu, %llu] %s",
			   path, r[i].t.name, (unsigned long long)r[i].begin,
			   (unsigned long long)r[i].end, why);
		return -1;
	}
	if (expect != dlen) {
		errmsg_set(err, errlen,
			   "%s: %llu bytes after the last tensor's data; "
			   "header and file size disagree",
			   path, (unsigned long long)(dlen - expect));
		return -1;
	}
	return 0;
}

/* f->tensors from the entries R[0..nr): each points into f->data_ or, where
 * a foreign writer misaligned it, at an aligned copy (callers cast to
 * float *). -1 when out of memory (st_close frees what was allocated). */
static int place_tensors(struct st_file *f, const char *path,
			 const struct rt *r, size_t nr)
{
	if (!(f->tensors = calloc(nr ? nr : 1, sizeof(*f->tensors))) ||
	    !(f->copies_ = calloc(nr ? nr : 1, sizeof(*f->copies_))) ||
	    !(f->path = strdup(path)))
		return -1;
	for (size_t i = 0; i < nr; i++) {
		struct st_tensor *t = &f->tensors[i];
		unsigned char *p = f->data_ + r[i].begin;
		*t = r[i].t;
		if ((uintptr_t)p % dtype_sizes[t->dtype]) {
			void *c = malloc(t->nbytes);
			if (!c)
				return -1;
			memcpy(c, p, t->nbytes);
			f->copies_[f->n_copies_++] = c;
			p = c;
		}
		t->data = p;
	}
	f->n_tensors = nr;
	return 0;
}

int st_read(struct st_file *f, const char *path, char *err, size_t errlen)
{
	char e[1024];
	FILE *fp;
	int fd;
	char *hdr = NULL;
	uint64_t hl, dlen;
	json_t *root = NULL;
	struct rt *r = NULL;
	size_t nr = 0;
	int rc = -1;
	memset(f, 0, sizeof(*f));
	/* a FIFO, directory or device is refused, never waited on */
	if ((fd = fileio_open_read(path, e, sizeof(e))) < 0 ||
	    !(fp = fdopen(fd, "rb"))) {
		errmsg_set(err, errlen, "%s", fd < 0 ? e : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (read_sections(fp, path, f, &hdr, &hl, &dlen, err, errlen) == 0 &&
	    (root = parse_header(path, hdr, hl, err, errlen)) &&
	    parse_entries(path, root, &r, &nr, err, errlen) == 0 &&
	    check_layout(path, r, nr, dlen, err, errlen) == 0) {
		if (place_tensors(f, path, r, nr) == 0) {
			f->json_ = root;
			root = NULL;
			rc = 0;
		} else {
			errmsg_set(err, errlen, "%s: out of memory", path);
		}
	}
	fclose(fp);
	free(hdr);
	free(r);
	json_decref(root);
	if (rc != 0)
		st_close(f);
	return rc;
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
	for (size_t i = 0; i < f->n_tensors; i++)
		if (!strcmp(f->tensors[i].name, name))
			return &f->tensors[i];
	return NULL;
}

const struct st_tensor *st_get(const struct st_file *f, const char *name,
			       enum st_dtype dtype, int ndim,
			       const int64_t *shape, char *err, size_t errlen)
{
	const struct st_tensor *t = st_find(f, name);
	char a[160], b[160];
	int ok;
	if (!t) {
		errmsg_set(err, errlen, "%s: tensor '%s': missing", f->path,
			   name);
		return NULL;
	}
	ok = t->dtype == dtype;
	if (ndim >= 0)
		ok = ok && t->ndim == ndim &&
		     (!ndim ||
		      !memcmp(t->shape, shape, (size_t)ndim * sizeof(*shape)));
	if (!ok) {
		errmsg_set(
		    err, errlen, "%s: tensor '%s': expected %s %s, found %s %s",
		    f->path, name, dtype_names[dtype],
		    ndim >= 0 ? shape_str(a, sizeof(a), ndim, shape) : "[*]",
		    dtype_names[t->dtype],
		    shape_str(b, sizeof(b), t->ndim, t->shape));
		return NULL;
	}
	return t;
}

const char *st_metadata(const struct st_file *f, const char *key)
{
	json_t *m = f->json_ ? json_object_get(f->json_, "__metadata__") : NULL;
	return m ? json_string_value(json_object_get(m, key)) : NULL;
}

void st_close(struct st_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_copies_; i++)
		free(f->copies_[i]);
	free(f->copies_);
	free(f->tensors);
	free(f->data_);
	free(f->path);
	json_decref(f->json_);
	memset(f, 0, sizeof(*f));
}
