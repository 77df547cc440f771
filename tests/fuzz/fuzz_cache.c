/* fuzz_cache.c — libFuzzer target: the token-id cache reader
 * data_cache_read (bench/data/data_cache.c), which corpus_load calls before it
 * tokenises a file corpus: vocab.txt and train/valid/test.ids of one cache
 * directory. An accepted cache must hold at least <eos>, <unk> and ids
 * inside the vocabulary.
 *
 * Input: a flags byte, then vocab.txt, train.ids, valid.ids and test.ids
 * separated by FUZZ_SEP (a file whose part is missing is absent). The
 * flags let the fuzzer past the checksums to the checks behind them: bit 0
 * writes the directory's fingerprint into each .ids header, bit 1 the
 * vocab.txt checksum, bit 2 the checksum of the ids the header counts. */
#include "fuzz_util.h"

#include <ftw.h>
#include <sys/stat.h>

#include "bench/data/data_impl.h"

#define FUZZ_SEP    "#SPLIT#"
#define HDR	    56 /* the .ids header, bytes (data_cache.c) */
#define FINGERPRINT 0x5eedf00dcafe1234ull

static struct source src;

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(p);
}

static void rm_dir(void)
{
	nftw(src.cache, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	(void)argc, (void)argv;
	/* four files written an input: memory (/dev/shm) runs ~10x faster
	 * than a disk-backed /tmp */
	if (access("/dev/shm", W_OK) == 0)
		tmp = "/dev/shm";
	snprintf(src.cache, sizeof(src.cache), "%s/dq-fuzz-cache-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	FUZZ_CHECK(mkdtemp(src.cache) != NULL);
	src.fingerprint = FINGERPRINT;
	atexit(rm_dir);
	return 0;
}

/* Writes part P[0..n) as NAME in the cache directory (NULL: removes it),
 * patching an .ids header as FLAGS say (vsum: vocab.txt's checksum). */
static void put_part(const char *name, const uint8_t *p, size_t n, int flags,
		     uint64_t vsum)
{
	char path[700];
	uint8_t *b;
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", src.cache, name);
	if (!p) {
		unlink(path);
		return;
	}
	FUZZ_CHECK((b = malloc(n ? n : 1)) != NULL);
	memcpy(b, p, n);
	if (strcmp(name, "vocab.txt") && n >= HDR) {
		uint64_t cnt, sum;
		memcpy(&cnt, b + 16, 8);
		if (flags & 1)
			memcpy(b + 32, &src.fingerprint, 8);
		if (flags & 2)
			memcpy(b + 40, &vsum, 8);
		if ((flags & 4) && cnt <= (n - HDR) / 4) {
			sum = fnv1a(FNV_INIT, b + HDR, cnt * 4);
			memcpy(b + 24, &sum, 8);
		}
	}
	FUZZ_CHECK((f = fopen(path, "wb")) != NULL);
	FUZZ_CHECK(fwrite(b, 1, n, f) == n && fclose(f) == 0);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[4] = {"vocab.txt", "train.ids",
					     "valid.ids", "test.ids"};
	const uint8_t *part[4] = {NULL}, *p, *end = data + size;
	size_t len[4] = {0};
	uint64_t vsum = 0;
	struct corpus c;
	int flags, k;
	if (size < 1)
		return 0;
	flags = data[0];
	p = data + 1;
	for (k = 0; k < 4 && p <= end; k++) {
		const uint8_t *s =
		    memmem(p, (size_t)(end - p), FUZZ_SEP, strlen(FUZZ_SEP));
		part[k] = p;
		len[k] = s ? (size_t)(s - p) : (size_t)(end - p);
		p = s ? s + strlen(FUZZ_SEP) : end + 1;
	}
	if (part[0])
		vsum = fnv1a(FNV_INIT, part[0], len[0]);
	for (k = 0; k < 4; k++)
		put_part(names[k], part[k], len[k], flags, vsum);

	memset(&c, 0, sizeof(c));
	if (data_cache_read(&src, &c) == 0) {
		FUZZ_CHECK(c.vocab_size >= 2 && c.vocab && c.vocab_buf_);
		for (int i = 0; i < c.vocab_size; i++)
			FUZZ_CHECK(c.vocab[i] && !strchr(c.vocab[i], '\n'));
		for (k = 0; k < 3; k++)
			for (size_t i = 0; i < c.n[k]; i++)
				FUZZ_CHECK(c.ids[k][i] >= 0 &&
					   c.ids[k][i] < c.vocab_size);
	}
	corpus_free(&c);
	return 0;
}
