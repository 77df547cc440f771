/*
 * data_cache.c — the token-id cache of a file corpus, so that a corpus is
 * tokenised once per source fingerprint (data_source.c).
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
#include "data_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/fileio.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "data_cache.c reads and writes little-endian caches with memcpy"
#endif

#define CACHE_HDR 56

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

/* ---- writing -------------------------------------------------------------- */

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

/* vocab.txt's bytes: every word and a newline, *len bytes (plus a NUL). */
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

/* Writes s->cache/vocab.txt; its checksum into *vsum. */
static int vocab_write(const struct source *s, const struct corpus *c,
		       uint64_t *vsum)
{
	char path[700];
	size_t vlen;
	char *vt;
	int rc;
	if (!(vt = vocab_text(c, &vlen)))
		return -1;
	*vsum = fnv1a(FNV_INIT, vt, vlen);
	snprintf(path, sizeof(path), "%s/vocab.txt", s->cache);
	rc = write_atomic(path, vt, vlen, NULL, 0);
	free(vt);
	return rc;
}

int data_cache_write(const struct source *s, const struct corpus *c)
{
	char path[700];
	uint64_t vsum;
	if (mkdir(s->cache, 0777) != 0 && errno != EEXIST)
		return -1;
	if (vocab_write(s, c, &vsum) != 0)
		return -1;
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

int corpus_write_ids(const struct corpus *c, const char *dir)
{
	struct source s;
	memset(&s, 0, sizeof(s));
	if (strlen(dir) >= sizeof(s.cache)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(s.cache, dir, strlen(dir) + 1);
	return data_cache_write(&s, c);
}

void data_cache_clean(const struct source *s)
{
	static const char *const names[] = {"vocab.txt", "train.ids",
					    "valid.ids", "test.ids"};
	char path[700];
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", s->cache, names[i]);
		fileio_remove_stale_tmp(path);
	}
}

/* ---- reading -------------------------------------------------------------- */

/* Reads s->cache/vocab.txt into c->vocab, c->vocab_size (c->vocab_buf_
 * owns the text); its checksum into *vsum. -1 when missing or corrupt. */
static int vocab_read(const struct source *s, struct corpus *c, uint64_t *vsum)
{
	char path[700], *vt, *p;
	size_t vlen, n = 0;
	int V;
	snprintf(path, sizeof(path), "%s/vocab.txt", s->cache);
	if (data_read_whole(path, &vt, &vlen) != 0)
		return -1;
	*vsum = fnv1a(FNV_INIT, vt, vlen);
	for (size_t i = 0; i < vlen; i++)
		n += vt[i] == '\n';
	/* vocab_text never writes a NUL byte: one means a corrupt file (the
	 * words would end early and a line be skipped) */
	if (n < 2 || n > INT32_MAX || vt[vlen - 1] != '\n' ||
	    memchr(vt, 0, vlen) ||
	    !(c->vocab = malloc((size_t)n * sizeof(*c->vocab)))) {
		free(vt);
		return -1;
	}
	V = (int)n;
	c->vocab_buf_ = vt;
	p = vt;
	for (int i = 0; i < V; i++) {
		char *nl = memchr(p, '\n', (size_t)(vt + vlen - p));
		*nl = 0; /* V newlines counted above: never NULL */
		c->vocab[i] = p;
		p = nl + 1;
	}
	c->vocab_size = V;
	return 0;
}

/* Reads s->cache/<split K>.ids into c->ids[K], c->n[K], c->n_docs[K] when
 * its header matches (magic, version, vocab size V, fingerprint, vocab
 * checksum VSUM, split, size) and so do its checksum and ids. -1 when it
 * does not (c->ids[K] may be allocated). */
static int ids_read(const struct source *s, int k, struct corpus *c,
		    uint64_t vsum)
{
	char path[700];
	unsigned char h[CACHE_HDR];
	FILE *f;
	struct stat st;
	uint64_t cnt;
	int ok, V = c->vocab_size;
	snprintf(path, sizeof(path), "%s/%s.ids", s->cache,
		 corpus_split_name(k));
	if (!(f = fopen(path, "rb")))
		return -1;
	ok = fstat(fileno(f), &st) == 0 &&
	     fread(h, 1, sizeof(h), f) == sizeof(h) &&
	     !memcmp(h, DATA_CACHE_MAGIC, 8) &&
	     get32(h + 8) == DATA_CACHE_VERSION &&
	     get32(h + 12) == (uint32_t)V && get64(h + 32) == s->fingerprint &&
	     get64(h + 40) == vsum && get32(h + 48) == (uint32_t)k;
	cnt = ok ? get64(h + 16) : 0;
	ok = ok && cnt <= ((uint64_t)SIZE_MAX - CACHE_HDR) / 4 &&
	     (uint64_t)st.st_size == CACHE_HDR + cnt * 4;
	if (ok) {
		c->n[k] = (size_t)cnt;
		c->n_docs[k] = (int)get32(h + 52);
		c->ids[k] = malloc(cnt ? cnt * 4 : 4);
		ok = c->ids[k] && fread(c->ids[k], 4, cnt, f) == (size_t)cnt &&
		     fnv1a(FNV_INIT, c->ids[k], cnt * 4) == get64(h + 24);
	}
	fclose(f);
	if (!ok)
		return -1;
	for (size_t i = 0; i < c->n[k]; i++)
		if (c->ids[k][i] < 0 || c->ids[k][i] >= V)
			return -1;
	return 0;
}

int data_cache_read(const struct source *s, struct corpus *c)
{
	uint64_t vsum;
	if (vocab_read(s, c, &vsum) != 0)
		return -1;
	for (int k = 0; k < 3; k++)
		if (ids_read(s, k, c, vsum) != 0)
			return -1;
	return 0;
}
