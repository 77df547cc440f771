/*
 * data.c — corpora (Brown, WikiText, PTB, plain text, synthetic) as token-id
 * streams, their on-disk cache, and the batcher. See data.h for the layouts.
 *
 * Cache file <dir>/cache/<split>.ids (all little-endian; 56-byte header):
 *    0  char[8] magic DATA_CACHE_MAGIC       8  u32 version
 *   12  u32 vocab size V                     16  u64 token count n
 *   24  u64 FNV-1a 64 of the n*4 id bytes    32  u64 source fingerprint
 *   40  u64 FNV-1a 64 of vocab.txt           48  u32 split, u32 documents
 *   56  int32 ids[n]
 * <dir>/cache/vocab.txt holds one word per line, line i = id i. The
 * fingerprint hashes the kind, the normalisation version and every source
 * file's name, size and mtime, so edited or re-fetched text invalidates the
 * cache. Files are written to a temporary file and renamed, vocab first
 * (fileio_replace): a crash leaves either the old cache or one whose vocab
 * checksum no longer matches, and its temporary files, which the next load
 * removes once their process is gone. A vocab.txt that does not parse (a
 * NUL byte, no final newline) or whose checksum differs is rebuilt like a
 * bad .ids file. Processes racing to rebuild write the same bytes; the last
 * rename wins.
 */
#include "data.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "data.c reads and writes little-endian caches with memcpy"
#endif

#define CACHE_HDR 56
#define NORM_VER  1 /* bump when tokenisation changes: invalidates caches */
#define MAX_FILES 100000

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

const char *corpus_split_name(int split)
{
	static const char *const names[] = {"train", "valid", "test"};
	return split >= 0 && split < 3 ? names[split] : "?";
}

/* FNV-1a 64: one multiply per byte, ~1 GB/s; enough for corruption checks. */
#define FNV_INIT 1469598103934665603ull
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Reads PATH whole into a NUL-terminated malloc'd buffer. */
static int read_whole(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	char *b;
	*buf = NULL;
	*len = 0;
	if (!f)
		return -1;
	if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
		fclose(f);
		return -1;
	}
	b = malloc((size_t)st.st_size + 1);
	if (!b || fread(b, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		free(b);
		fclose(f);
		return -1;
	}
	fclose(f);
	b[st.st_size] = 0;
	*buf = b;
	*len = (size_t)st.st_size;
	return 0;
}

static int is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Why path is not a readable file, for messages: "missing", or what is
 * there instead ("a directory at"). */
static const char *not_file_word(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return "missing";
	return S_ISDIR(st.st_mode) ? "a directory, not a file, at"
				   : "not a regular file at";
}

/* ---- numbers ----------------------------------------------------------- */

int data_is_number(const char *w)
{
	static const char *const suffix[] = {"'s", "st", "nd", "rd",
					     "th", "d",	 "s"};
	size_t n = strlen(w), i = 0;
	int digits = 0;
	for (size_t k = 0; k < sizeof(suffix) / sizeof(suffix[0]); k++) {
		size_t m = strlen(suffix[k]);
		if (n > m && !strcmp(w + n - m, suffix[k]) &&
		    isdigit((unsigned char)w[n - m - 1])) {
			n -= m;
			break;
		}
	}
	if (n == 0)
		return 0;
	if (strchr(".+-$", w[0]) && n > 1 && isdigit((unsigned char)w[1]))
		i = 1;
	else if (!isdigit((unsigned char)w[0]))
		return 0;
	for (; i < n; i++) {
		if (isdigit((unsigned char)w[i]))
			digits++;
		else if (!strchr(",.:/-%", w[i]))
			return 0;
	}
	return digits > 0;
}

/* ---- word table: open addressing over an arena of strings -------------- */

struct word {
	size_t off; /* into arena */
	uint32_t len;
	uint64_t count; /* occurrences in the training split */
	int32_t id;	/* final vocabulary id */
};

struct wtab {
	char *arena;
	size_t arena_n, arena_cap;
	struct word *w;
	size_t n, cap;
	int32_t *slot; /* -1 empty, else index into w; size mask+1 */
	size_t mask;
};

static int wtab_init(struct wtab *t)
{
	memset(t, 0, sizeof(*t));
	t->mask = 1023;
	t->slot = malloc((t->mask + 1) * sizeof(*t->slot));
	if (!t->slot)
		return -1;
	memset(t->slot, 0xff, (t->mask + 1) * sizeof(*t->slot));
	return 0;
}

static void wtab_free(struct wtab *t)
{
	free(t->arena);
	free(t->w);
	free(t->slot);
	memset(t, 0, sizeof(*t));
}

static int wtab_grow(struct wtab *t)
{
	size_t cap = (t->mask + 1) * 2;
	int32_t *s = malloc(cap * sizeof(*s));
	if (!s)
		return -1;
	memset(s, 0xff, cap * sizeof(*s));
	for (size_t i = 0; i < t->n; i++) {
		const char *p = t->arena + t->w[i].off;
		size_t j = fnv1a(FNV_INIT, p, t->w[i].len) & (cap - 1);
		while (s[j] >= 0)
			j = (j + 1) & (cap - 1);
		s[j] = (int32_t)i;
	}
	free(t->slot);
	t->slot = s;
	t->mask = cap - 1;
	return 0;
}

/* Index of word P[0..len), inserted if new; -1 when out of memory. */
static int32_t wtab_get(struct wtab *t, const char *p, size_t len)
{
	size_t j = fnv1a(FNV_INIT, p, len) & t->mask;
	struct word *w;
	for (; t->slot[j] >= 0; j = (j + 1) & t->mask) {
		w = &t->w[t->slot[j]];
		if (w->len == len && !memcmp(t->arena + w->off, p, len))
			return t->slot[j];
	}
	if (t->n >= INT32_MAX - 1)
		return -1;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct word *nw = realloc(t->w, cap * sizeof(*nw));
		if (!nw)
			return -1;
		t->w = nw;
		t->cap = cap;
	}
	if (t->arena_n + len + 1 > t->arena_cap) {
		size_t cap = t->arena_cap ? t->arena_cap * 2 : 1 << 16;
		char *na;
		while (cap < t->arena_n + len + 1)
			cap *= 2;
		na = realloc(t->arena, cap);
		if (!na)
			return -1;
		t->arena = na;
		t->arena_cap = cap;
	}
	memcpy(t->arena + t->arena_n, p, len);
	t->arena[t->arena_n + len] = 0;
	t->w[t->n] = (struct word){t->arena_n, (uint32_t)len, 0, -1};
	t->arena_n += len + 1;
	t->slot[j] = (int32_t)t->n;
	t->n++;
	if (t->n * 2 > t->mask + 1 && wtab_grow(t) != 0)
		return -1;
	return (int32_t)(t->n - 1);
}

/* ---- growable int32 stream ---------------------------------------------- */

struct ivec {
	int32_t *v;
	size_t n, cap;
};

static int ivec_push(struct ivec *a, int32_t x)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 1 << 16;
		int32_t *nv = realloc(a->v, cap * sizeof(*nv));
		if (!nv)
			return -1;
		a->v = nv;
		a->cap = cap;
	}
	a->v[a->n++] = x;
	return 0;
}

/* ---- tokenisers ---------------------------------------------------------- */

enum { W_EOS = 0, W_UNK = 1 }; /* table indices = ids of the specials */

static int is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' ||
	       ch == '\f';
}

/*
 * Appends the word indices of text BUF[0..len) to OUT. brown: tags stripped,
 * lowercased, numbers -> N, <eos> after each non-empty line. Otherwise words
 * are taken as they are and every line (blank ones too, as the DEQ code
 * does) ends with <eos>. COUNT adds occurrences to the words' counts.
 */
static int tokenise(struct wtab *t, const char *buf, size_t len, int brown,
		    int count, struct ivec *out)
{
	char scratch[256];
	size_t i = 0;
	while (i < len) {
		int words = 0;
		while (i < len && buf[i] != '\n') {
			size_t s, e, wl;
			const char *w;
			int32_t x;
			while (i < len && is_blank(buf[i]))
				i++;
			if (i >= len || buf[i] == '\n')
				break;
			s = i;
			while (i < len && buf[i] != '\n' && !is_blank(buf[i]))
				i++;
			e = i;
			w = buf + s;
			wl = e - s;
			if (brown) {
				const char *slash = NULL;
				for (size_t k = s; k < e; k++)
					if (buf[k] == '/')
						slash = buf + k;
				if (slash && slash > w)
					wl = (size_t)(slash - w);
				if (wl >= sizeof(scratch))
					wl = sizeof(scratch) - 1;
				for (size_t k = 0; k < wl; k++)
					scratch[k] =
					    (char)tolower((unsigned char)w[k]);
				scratch[wl] = 0;
				w = scratch;
				if (data_is_number(scratch)) {
					w = "N";
					wl = 1;
				}
			}
			x = wtab_get(t, w, wl);
			if (x < 0 || ivec_push(out, x) != 0)
				return -1;
			if (count)
				t->w[x].count++;
			words++;
		}
		/* at '\n' or end of text; a last line without '\n' counts
		 * only when it has words */
		if (words > 0 || (!brown && i < len)) {
			if (ivec_push(out, W_EOS) != 0)
				return -1;
			if (count)
				t->w[W_EOS].count++;
		}
		i++;
	}
	return 0;
}

/* ---- sources ------------------------------------------------------------- */

struct source {
	char dir[512];	 /* where the text is; cache goes to dir/../cache or
			    dir/cache */
	char cache[600]; /* cache directory */
	char **files[3]; /* per split */
	int nfiles[3];
	int brown;
	uint64_t fingerprint;
};

static void source_free(struct source *s)
{
	for (int k = 0; k < 3; k++) {
		for (int i = 0; i < s->nfiles[k]; i++)
			free(s->files[k][i]);
		free(s->files[k]);
	}
	memset(s, 0, sizeof(*s));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_file(struct source *s, int split, const char *path)
{
	char **nf = realloc(s->files[split],
			    (size_t)(s->nfiles[split] + 1) * sizeof(*nf));
	if (!nf)
		return -1;
	s->files[split] = nf;
	if (!(nf[s->nfiles[split]] = strdup(path)))
		return -1;
	s->nfiles[split]++;
	return 0;
}

static int brown_source(struct source *s, const char *root, char *err,
			size_t errlen)
{
	char raw[560], **names = NULL;
	int n = 0, cap = 0, rc = -1;
	DIR *d;
	struct dirent *de;
	snprintf(s->dir, sizeof(s->dir), "%s/brown", root);
	snprintf(raw, sizeof(raw), "%s/raw", s->dir);
	snprintf(s->cache, sizeof(s->cache), "%s/cache", s->dir);
	s->brown = 1;
	d = opendir(raw);
	while (d && (de = readdir(d))) {
		char path[1024];
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", raw, de->d_name);
		if (!is_file(path))
			continue;
		if (n == cap) {
			char **nn;
			cap = cap ? cap * 2 : 512;
			if (cap > MAX_FILES ||
			    !(nn = realloc(names, (size_t)cap * sizeof(*nn))))
				goto out;
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name)))
			goto out;
		n++;
	}
	if (n == 0) {
		if (strcmp(root, "data") == 0)
			seterr(err, errlen,
			       "corpus=brown: no data under %s; run "
			       "scripts/fetch-brown.sh (or the README's run "
			       "command) to fetch it",
			       s->dir);
		else
			seterr(err, errlen,
			       "corpus=brown: no data under %s; run "
			       "scripts/fetch-brown.sh %s (or the README's run "
			       "command) to fetch it",
			       s->dir, root);
		goto out;
	}
	/* sorted filename order decides the split: deterministic everywhere */
	qsort(names, (size_t)n, sizeof(*names), cmp_str);
	for (int i = 0; i < n; i++) {
		char path[1024];
		int split = i % 10 == 8	  ? CORPUS_VALID
			    : i % 10 == 9 ? CORPUS_TEST
					  : CORPUS_TRAIN;
		snprintf(path, sizeof(path), "%s/%s", raw, names[i]);
		if (add_file(s, split, path) != 0)
			goto out;
	}
	rc = 0;
out:
	if (rc != 0 && n > 0 && err && !err[0])
		seterr(err, errlen, "corpus=brown: out of memory listing %s",
		       raw);
	if (d)
		closedir(d);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* wikitext103 / wikitext2 / ptb / text: three files in DATA_DIR, or in
 * DATA_DIR/SUB when they are not all in DATA_DIR itself. */
static int text_source(struct source *s, const char *kind, const char *root,
		       char *err, size_t errlen)
{
	const char *sub, *pre, *suf;
	char dir[2][512], path[3][1100];
	int ndir = 1, have[2] = {0, 0}, di, k;
	if (!strcmp(kind, "wikitext103"))
		sub = "wikitext-103", pre = "wiki.", suf = ".tokens";
	else if (!strcmp(kind, "wikitext2"))
		sub = "wikitext-2", pre = "wiki.", suf = ".tokens";
	else if (!strcmp(kind, "ptb"))
		sub = "ptb", pre = "ptb.", suf = ".txt";
	else
		sub = NULL, pre = "", suf = ".txt";
	snprintf(dir[0], sizeof(dir[0]), "%s", root);
	if (sub) {
		snprintf(dir[1], sizeof(dir[1]), "%s/%s", root, sub);
		ndir = 2;
	}
	for (di = 0; di < ndir; di++) {
		for (k = 0; k < 3; k++) {
			snprintf(path[k], sizeof(path[k]), "%s/%s%s%s", dir[di],
				 pre, corpus_split_name(k), suf);
			have[di] += is_file(path[k]);
		}
		if (have[di] == 3)
			break;
	}
	if (di == ndir) {
		/* name the first missing file where the corpus seems to be:
		 * DATA_DIR when it holds some of the files, else DATA_DIR/SUB
		 */
		di = ndir == 2 && !have[0] ? 1 : 0;
		for (k = 0; k < 3; k++) {
			snprintf(path[k], sizeof(path[k]), "%s/%s%s%s", dir[di],
				 pre, corpus_split_name(k), suf);
			if (!is_file(path[k]))
				break;
		}
		k = k < 3 ? k : 0;
		seterr(err, errlen,
		       "corpus=%s: %s %s; put the %s%s%s, %s%s%s and "
		       "%s%s%s files there or point data_dir= at them",
		       kind, not_file_word(path[k]), path[k], pre, "train", suf,
		       pre, "valid", suf, pre, "test", suf);
		return -1;
	}
	snprintf(s->dir, sizeof(s->dir), "%s", dir[di]);
	snprintf(s->cache, sizeof(s->cache), "%s/cache", dir[di]);
	for (k = 0; k < 3; k++)
		if (add_file(s, k, path[k]) != 0) {
			seterr(err, errlen, "corpus=%s: out of memory", kind);
			return -1;
		}
	return 0;
}

static int source_find(struct source *s, const char *kind, const char *root,
		       char *err, size_t errlen)
{
	int rc;
	memset(s, 0, sizeof(*s));
	if (err && errlen)
		err[0] = 0;
	if (strlen(root) > 400) { /* keeps every path below inside its buffer */
		seterr(err, errlen, "corpus=%s: data_dir longer than 400 bytes",
		       kind);
		return -1;
	}
	if (!strcmp(kind, "brown"))
		rc = brown_source(s, root, err, errlen);
	else if (!strcmp(kind, "wikitext103") || !strcmp(kind, "wikitext2") ||
		 !strcmp(kind, "ptb") || !strcmp(kind, "text"))
		rc = text_source(s, kind, root, err, errlen);
	else {
		seterr(err, errlen,
		       "corpus=%s: unknown corpus; use brown, wikitext103, "
		       "wikitext2, ptb, text or synthetic",
		       kind);
		rc = -1;
	}
	if (rc != 0) {
		source_free(s);
		return -1;
	}
	/* fingerprint: format + every source file's name, size and mtime */
	{
		uint64_t h = FNV_INIT;
		uint32_t v[2] = {NORM_VER, DATA_BROWN_WORDS};
		h = fnv1a(h, kind, strlen(kind) + 1);
		h = fnv1a(h, v, sizeof(v));
		for (int k = 0; k < 3; k++)
			for (int i = 0; i < s->nfiles[k]; i++) {
				struct stat st;
				const char *base = strrchr(s->files[k][i], '/');
				int64_t sz[2] = {-1, -1};
				base = base ? base + 1 : s->files[k][i];
				if (stat(s->files[k][i], &st) == 0) {
					sz[0] = (int64_t)st.st_size;
					sz[1] = (int64_t)st.st_mtime;
				}
				h = fnv1a(h, &k, sizeof(k));
				h = fnv1a(h, base, strlen(base) + 1);
				h = fnv1a(h, sz, sizeof(sz));
			}
		s->fingerprint = h;
	}
	return 0;
}

/* ---- vocabulary ------------------------------------------------------------
 */

struct rank {
	uint64_t count;
	const char *s;
	uint32_t len;
	int32_t idx;
};

static int cmp_rank(const void *a, const void *b)
{
	const struct rank *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	c = memcmp(x->s, y->s, n);
	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Assigns ids: specials 0, 1, then training words by rank, up to CAP
 * (0 = no cap); others get <unk>. Fills c->vocab. */
static int build_vocab(struct wtab *t, int cap, struct corpus *c)
{
	struct rank *r = malloc((t->n ? t->n : 1) * sizeof(*r));
	size_t nr = 0, bytes = 0;
	int V;
	char *p;
	if (!r)
		return -1;
	for (size_t i = 2; i < t->n; i++)
		if (t->w[i].count > 0)
			r[nr++] =
			    (struct rank){t->w[i].count, t->arena + t->w[i].off,
					  t->w[i].len, (int32_t)i};
	qsort(r, nr, sizeof(*r), cmp_rank);
	if (cap > 0 && nr > (size_t)cap)
		nr = (size_t)cap;
	if (nr > (size_t)INT32_MAX - 2) {
		free(r);
		return -1;
	}
	for (size_t i = 0; i < t->n; i++)
		t->w[i].id = W_UNK;
	t->w[W_EOS].id = W_EOS;
	V = 2 + (int)nr;
	for (size_t i = 0; i < nr; i++)
		t->w[r[i].idx].id = (int32_t)(2 + i);
	c->vocab = malloc((size_t)V * sizeof(*c->vocab));
	for (size_t i = 0; i < nr; i++)
		bytes += r[i].len + 1;
	bytes += t->w[0].len + t->w[1].len + 2;
	c->vocab_buf_ = malloc(bytes);
	if (!c->vocab || !c->vocab_buf_) {
		free(r);
		return -1;
	}
	p = c->vocab_buf_;
	for (int i = 0; i < V; i++) {
		const char *s = i < 2 ? t->arena + t->w[i].off : r[i - 2].s;
		size_t len = i < 2 ? t->w[i].len : r[i - 2].len;
		memcpy(p, s, len);
		p[len] = 0;
		c->vocab[i] = p;
		p += len + 1;
	}
	c->vocab_size = V;
	free(r);
	return 0;
}

/* ---- cache --------------------------------------------------------------- */

static void put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
}
static void put64(unsigned char *p, uint64_t v)
{
	memcpy(p, &v, 8);
}
static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}
static uint64_t get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* Writes A then B to PATH by temporary file and rename (fileio_replace:
 * per-process temporary names, since parallel runs may rebuild the same
 * cache; stale ones of killed builders are removed). */
static int write_atomic(const char *path, const void *a, size_t na,
			const void *b, size_t nb)
{
	struct iovec iov[2] = {{(void *)a, na}, {(void *)b, nb}};
	char err[256];
	return fileio_replace(path, iov, 2, err, sizeof(err));
}

static char *vocab_text(const struct corpus *c, size_t *len)
{
	size_t n = 0;
	char *b, *p;
	for (int i = 0; i < c->vocab_size; i++)
		n += strlen(c->vocab[i]) + 1;
	if (!(b = malloc(n + 1)))
		return NULL;
	p = b;
	for (int i = 0; i < c->vocab_size; i++) {
		size_t l = strlen(c->vocab[i]);
		memcpy(p, c->vocab[i], l);
		p[l] = '\n';
		p += l + 1;
	}
	*p = 0;
	*len = n;
	return b;
}

static int cache_write(const struct source *s, const struct corpus *c)
{
	char path[700];
	size_t vlen;
	char *vt;
	uint64_t vsum;
	if (mkdir(s->cache, 0777) != 0 && errno != EEXIST)
		return -1;
	if (!(vt = vocab_text(c, &vlen)))
		return -1;
	vsum = fnv1a(FNV_INIT, vt, vlen);
	snprintf(path, sizeof(path), "%s/vocab.txt", s->cache);
	if (write_atomic(path, vt, vlen, NULL, 0) != 0) {
		free(vt);
		return -1;
	}
	free(vt);
	for (int k = 0; k < 3; k++) {
		unsigned char h[CACHE_HDR] = {0};
		memcpy(h, DATA_CACHE_MAGIC, 8);
		put32(h + 8, DATA_CACHE_VERSION);
		put32(h + 12, (uint32_t)c->vocab_size);
		put64(h + 16, c->n[k]);
		put64(h + 24, fnv1a(FNV_INIT, c->ids[k], c->n[k] * 4));
		put64(h + 32, s->fingerprint);
		put64(h + 40, vsum);
		put32(h + 48, (uint32_t)k);
		put32(h + 52, (uint32_t)c->n_docs[k]);
		snprintf(path, sizeof(path), "%s/%s.ids", s->cache,
			 corpus_split_name(k));
		if (write_atomic(path, h, sizeof(h), c->ids[k], c->n[k] * 4) !=
		    0)
			return -1;
	}
	return 0;
}

/* Removes the temporary cache files of builders that were killed. */
static void cache_clean(const struct source *s)
{
	static const char *const names[] = {"vocab.txt", "train.ids",
					    "valid.ids", "test.ids"};
	char path[700];
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", s->cache, names[i]);
		fileio_remove_stale_tmp(path);
	}
}

/* Loads the cache into *c; -1 (c untouched but maybe partly filled — the
 * caller frees it) when anything is missing or does not match. */
static int cache_read(const struct source *s, struct corpus *c)
{
	char path[700], *vt = NULL, *p;
	size_t vlen, n = 0;
	uint64_t vsum;
	int V = 0;
	snprintf(path, sizeof(path), "%s/vocab.txt", s->cache);
	if (read_whole(path, &vt, &vlen) != 0)
		return -1;
	vsum = fnv1a(FNV_INIT, vt, vlen);
	for (size_t i = 0; i < vlen; i++)
		n += vt[i] == '\n';
	/* vocab_text never writes a NUL byte: one means a corrupt file (the
	 * words would end early and a line be skipped) */
	if (n < 2 || n > INT32_MAX || vt[vlen - 1] != '\n' ||
	    memchr(vt, 0, vlen))
		goto bad;
	V = (int)n;
	if (!(c->vocab = malloc((size_t)V * sizeof(*c->vocab))))
		goto bad;
	c->vocab_buf_ = vt;
	p = vt;
	for (int i = 0; i < V; i++) {
		char *nl = memchr(p, '\n', (size_t)(vt + vlen - p));
		*nl = 0; /* V newlines counted above: never NULL */
		c->vocab[i] = p;
		p = nl + 1;
	}
	vt = NULL;
	c->vocab_size = V;
	for (int k = 0; k < 3; k++) {
		unsigned char h[CACHE_HDR];
		FILE *f;
		struct stat st;
		uint64_t cnt;
		int ok;
		snprintf(path, sizeof(path), "%s/%s.ids", s->cache,
			 corpus_split_name(k));
		if (!(f = fopen(path, "rb")))
			goto bad;
		ok = fstat(fileno(f), &st) == 0 &&
		     fread(h, 1, sizeof(h), f) == sizeof(h) &&
		     !memcmp(h, DATA_CACHE_MAGIC, 8) &&
		     get32(h + 8) == DATA_CACHE_VERSION &&
		     get32(h + 12) == (uint32_t)V &&
		     get64(h + 32) == s->fingerprint && get64(h + 40) == vsum &&
		     get32(h + 48) == (uint32_t)k;
		cnt = ok ? get64(h + 16) : 0;
		ok = ok && cnt <= ((uint64_t)SIZE_MAX - CACHE_HDR) / 4 &&
		     (uint64_t)st.st_size == CACHE_HDR + cnt * 4;
		if (ok) {
			c->n[k] = (size_t)cnt;
			c->n_docs[k] = (int)get32(h + 52);
			c->ids[k] = malloc(cnt ? cnt * 4 : 4);
			ok = c->ids[k] &&
			     fread(c->ids[k], 4, cnt, f) == (size_t)cnt &&
			     fnv1a(FNV_INIT, c->ids[k], cnt * 4) ==
				 get64(h + 24);
		}
		fclose(f);
		if (!ok)
			goto bad;
		for (size_t i = 0; i < c->n[k]; i++)
			if (c->ids[k][i] < 0 || c->ids[k][i] >= V)
				goto bad;
	}
	return 0;
bad:
	free(vt);
	return -1;
}

/* ---- building from text ----------------------------------------------------
 */

static int build(const struct source *s, const char *kind, struct corpus *c,
		 char *err, size_t errlen)
{
	struct wtab t;
	struct ivec stream[3] = {{0}};
	int rc = -1;
	if (wtab_init(&t) != 0 || wtab_get(&t, "<eos>", 5) != W_EOS ||
	    wtab_get(&t, "<unk>", 5) != W_UNK)
		goto oom;
	for (int k = 0; k < 3; k++) {
		for (int i = 0; i < s->nfiles[k]; i++) {
			char *buf;
			size_t len;
			if (read_whole(s->files[k][i], &buf, &len) != 0) {
				seterr(err, errlen,
				       "corpus=%s: cannot read %s: %s", kind,
				       s->files[k][i], strerror(errno));
				goto out;
			}
			rc = tokenise(&t, buf, len, s->brown, k == CORPUS_TRAIN,
				      &stream[k]);
			free(buf);
			if (rc != 0)
				goto oom;
			rc = -1;
		}
		c->n_docs[k] = s->brown ? s->nfiles[k] : 0;
	}
	if (stream[CORPUS_TRAIN].n == 0) {
		seterr(err, errlen,
		       "corpus=%s: the training split under %s has "
		       "no tokens",
		       kind, s->dir);
		goto out;
	}
	if (build_vocab(&t, s->brown ? DATA_BROWN_WORDS : 0, c) != 0)
		goto oom;
	for (int k = 0; k < 3; k++) {
		for (size_t i = 0; i < stream[k].n; i++)
			stream[k].v[i] = t.w[stream[k].v[i]].id;
		c->ids[k] = stream[k].v;
		c->n[k] = stream[k].n;
		stream[k].v = NULL;
		if (!c->ids[k] && !(c->ids[k] = malloc(4)))
			goto oom;
	}
	rc = 0;
	goto out;
oom:
	seterr(err, errlen, "corpus=%s: out of memory tokenising %s", kind,
	       s->dir);
out:
	for (int k = 0; k < 3; k++)
		free(stream[k].v);
	wtab_free(&t);
	return rc;
}

/* ---- public ----------------------------------------------------------------
 */

void corpus_free(struct corpus *c)
{
	if (!c)
		return;
	for (int k = 0; k < 3; k++)
		free(c->ids[k]);
	free(c->vocab);
	free(c->vocab_buf_);
	memset(c, 0, sizeof(*c));
}

int corpus_check(const char *kind, const char *data_dir, char *err,
		 size_t errlen)
{
	struct source s;
	if (!kind) {
		seterr(err, errlen, "corpus: no corpus given");
		return -1;
	}
	if (!strcmp(kind, "synthetic"))
		return 0;
	if (source_find(&s, kind, data_dir && *data_dir ? data_dir : "data",
			err, errlen) != 0)
		return -1;
	source_free(&s);
	return 0;
}

int corpus_load(struct corpus *c, const char *kind, const char *data_dir,
		int vocab_size, uint64_t seed, char *err, size_t errlen)
{
	struct source s;
	memset(c, 0, sizeof(*c));
	if (!kind) {
		seterr(err, errlen, "corpus: no corpus given");
		return -1;
	}
	if (!strcmp(kind, "synthetic"))
		return corpus_synthetic(
		    c, vocab_size > 0 ? vocab_size : DATA_SYNTH_VOCAB,
		    DATA_SYNTH_TRAIN, DATA_SYNTH_VALID, DATA_SYNTH_TEST, seed,
		    err, errlen);
	if (source_find(&s, kind, data_dir && *data_dir ? data_dir : "data",
			err, errlen) != 0)
		return -1;
	cache_clean(&s);
	if (cache_read(&s, c) == 0) {
		c->from_cache = 1;
	} else {
		corpus_free(c);
		if (build(&s, kind, c, err, errlen) != 0) {
			corpus_free(c);
			source_free(&s);
			return -1;
		}
		/* a read-only data directory still loads, just uncached */
		(void)cache_write(&s, c);
	}
	snprintf(c->kind, sizeof(c->kind), "%s", kind);
	snprintf(c->source_dir, sizeof(c->source_dir), "%s", s.dir);
	c->eos_id = W_EOS;
	c->unk_id = W_UNK;
	source_free(&s);
	return 0;
}

int corpus_synthetic(struct corpus *c, int vocab_size, size_t n_train,
		     size_t n_valid, size_t n_test, uint64_t seed, char *err,
		     size_t errlen)
{
	size_t n[3] = {n_train, n_valid, n_test}, bytes = 0;
	uint64_t st = seed;
	char *p;
	memset(c, 0, sizeof(*c));
	if (vocab_size < 1 || n_train == 0) {
		seterr(err, errlen,
		       "corpus=synthetic: vocab_size (%d) and the train size "
		       "(%zu) must be positive",
		       vocab_size, n_train);
		return -1;
	}
	snprintf(c->kind, sizeof(c->kind), "synthetic");
	c->vocab_size = vocab_size;
	c->eos_id = c->unk_id = -1;
	for (int k = 0; k < 3; k++) {
		c->n[k] = n[k];
		c->ids[k] = malloc(n[k] ? n[k] * sizeof(int32_t) : 4);
		if (!c->ids[k])
			goto oom;
		/* Lemire's multiply-shift: bias below 2^-32 * V, negligible */
		for (size_t i = 0; i < n[k]; i++)
			c->ids[k][i] = (int32_t)(((splitmix64(&st) >> 32) *
						  (uint64_t)vocab_size) >>
						 32);
	}
	for (int i = 0; i < vocab_size; i++)
		bytes += (size_t)snprintf(NULL, 0, "w%d", i) + 1;
	c->vocab = malloc((size_t)vocab_size * sizeof(*c->vocab));
	c->vocab_buf_ = malloc(bytes);
	if (!c->vocab || !c->vocab_buf_)
		goto oom;
	p = c->vocab_buf_;
	for (int i = 0; i < vocab_size; i++) {
		c->vocab[i] = p;
		p += sprintf(p, "w%d", i) + 1;
	}
	return 0;
oom:
	corpus_free(c);
	seterr(err, errlen, "corpus=synthetic: out of memory for %zu tokens",
	       n_train + n_valid + n_test);
	return -1;
}

/* ---- batcher ---------------------------------------------------------------
 */

int batcher_init(struct batcher *b, const int32_t *ids, size_t n, int B, int T)
{
	memset(b, 0, sizeof(*b));
	if (!ids || B < 1 || T < 1 || n / (size_t)B < (size_t)T + 1)
		return -1;
	b->ids = ids;
	b->n = n;
	b->B = B;
	b->T = T;
	b->stream_len = n / (size_t)B;
	b->n_batches = (b->stream_len - 1) / (size_t)T;
	return 0;
}

size_t batcher_n_batches(const struct batcher *b)
{
	return b->n_batches;
}

void batcher_get(const struct batcher *b, size_t k, int32_t *out)
{
	size_t w = (size_t)b->T + 1;
	for (int s = 0; s < b->B; s++)
		memcpy(out + (size_t)s * w,
		       b->ids + (size_t)s * b->stream_len + k * (size_t)b->T,
		       w * sizeof(*out));
}

size_t batcher_next(struct batcher *b, int32_t *out)
{
	size_t k = b->next;
	batcher_get(b, k, out);
	if (++b->next == b->n_batches) {
		b->next = 0;
		b->epoch++;
	}
	return k;
}

void batcher_reset(struct batcher *b)
{
	b->next = 0;
	b->epoch = 0;
}
