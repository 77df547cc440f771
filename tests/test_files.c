/*
 * test_files.c — what deqbench does with its files when something goes
 * wrong: a corrupt corpus cache is rebuilt, a record that cannot
 * be appended leaves out= as it was and survives in the rescue file (exit
 * 1), safetensors outputs never replace a device, FIFO or link, refused
 * runs leave nothing behind, `report` refuses a directory, and stale
 * temporary files of killed writers are removed. Most tests run the
 * deqbench binary (test_cli.h); the full-disk test mounts a 64 KiB tmpfs
 * and skips with a message where it may not, and a file-size limit gives
 * the same short write without a mount.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>

#include "data.h"
#include "record.h"
#include "safetensors.h"
#include "test_cli.h"

#define TINY                                                                   \
	"d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", "batch_size=4",     \
	    "layers=2", "steps=3", "warmup_steps=1", "eval_tokens=32",         \
	    "threads=1"

/* ---- helpers ------------------------------------------------------------- */

/* Word-level text corpus in cli_dir/corpus: 14 training words, so V = 16. */
static void write_corpus(char *dir, size_t n)
{
	static const char *const words[] = {
	    "the", "cat", "sat", "on",	  "a",	   "mat", "and",
	    "dog", "ran", "to",	 "house", "green", "big", "red"};
	static const char *const names[] = {"train.txt", "valid.txt",
					    "test.txt"};
	unsigned x = 7;
	cli_path(dir, n, "corpus");
	cr_assert_eq(mkdir(dir, 0777), 0);
	for (int k = 0; k < 3; k++) {
		char p[700], text[8192];
		size_t len = 0;
		for (int l = 0; l < (k ? 40 : 200); l++)
			for (int w = 0; w < 8; w++) {
				x = x * 1103515245u + 12345u;
				len += (size_t)snprintf(
				    text + len, sizeof(text) - len, "%s%s",
				    words[(x >> 16) % 14], w < 7 ? " " : "\n");
			}
		cr_assert_lt(len, sizeof(text) - 1);
		snprintf(p, sizeof(p), "%s/%s", dir, names[k]);
		cli_write(p, text, len);
	}
}

/* The records of a JSONL file; fails the test when it is not valid. */
static json_t *records_of(const char *path)
{
	json_t *arr = json_array();
	char err[1024];
	cr_assert_eq(record_read_jsonl(path, arr, err, sizeof(err)), 0, "%s",
		     err);
	return arr;
}

/* Asserts path holds n records and the last has status "ok". */
static void expect_records(const char *path, size_t n)
{
	json_t *arr = records_of(path);
	json_t *last = json_array_get(arr, json_array_size(arr) - 1);
	cr_assert_eq(json_array_size(arr), n, "%s: %zu records, expected %zu",
		     path, json_array_size(arr), n);
	cr_assert_str_eq(json_string_value(json_object_get(last, "status")),
			 "ok");
	json_decref(arr);
}

static void rescue_path(char *buf, size_t n)
{
	snprintf(buf, n, "%s/deqbench-unsaved-%ld.jsonl", cli_dir,
		 (long)getuid());
}

/* Exit 2 with exactly one line on stderr that contains must_contain. */
static void expect_refused(const char *const *args, const char *must_contain)
{
	char err[4096];
	int rc = cli_run(args, 0, err, sizeof(err));
	char *nl = strchr(err, '\n');
	cr_assert_eq(rc, 2, "%s %s: exit %d, stderr: %s", args[0], args[1], rc,
		     err);
	cr_assert(nl && !nl[1], "one line expected, got: %s", err);
	cr_assert(strstr(err, must_contain), "'%s' not in: %s", must_contain,
		  err);
}

/* ---- a. corrupt vocabulary cache ------------------------------------------ */

/* Every kind of damage to cache/vocab.txt: the next load rebuilds the
 * cache (same bytes as the first build) instead of crashing on it. */
Test(files, corrupt_vocab_cache_rebuilt, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char dir[600], vocab[700], out[600], a_dir[700], a_out[700], err[4096];
	char *orig;
	size_t vlen;
	const char *const args[] = {"run", "corpus=text", a_dir,
				    a_out, TINY,	  NULL};
	write_corpus(dir, sizeof(dir));
	snprintf(vocab, sizeof(vocab), "%s/cache/vocab.txt", dir);
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(a_dir, sizeof(a_dir), "data_dir=%s", dir);
	snprintf(a_out, sizeof(a_out), "out=%s", out);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	orig = cli_read(vocab, &vlen);
	cr_assert(orig && vlen > 20 && !strncmp(orig, "<eos>\n<unk>\n", 12));
	for (int k = 0; k < 6; k++) {
		char *bad = malloc(vlen);
		size_t n = vlen;
		char *now;
		size_t now_len;
		memcpy(bad, orig, vlen);
		if (k == 0)
			bad[0] = 0; /* NUL as the first byte (this crashed) */
		else if (k == 1)
			bad[vlen / 2] = 0; /* NUL inside a word */
		else if (k == 2)
			n = vlen / 2 + 1; /* cut mid-line */
		else if (k == 3)
			n = (size_t)(strrchr(orig, '\n') -
				     orig); /* no final \n */
		else if (k == 4)
			for (size_t i = 0; i < vlen; i++)
				bad[i] = (char)((i * 37 + 11) & 0xff);
		else
			n = 0;
		cli_write(vocab, bad, n);
		free(bad);
		cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0,
			     "corruption %d: %s", k, err);
		now = cli_read(vocab, &now_len);
		cr_assert(now_len == vlen && !memcmp(now, orig, vlen),
			  "corruption %d: vocab.txt not rebuilt", k);
		free(now);
	}
	expect_records(out, 7);
	free(orig);
}

/* The same in process: the corrupt cache is not used (from_cache 0), the
 * rebuilt corpus equals the first build, and the next load uses the cache
 * again. A suite's up-front corpus check survives it too. */
Test(files, corrupt_vocab_cache_in_process_and_suite, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char dir[600], vocab[700], suite[600], out[600], a_out[700];
	char text[2048], err[4096];
	struct corpus a, b;
	write_corpus(dir, sizeof(dir));
	cr_assert_eq(corpus_load(&a, "text", dir, 0, 1, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(a.from_cache, 0);
	snprintf(vocab, sizeof(vocab), "%s/cache/vocab.txt", dir);
	{
		FILE *f = fopen(vocab, "r+b");
		cr_assert_not_null(f);
		fputc(0, f);
		fclose(f);
	}
	cr_assert_eq(corpus_load(&b, "text", dir, 0, 1, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(b.from_cache, 0, "a corrupt cache must not be used");
	cr_assert_eq(b.vocab_size, a.vocab_size);
	for (int i = 0; i < a.vocab_size; i++)
		cr_assert_str_eq(b.vocab[i], a.vocab[i]);
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(b.n[k], a.n[k]);
		cr_assert_eq(memcmp(b.ids[k], a.ids[k], a.n[k] * 4), 0);
	}
	corpus_free(&b);
	cr_assert_eq(corpus_load(&b, "text", dir, 0, 1, err, sizeof(err)), 0);
	cr_assert_eq(b.from_cache, 1, "the rebuilt cache is used again");
	corpus_free(&b);
	corpus_free(&a);

	/* suite: corrupt again, the up-front check loads the corpus */
	{
		FILE *f = fopen(vocab, "r+b");
		fputc(0, f);
		fclose(f);
	}
	cli_path(suite, sizeof(suite), "s.json");
	cli_path(out, sizeof(out), "s.jsonl");
	snprintf(a_out, sizeof(a_out), "out=%s", out);
	snprintf(text, sizeof(text),
		 "{\"name\":\"v\",\"base\":{\"corpus\":\"text\",\"data_dir\":"
		 "\"%s\",\"d_model\":16,\"n_heads\":2,\"d_ff\":32,\"seq_len\":"
		 "8,\"batch_size\":4,\"layers\":2,\"steps\":2,\"warmup_steps\":"
		 "1,\"eval_tokens\":32,\"threads\":1},\"axes\":{\"method\":["
		 "\"unroll\"]}}",
		 dir);
	cli_write(suite, text, strlen(text));
	{
		const char *const args[] = {"suite", suite, a_out, NULL};
		cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	}
	expect_records(out, 1);
}

/* ---- b. full disk ---------------------------------------------------------- */

static char mounted[700];

static void unmount_teardown(void)
{
	if (mounted[0])
		umount2(mounted, MNT_DETACH);
	mounted[0] = 0;
	cli_teardown();
}

/* A full disk: a 64 KiB tmpfs with one record and a filler
 * that takes the rest. The append fails part way; the file must stay byte
 * for byte as it was, the record must be in the rescue file, and once
 * there is room again the next record appends cleanly and report reads
 * the file. */
Test(files, full_disk_append_leaves_file_unchanged, .init = cli_setup,
     .fini = unmount_teardown, .timeout = 120)
{
	char out[800], fill[800], a_out[900], rescue[600], err[65536];
	char *before, *after;
	size_t n0, n1;
	const char *const args[] = {"run", "corpus=synthetic", a_out, TINY,
				    NULL};
	cli_path(mounted, sizeof(mounted), "mnt");
	cr_assert_eq(mkdir(mounted, 0777), 0);
	if (mount("tmpfs", mounted, "tmpfs", 0, "size=64k") != 0) {
		int e = errno;
		mounted[0] = 0;
		cr_skip_test("cannot mount a tmpfs here (%s); "
			     "files/short_write_undone checks the same path "
			     "with a file-size limit",
			     strerror(e));
	}
	snprintf(out, sizeof(out), "%s/r.jsonl", mounted);
	snprintf(fill, sizeof(fill), "%s/fill", mounted);
	snprintf(a_out, sizeof(a_out), "out=%s", out);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	{
		FILE *f = fopen(fill, "wb");
		char block[1024] = {0};
		cr_assert_not_null(f);
		setvbuf(f, NULL, _IONBF, 0);
		while (fwrite(block, 1, sizeof(block), f) == sizeof(block))
			;
		fclose(f);
	}
	before = cli_read(out, &n0);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 1, "%s", err);
	rescue_path(rescue, sizeof(rescue));
	cr_assert(strstr(err, "cannot append") &&
		      strstr(err, "the file is unchanged") &&
		      strstr(err, rescue),
		  "stderr: %s", err);
	after = cli_read(out, &n1);
	cr_assert(n1 == n0 && !memcmp(before, after, n0),
		  "out= changed: %zu bytes before, %zu after", n0, n1);
	expect_records(rescue, 1);
	cr_assert_eq(unlink(fill), 0);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	{
		const char *const rep[] = {"report", out, NULL};
		cr_assert_eq(cli_run(rep, 0, err, sizeof(err)), 0, "%s", err);
	}
	expect_records(out, 2);
	free(before);
	free(after);
}

/* Repeats out='s one record until the file holds 32 KiB (so that a
 * file-size limit just above it still lets the empty rescue file be
 * written); returns the file's bytes, their count in *n. */
static char *fill_with_records(const char *out, size_t *n)
{
	size_t len;
	char *line = cli_read(out, &len);
	FILE *f = fopen(out, "ab");
	cr_assert(line && f);
	for (size_t k = len; k < 32768; k += len)
		fwrite(line, 1, len, f);
	fclose(f);
	free(line);
	return cli_read(out, n);
}

/* The same without a mount: a file-size limit just above the results
 * file's size makes the append's first write come back short (100 bytes)
 * and the next fail (EFBIG). The fragment must be truncated away. */
Test(files, short_write_undone, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[600], a_out[700], rescue[600], err[65536];
	char *before, *after;
	size_t n0, n1;
	const char *const args[] = {"run", "corpus=synthetic", a_out, TINY,
				    NULL};
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(a_out, sizeof(a_out), "out=%s", out);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	before = fill_with_records(out, &n0);
	cr_assert_eq(cli_run(args, (long)n0 + 100, err, sizeof(err)), 1, "%s",
		     err);
	rescue_path(rescue, sizeof(rescue));
	cr_assert(strstr(err, "the file is unchanged") && strstr(err, rescue),
		  "stderr: %s", err);
	after = cli_read(out, &n1);
	cr_assert(n1 == n0 && !memcmp(before, after, n0),
		  "out= changed: %zu bytes before, %zu after", n0, n1);
	expect_records(rescue, 1);
	free(before);
	free(after);
}

/* A suite whose out= stops taking records (a file-size limit as a full
 * disk) stops after that run instead of running the rest into the rescue
 * file, keeps out= as it was and says how to go on (--resume). */
Test(files, suite_stops_when_out_fails, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	/* err holds the record stderr prints whole and the lines after it
	 * (the record's work object took the text past 8 KiB) */
	char out[600], a_out[700], sp[600], rescue[600], err[16384];
	char *before, *after;
	size_t n0, n1;
	const char *const one[] = {"run", "corpus=synthetic", a_out, TINY,
				   NULL};
	const char *const suite[] = {"suite", sp, a_out, NULL};
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(a_out, sizeof(a_out), "out=%s", out);
	cli_path(sp, sizeof(sp), "s.json");
	cli_write_text(sp, "{\"name\": \"full\", \"base\": {\"corpus\": "
			   "\"synthetic\", \"d_model\": 16, \"n_heads\": 2, "
			   "\"d_ff\": 32, \"seq_len\": 8, \"batch_size\": 4, "
			   "\"steps\": 3, \"warmup_steps\": 1, "
			   "\"eval_tokens\": 32, \"threads\": 1}, \"axes\": "
			   "{\"layers\": [2, 3, 4]}}");
	cr_assert_eq(cli_run(one, 0, err, sizeof(err)), 0, "%s", err);
	before = fill_with_records(out, &n0);
	cr_assert_eq(cli_run(suite, (long)n0 + 100, err, sizeof(err)), 1, "%s",
		     err);
	cr_assert(strstr(err, "stopped after run 0") && strstr(err, "--resume"),
		  "stderr: %s", err);
	cr_assert_null(strstr(err, "(index 1)"), "run 1 ran: %s", err);
	after = cli_read(out, &n1);
	cr_assert(n1 == n0 && !memcmp(before, after, n0), "out= changed");
	rescue_path(rescue, sizeof(rescue));
	expect_records(rescue, 1);
	free(before);
	free(after);
}

/* ---- c. outputs never replace special files -------------------------------- */

/* Identity of what is at path: type, inode and device numbers. */
static void node_id(const char *path, struct stat *st)
{
	cr_assert_eq(lstat(path, st), 0, "%s vanished", path);
}

static void same_node(const char *path, const struct stat *a)
{
	struct stat b;
	node_id(path, &b);
	cr_assert(a->st_mode == b.st_mode && a->st_ino == b.st_ino &&
		      a->st_rdev == b.st_rdev,
		  "%s was replaced", path);
}

/* No name in cli_dir contains ".tmp". */
static void no_tmp_left(void)
{
	DIR *d = opendir(cli_dir);
	struct dirent *de;
	cr_assert_not_null(d);
	while ((de = readdir(d)))
		cr_assert_null(strstr(de->d_name, ".tmp"), "%s left behind",
			       de->d_name);
	closedir(d);
}

/* args (out= the link `link` to the regular file `target`) exit 0: the
 * link stays a link and target holds a safetensors file, with tensor
 * `tensor` when not NULL. */
static void link_followed(const char *const *args, const char *link,
			  const char *target, const char *tensor)
{
	char err[4096];
	struct stat st;
	struct st_file f;
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(lstat(link, &st), 0);
	cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
	cr_assert_eq(st_read(&f, target, err, sizeof(err)), 0, "%s", err);
	if (tensor)
		cr_assert_not_null(st_find(&f, tensor));
	st_close(&f);
}

#define PARAMS_CFG "corpus=synthetic", "vocab_size=10", TINY

/* out= of params init and grad: a FIFO, a character device, a directory,
 * a dangling link and a link to a FIFO are refused (exit 2, one line) and
 * left as they were; a link to a regular file is followed: the target is
 * replaced and the link stays. */
Test(files, outputs_never_replace_special_files, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	static const char *const names[] = {"fifo", "dev", "dir", "dangling",
					    "to_fifo"};
	static const char *const says[] = {"FIFO", "character device",
					   "directory", "does not resolve",
					   "FIFO"};
	char p[5][600], a[700], params[600], tokens[600], link[600];
	char a_params[700], a_tokens[700], err[4096];
	struct stat st;
	for (int i = 0; i < 5; i++)
		cli_path(p[i], sizeof(p[i]), names[i]);
	cr_assert_eq(mkfifo(p[0], 0644), 0);
	/* a node with /dev/null's numbers, inside the temp dir */
	if (mknod(p[1], S_IFCHR | 0666, makedev(1, 3)) != 0) {
		cr_log_warn("mknod not permitted (%s): character device case "
			    "skipped",
			    strerror(errno));
		p[1][0] = 0;
	}
	cr_assert_eq(mkdir(p[2], 0777), 0);
	cr_assert_eq(symlink("missing", p[3]), 0);
	cr_assert_eq(symlink("fifo", p[4]), 0);
	for (int i = 0; i < 5; i++) {
		const char *const args[] = {"params", "init", PARAMS_CFG, a,
					    NULL};
		if (!p[i][0])
			continue;
		node_id(p[i], &st);
		cr_assert_lt(snprintf(a, sizeof(a), "out=%s", p[i]),
			     (int)sizeof(a));
		expect_refused(args, says[i]);
		same_node(p[i], &st);
	}

	/* a link to a regular file: the target is written, the link stays */
	cli_path(params, sizeof(params), "p.safetensors");
	cli_path(link, sizeof(link), "link");
	cli_write(params, "", 0); /* G2: only a safetensors or empty file */
	cr_assert_eq(symlink("p.safetensors", link), 0);
	snprintf(a, sizeof(a), "out=%s", link);
	{
		const char *const args[] = {"params", "init", PARAMS_CFG, a,
					    NULL};
		link_followed(args, link, params, NULL);
	}

	/* grad: refused before any work; a link is followed */
	cli_path(tokens, sizeof(tokens), "t.safetensors");
	{
		int32_t tok[4 * 9];
		int64_t shape[2] = {4, 9};
		struct st_writer *w = st_writer_new();
		for (int i = 0; i < 36; i++)
			tok[i] = (i * 7 + 3) % 10;
		cr_assert_eq(st_writer_add(w, "tokens", ST_I32, 2, shape, tok,
					   err, sizeof(err)),
			     0);
		cr_assert_eq(st_writer_write(w, tokens, err, sizeof(err)), 0,
			     "%s", err);
		st_writer_free(w);
	}
	snprintf(a_params, sizeof(a_params), "params=%s", params);
	snprintf(a_tokens, sizeof(a_tokens), "tokens=%s", tokens);
	snprintf(a, sizeof(a), "out=%s", p[0]);
	{
		const char *const args[] = {"grad",   PARAMS_CFG, a_params,
					    a_tokens, a,	  NULL};
		node_id(p[0], &st);
		expect_refused(args, "FIFO");
		same_node(p[0], &st);
	}
	cli_path(link, sizeof(link), "glink");
	cli_path(params, sizeof(params), "g.safetensors");
	cli_write(params, "", 0); /* G2: only a safetensors or empty file */
	cr_assert_eq(symlink("g.safetensors", link), 0);
	snprintf(a_params, sizeof(a_params), "params=%s/p.safetensors",
		 cli_dir);
	snprintf(a, sizeof(a), "out=%s", link);
	{
		const char *const args[] = {"grad",   PARAMS_CFG, a_params,
					    a_tokens, a,	  NULL};
		link_followed(args, link, params, "loss");
	}
	no_tmp_left();
}

/* ---- d. a failed append keeps the record ----------------------------------- */

/* run and suite with out=/dev/full: the device opens, every append fails.
 * Each record is kept (rescue file and stderr), the exit status is 1 and
 * nothing claims the records were appended. */
Test(files, failed_append_keeps_record, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char rescue[600], suite[600], err[16384], so[600], *text;
	const char *const run[] = {"run", "corpus=synthetic", "out=/dev/full",
				   TINY, NULL};
	const char *const st[] = {"suite", suite, "out=/dev/full", NULL};
	static const char suite_text[] =
	    "{\"name\":\"full\",\"base\":{\"corpus\":\"synthetic\","
	    "\"d_model\":16,\"n_heads\":2,\"d_ff\":32,\"seq_len\":8,"
	    "\"batch_size\":4,\"layers\":2,\"steps\":2,"
	    "\"warmup_steps\":1,\"eval_tokens\":32,\"threads\":1},"
	    "\"axes\":{\"method\":[\"unroll\",\"checkpoint\"]}}";
	struct stat sb;
	if (stat("/dev/full", &sb) != 0 || !S_ISCHR(sb.st_mode))
		cr_skip_test("no /dev/full on this host");
	rescue_path(rescue, sizeof(rescue));
	cli_path(so, sizeof(so), "stdout.txt");

	cr_assert_eq(cli_run(run, 0, err, sizeof(err)), 1, "%s", err);
	cr_assert(strstr(err, "out=/dev/full: cannot append") &&
		      strstr(err, rescue),
		  "stderr: %s", err);
	cr_assert(strstr(err, "\n{\"schema\":"), "record not on stderr: %s",
		  err);
	text = cli_read(so, NULL);
	cr_assert_null(strstr(text, "appended"), "stdout: %s", text);
	free(text);
	expect_records(rescue, 1);

	cli_path(suite, sizeof(suite), "s.json");
	cli_write(suite, suite_text, strlen(suite_text));
	cr_assert_eq(cli_run(st, 0, err, sizeof(err)), 1, "%s", err);
	/* the suite stops after its first unsaved run (the second would
	 * only go to the rescue file too) */
	cr_assert(strstr(err, "1 of 1 records could not be appended") &&
		      strstr(err, "stopped after run 0"),
		  "stderr: %s", err);
	text = cli_read(so, NULL);
	cr_assert_null(strstr(text, "appended"), "stdout: %s", text);
	free(text);
	expect_records(rescue, 2);
}

/* G21: a run whose only record cannot be appended (a file-size limit as a
 * full disk) leaves no empty out= behind: out= is created only when its
 * first record is appended, and so is the rescue file. */
Test(files, failed_first_append_leaves_no_file, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[600], a_out[700], rescue[600], err[4096];
	const char *const args[] = {"run", "corpus=synthetic", a_out, TINY,
				    NULL};
	cli_path(out, sizeof(out), "new/r.jsonl");
	snprintf(a_out, sizeof(a_out), "out=%s", out);
	rescue_path(rescue, sizeof(rescue));
	/* stderr's file is under the limit too: its first 100 bytes only */
	cr_assert_eq(cli_run(args, 100, err, sizeof(err)), 1, "%s", err);
	cr_assert(!cli_exists(out), "an empty out= was left behind");
	cr_assert(!cli_exists(rescue), "an empty rescue file was left behind");
}

/* ---- f. refusals leave nothing; stale temporary files ---------------------- */

/* report of a directory or of a file without records: exit 2, one line. */
Test(files, report_refuses_directory_and_empty, .init = cli_setup,
     .fini = cli_teardown)
{
	char empty[600];
	const char *const dir[] = {"report", cli_dir, NULL};
	const char *const emp[] = {"report", empty, NULL};
	cli_path(empty, sizeof(empty), "empty.jsonl");
	cli_write(empty, "\n\n", 2);
	expect_refused(dir, "is a directory");
	expect_refused(emp, "no records");
}

/* A record line holding a NUL byte is malformed (it was read up to the
 * NUL and the rest ignored). */
Test(files, report_refuses_nul_in_a_line, .init = cli_setup,
     .fini = cli_teardown)
{
	char p[600];
	const char *const rep[] = {"report", p, NULL};
	static const char text[] = "{\"config\": {}}\0junk\n";
	cli_path(p, sizeof(p), "nul.jsonl");
	cli_write(p, text, sizeof(text) - 1);
	expect_refused(rep, "nul.jsonl:1:");
}

/* A run refused after its config parsed (vocab_size below the corpus's,
 * found while loading it) creates neither out= nor its directories; nor
 * does record_check_out, which only probes. */
Test(files, refused_run_leaves_nothing, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	char dir[600], top[600], a_dir[700], a_out[700], err[512], p[700];
	const char *const args[] = {"run",	    "corpus=text", a_dir, a_out,
				    "vocab_size=3", TINY,	   NULL};
	write_corpus(dir, sizeof(dir));
	cli_path(top, sizeof(top), "new");
	snprintf(a_dir, sizeof(a_dir), "data_dir=%s", dir);
	snprintf(a_out, sizeof(a_out), "out=%s/a/b/r.jsonl", top);
	expect_refused(args, "vocab_size=3");
	cr_assert(!cli_exists(top), "%s left behind", top);

	snprintf(p, sizeof(p), "%s/x/y/r.jsonl", top);
	cr_assert_eq(record_check_out(p, err, sizeof(err)), 0, "%s", err);
	cr_assert(!cli_exists(top), "record_check_out left %s behind", top);

	/* an existing file is left as it is; a file where a directory
	 * should be is named */
	cli_path(p, sizeof(p), "f.jsonl");
	cli_write_text(p, "{\"schema\":1,\"config\":{}}\n");
	cr_assert_eq(record_check_out(p, err, sizeof(err)), 0, "%s", err);
	{
		size_t n;
		char *t = cli_read(p, &n);
		cr_assert(n == 25 && !memcmp(t, "{\"schema\"", 9),
			  "f.jsonl changed");
		free(t);
	}
	snprintf(p, sizeof(p), "%s/f.jsonl/r.jsonl", cli_dir);
	cr_assert_eq(record_check_out(p, err, sizeof(err)), -1);
	cr_assert(strstr(err, "f.jsonl") && strstr(err, "out="), "%s", err);
}

/* This host as it appears in temporary names (fileio.c: letters, digits,
 * '-' and '.', others '_'). */
static void host_tag(char *buf, size_t n)
{
	cr_assert_eq(gethostname(buf, n), 0);
	buf[n - 1] = 0;
	for (char *p = buf; *p; p++)
		if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
		    !(*p >= '0' && *p <= '9') && *p != '-' && *p != '.')
			*p = '_';
}

/* A process id that no longer exists: a child that exited and was
 * reaped (ids are not reused this fast). */
static long dead_pid(void)
{
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0)
		_exit(0);
	cr_assert_eq(waitpid(pid, NULL, 0), pid);
	return (long)pid;
}

/* Creates dir/name (a small regular file). */
static void touch(const char *dir, const char *name)
{
	char p[900];
	cr_assert_lt(snprintf(p, sizeof(p), "%s/%s", dir, name),
		     (int)sizeof(p));
	cli_write(p, "partial", 7);
}

static int exists_in(const char *dir, const char *name)
{
	char p[900];
	cr_assert_lt(snprintf(p, sizeof(p), "%s/%s", dir, name),
		     (int)sizeof(p));
	return cli_exists(p);
}

/* What a SIGKILL during a cache build or a safetensors write leaves
 * behind: temporary files of a dead process. The next load of the corpus
 * and the next write of the output remove them; those of live processes,
 * of other hosts, names that are not ours and links are kept. */
Test(files, stale_tmp_files_removed, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char dir[600], cache[700], a_dir[700], a_out[700], out[600];
	char host[256], n[16][400], victim[600], err[4096];
	long dead = dead_pid(), live = (long)getpid();
	const char *const run[] = {"run",	    "corpus=text", a_dir,
				   "out=/dev/null", TINY,	   NULL};
	const char *const init[] = {"params", "init", PARAMS_CFG, a_out, NULL};
	host_tag(host, sizeof(host));
	write_corpus(dir, sizeof(dir));
	snprintf(a_dir, sizeof(a_dir), "data_dir=%s", dir);
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	cr_assert_eq(cli_run(run, 0, err, sizeof(err)), 0, "%s", err);

	/* stale: n[0..2]; kept: n[3..5] */
	snprintf(n[0], 400, "train.ids.tmp.%ld", dead); /* older format */
	snprintf(n[1], 400, "vocab.txt.tmp.%s.%ld", host, dead);
	snprintf(n[2], 400, "test.ids.tmp.%s.%ld", host, dead);
	snprintf(n[3], 400, "valid.ids.tmp.other-host.%ld", dead);
	snprintf(n[4], 400, "train.ids.tmp.%s.%ld", host, live);
	snprintf(n[5], 400, "train.ids.tmpx.%ld", dead);
	for (int i = 0; i < 6; i++)
		touch(cache, n[i]);
	cr_assert_eq(cli_run(run, 0, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < 6; i++)
		cr_assert_eq(exists_in(cache, n[i]), i >= 3, "%s %s", n[i],
			     i >= 3 ? "removed" : "left behind");

	/* safetensors output: P.tmp (older versions) and P.tmp.HOST.PID */
	cli_path(out, sizeof(out), "p.safetensors");
	cli_path(victim, sizeof(victim), "victim");
	cli_write(victim, "keep", 4);
	snprintf(a_out, sizeof(a_out), "out=%s", out);
	snprintf(n[6], 400, "p.safetensors.tmp");
	snprintf(n[7], 400, "p.safetensors.tmp.%s.%ld", host, dead);
	snprintf(n[8], 400, "p.safetensors.tmp.%s.%ld", host, live);
	snprintf(n[9], 400, "p.safetensors.tmp.%ld", dead);
	for (int i = 6; i < 9; i++)
		touch(cli_dir, n[i]);
	{
		char l[900];
		snprintf(l, sizeof(l), "%s/%s", cli_dir, n[9]);
		cr_assert_eq(symlink("victim", l), 0); /* a link: kept */
	}
	cr_assert_eq(cli_run(init, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert(!exists_in(cli_dir, n[6]) && !exists_in(cli_dir, n[7]),
		  "stale safetensors temporaries left behind");
	cr_assert(exists_in(cli_dir, n[8]) && exists_in(cli_dir, n[9]),
		  "a live process's temporary or a link was removed");
	{
		size_t len;
		char *t = cli_read(victim, &len);
		cr_assert(len == 4 && !memcmp(t, "keep", 4));
		free(t);
	}
}
