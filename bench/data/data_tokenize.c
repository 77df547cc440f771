/*
 * data_tokenize.c — text to token ids: the rule for numbers, the tokeniser
 * (Brown: tags stripped, lowercased, numbers as "N", <eos> after each
 * non-empty line; the other corpora: words as they are, <eos> after every
 * line) and data_build, which tokenises a source's files and maps the words
 * to the vocabulary of data_vocab.c. data.h describes the corpora.
 */
#include "data_impl.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../io/errmsg.h"

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

/* ---- tokeniser ------------------------------------------------------------ */

static int is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' ||
	       ch == '\f';
}

/* Brown token W[0..*wl) ("word/TAG") as a word: the text before its last
 * '/', lowercased into scratch (cut at 255 bytes), or "N" for a number.
 * Returns the word, its length in *wl. */
static const char *brown_word(const char *w, size_t *wl, char scratch[256])
{
	const char *slash = NULL;
	size_t n = *wl;
	for (size_t k = 0; k < n; k++)
		if (w[k] == '/')
			slash = w + k;
	if (slash && slash > w)
		n = (size_t)(slash - w);
	if (n >= 256)
		n = 255;
	for (size_t k = 0; k < n; k++)
		scratch[k] = (char)tolower((unsigned char)w[k]);
	scratch[n] = 0;
	*wl = n;
	if (data_is_number(scratch)) {
		*wl = 1;
		return "N";
	}
	return scratch;
}

/* Appends word W[0..wl) to OUT (counted when COUNT); -1 when out of
 * memory. */
static int put_word(struct wtab *t, const char *w, size_t wl, int count,
		    struct ivec *out)
{
	int32_t x = data_wtab_get(t, w, wl);
	if (x < 0 || ivec_push(out, x) != 0)
		return -1;
	if (count)
		t->w[x].count++;
	return 0;
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
			size_t s, wl;
			const char *w;
			while (i < len && is_blank(buf[i]))
				i++;
			if (i >= len || buf[i] == '\n')
				break;
			s = i;
			while (i < len && buf[i] != '\n' && !is_blank(buf[i]))
				i++;
			w = buf + s;
			wl = i - s;
			if (brown)
				w = brown_word(w, &wl, scratch);
			if (put_word(t, w, wl, count, out) != 0)
				return -1;
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

/* ---- building from text --------------------------------------------------- */

/* Tokenises every file of s into stream[split], counting the training
 * split's words; c->n_docs[] set. 0; -1 with the message set when a file
 * cannot be read; -2 when out of memory. */
static int tokenise_files(const struct source *s, const char *kind,
			  struct wtab *t, struct ivec stream[3],
			  struct corpus *c, char *err, size_t errlen)
{
	for (int k = 0; k < 3; k++) {
		for (int i = 0; i < s->nfiles[k]; i++) {
			char *buf;
			size_t len;
			int rc;
			if (data_read_whole(s->files[k][i], &buf, &len) != 0) {
				errmsg_set(err, errlen,
					   "corpus=%s: cannot read %s: %s",
					   kind, s->files[k][i],
					   strerror(errno));
				return -1;
			}
			rc = tokenise(t, buf, len, s->brown, k == CORPUS_TRAIN,
				      &stream[k]);
			free(buf);
			if (rc != 0)
				return -2;
		}
		c->n_docs[k] = s->brown ? s->nfiles[k] : 0;
	}
	return 0;
}

int data_build(const struct source *s, const char *kind, struct corpus *c,
	       char *err, size_t errlen)
{
	struct wtab t;
	struct ivec stream[3] = {{0}};
	int rc = -1, tr;
	if (data_wtab_init(&t) != 0 || data_wtab_get(&t, "<eos>", 5) != W_EOS ||
	    data_wtab_get(&t, "<unk>", 5) != W_UNK)
		goto oom;
	tr = tokenise_files(s, kind, &t, stream, c, err, errlen);
	if (tr == -2)
		goto oom;
	if (tr != 0)
		goto out;
	if (stream[CORPUS_TRAIN].n == 0) {
		errmsg_set(err, errlen,
			   "corpus=%s: the training split under %s has "
			   "no tokens",
			   kind, s->dir);
		goto out;
	}
	if (data_vocab_build(&t, s->brown ? DATA_BROWN_WORDS : 0, c) != 0)
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
	errmsg_set(err, errlen, "corpus=%s: out of memory tokenising %s", kind,
		   s->dir);
out:
	for (int k = 0; k < 3; k++)
		free(stream[k].v);
	data_wtab_free(&t);
	return rc;
}
