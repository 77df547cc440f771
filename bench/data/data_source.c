/*
 * data_source.c — where the text of a file corpus is: the Brown files
 * (DATA_DIR/brown/raw, split by sorted filename), the three files of
 * wikitext103 / wikitext2 / ptb / text, the messages naming what is missing,
 * and the fingerprint of the files that keys the cache (data_cache.c).
 * data.h describes the corpora, data_impl.h the steps of a load.
 */
#include "data_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/errmsg.h"

#define NORM_VER  1 /* bump when tokenisation changes: invalidates caches */
#define MAX_FILES 100000

int data_read_whole(const char *path, char **buf, size_t *len)
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

void data_source_free(struct source *s)
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

/* Appends a copy of PATH to the files of SPLIT; -1 when out of memory. */
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

/* ---- brown --------------------------------------------------------------- */

/* The names of the regular files in DIR not starting with '.', unsorted,
 * into (*names)[0..*n); an unreadable DIR lists none. -1 when out of memory
 * or past MAX_FILES, with what was listed so far in *names, *n. */
static int list_files(const char *dir, char ***names, int *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int cap = 0, rc = 0;
	*names = NULL;
	*n = 0;
	while (d && (de = readdir(d))) {
		char path[1024];
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!is_file(path))
			continue;
		if (*n == cap) {
			char **nn;
			cap = cap ? cap * 2 : 512;
			if (cap > MAX_FILES ||
			    !(nn =
				  realloc(*names, (size_t)cap * sizeof(*nn)))) {
				rc = -1;
				break;
			}
			*names = nn;
		}
		if (!((*names)[*n] = strdup(de->d_name))) {
			rc = -1;
			break;
		}
		(*n)++;
	}
	if (d)
		closedir(d);
	return rc;
}

/* The message for a Brown directory with no files: how to fetch them (into
 * ROOT when it is not the default "data"). */
static void brown_missing(const char *dir, const char *root, char *err,
			  size_t errlen)
{
	if (strcmp(root, "data") == 0)
		errmsg_set(err, errlen,
			   "corpus=brown: no data under %s; run "
			   "scripts/fetch-brown.sh (or the README's run "
			   "command) to fetch it",
			   dir);
	else
		errmsg_set(err, errlen,
			   "corpus=brown: no data under %s; run "
			   "scripts/fetch-brown.sh %s (or the README's run "
			   "command) to fetch it",
			   dir, root);
}

/* ROOT/brown/raw/: document i of the sorted file names is valid if
 * i % 10 == 8, test if i % 10 == 9, else train. */
static int brown_source(struct source *s, const char *root, char *err,
			size_t errlen)
{
	char raw[560], **names;
	int n, rc = -1;
	snprintf(s->dir, sizeof(s->dir), "%s/brown", root);
	snprintf(raw, sizeof(raw), "%s/raw", s->dir);
	snprintf(s->cache, sizeof(s->cache), "%s/cache", s->dir);
	s->brown = 1;
	if (list_files(raw, &names, &n) != 0)
		goto out;
	if (n == 0) {
		brown_missing(s->dir, root, err, errlen);
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
		errmsg_set(err, errlen,
			   "corpus=brown: out of memory listing %s", raw);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* ---- wikitext103, wikitext2, ptb, text -------------------------------- */

/* File names of KIND: PRE<split>SUF, in ROOT or ROOT/SUB (NULL: ROOT only). */
static void text_names(const char *kind, const char **sub, const char **pre,
		       const char **suf)
{
	if (!strcmp(kind, "wikitext103"))
		*sub = "wikitext-103", *pre = "wiki.", *suf = ".tokens";
	else if (!strcmp(kind, "wikitext2"))
		*sub = "wikitext-2", *pre = "wiki.", *suf = ".tokens";
	else if (!strcmp(kind, "ptb"))
		*sub = "ptb", *pre = "ptb.", *suf = ".txt";
	else
		*sub = NULL, *pre = "", *suf = ".txt";
}

/* The message for a text corpus found in neither directory: names the
 * first missing file in DIR, and every file the corpus needs. */
static void text_missing(const char *kind, const char *dir, const char *pre,
			 const char *suf, char *err, size_t errlen)
{
	char path[1100];
	int k;
	for (k = 0; k < 3; k++) {
		snprintf(path, sizeof(path), "%s/%s%s%s", dir, pre,
			 corpus_split_name(k), suf);
		if (!is_file(path))
			break;
	}
	if (k == 3) /* all there by now: name the first */
		snprintf(path, sizeof(path), "%s/%s%s%s", dir, pre,
			 corpus_split_name(0), suf);
	errmsg_set(err, errlen,
		   "corpus=%s: %s %s; put the %s%s%s, %s%s%s and "
		   "%s%s%s files there or point data_dir= at them",
		   kind, not_file_word(path), path, pre, "train", suf, pre,
		   "valid", suf, pre, "test", suf);
}

/* wikitext103 / wikitext2 / ptb / text: three files in DATA_DIR, or in
 * DATA_DIR/SUB when they are not all in DATA_DIR itself. */
static int text_source(struct source *s, const char *kind, const char *root,
		       char *err, size_t errlen)
{
	const char *sub, *pre, *suf;
	char dir[2][512], path[3][1100];
	int ndir = 1, have[2] = {0, 0}, di, k;
	text_names(kind, &sub, &pre, &suf);
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
		text_missing(kind, dir[ndir == 2 && !have[0] ? 1 : 0], pre, suf,
			     err, errlen);
		return -1;
	}
	snprintf(s->dir, sizeof(s->dir), "%s", dir[di]);
	snprintf(s->cache, sizeof(s->cache), "%s/cache", dir[di]);
	for (k = 0; k < 3; k++)
		if (add_file(s, k, path[k]) != 0) {
			errmsg_set(err, errlen, "corpus=%s: out of memory",
				   kind);
			return -1;
		}
	return 0;
}

/* ---- fingerprint ---------------------------------------------------------- */

/* Hash of the cache format (kind, NORM_VER, DATA_BROWN_WORDS) and every
 * source file's name, size and mtime, so edited or re-fetched text
 * invalidates the cache. */
static uint64_t fingerprint(const struct source *s, const char *kind)
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
	return h;
}

int data_source_find(struct source *s, const char *kind, const char *root,
		     char *err, size_t errlen)
{
	int rc;
	memset(s, 0, sizeof(*s));
	if (err && errlen)
		err[0] = 0;
	if (strlen(root) > 400) { /* keeps every path below inside its buffer */
		errmsg_set(err, errlen,
			   "corpus=%s: data_dir longer than 400 bytes", kind);
		return -1;
	}
	if (!strcmp(kind, "brown"))
		rc = brown_source(s, root, err, errlen);
	else if (!strcmp(kind, "wikitext103") || !strcmp(kind, "wikitext2") ||
		 !strcmp(kind, "ptb") || !strcmp(kind, "text"))
		rc = text_source(s, kind, root, err, errlen);
	else {
		errmsg_set(err, errlen,
			   "corpus=%s: unknown corpus; use brown, wikitext103, "
			   "wikitext2, ptb, text or synthetic",
			   kind);
		rc = -1;
	}
	if (rc != 0) {
		data_source_free(s);
		return -1;
	}
	s->fingerprint = fingerprint(s, kind);
	return 0;
}
