/*
 * test_outputs.c — the files a command reads and writes: no
 * output may name the same file as an input or another output, an out=
 * that is not a file of records is refused, inputs are regular files (a
 * FIFO is refused, never waited on), save_params= is checked before any
 * training, a record appended after a cut last line starts a line of its
 * own, runs started together into a new directory all append, plan --run
 * keeps a record it cannot append, and the first SIGTERM ends a wait for
 * the lock on out=. Every test runs the deqbench binary (test_cli.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <sys/file.h>

#include "record.h"
#include "safetensors.h"
#include "test_cli.h"

#define TINY                                                                   \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=2", "layers=3", "steps=3", "warmup_steps=1",           \
	    "lr_warmup=1", "eval_tokens=64", "threads=1", "eval_warmup=0"

/* The tiny config, tiny.json, as a config file and a suite base. */
#define TINY_JSON                                                              \
	"{\"corpus\":\"synthetic\",\"d_model\":16,\"n_heads\":2,\"d_ff\":32,"  \
	"\"seq_len\":8,\"batch_size\":2,\"layers\":3,\"steps\":3,"             \
	"\"warmup_steps\":1,\"lr_warmup\":1,\"eval_tokens\":64,\"threads\":1," \
	"\"eval_warmup\":0}"

/* ---- helpers ------------------------------------------------------------- */

static void rescue_path(char *buf, size_t n)
{
	snprintf(buf, n, "%s/deqbench-unsaved-%ld.jsonl", cli_dir,
		 (long)getuid());
}

/* The number of records of a JSONL file; fails the test when a line is
 * not one JSON object. */
static size_t count_records(const char *path)
{
	json_t *arr = json_array();
	char err[1024];
	size_t n;
	cr_assert_eq(record_read_jsonl(path, arr, err, sizeof(err)), 0, "%s",
		     err);
	n = json_array_size(arr);
	json_decref(arr);
	return n;
}

/* Runs deqbench with args, its stdout and stderr in cli_dir/TAG.out and
 * TAG.err; returns its pid at once. */
static pid_t spawn(const char *const *args, const char *tag)
{
	char *argv[64], o[600], e[600];
	const char *bin = cli_argv(args, argv);
	pid_t pid;
	snprintf(o, sizeof(o), "%s/%s.out", cli_dir, tag);
	snprintf(e, sizeof(e), "%s/%s.err", cli_dir, tag);
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int o1 = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int o2 = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (o1 < 0 || o2 < 0 || dup2(o1, 1) < 0 || dup2(o2, 2) < 0)
			_exit(126);
		execv(bin, argv);
		_exit(127);
	}
	return pid;
}

/* Waits up to secs seconds for pid; its wait status, or -1 (and the
 * process killed) when it is still running: a command that blocks. */
static int wait_bounded(pid_t pid, int secs)
{
	int st;
	for (int t = 0; t < secs * 20; t++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		cr_assert(r >= 0);
		if (r == pid)
			return st;
		usleep(50000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* Exit 2 with one line on stderr holding must_contain, within 60 s (a
 * command that blocks on a FIFO fails here instead of hanging). */
static void expect_refused(const char *const *args, const char *must_contain)
{
	char ep[600], *err, *nl;
	int st = wait_bounded(spawn(args, "refused"), 60);
	cr_assert_neq(st, -1, "%s %s blocked (killed after 60 s)", args[0],
		      args[1]);
	cli_path(ep, sizeof(ep), "refused.err");
	err = cli_read(ep, NULL);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2,
		  "%s %s: status %#x, stderr: %s", args[0], args[1], st, err);
	nl = strchr(err, '\n');
	cr_assert(nl && !nl[1], "one line expected, got: %s", err);
	cr_assert(strstr(err, must_contain), "'%s' not in: %s", must_contain,
		  err);
	free(err);
}

/* cli_dir/name written by params init (a safetensors file); its path in
 * path. */
static void params_file(char *path, size_t n, const char *name)
{
	char a[700], err[4096];
	const char *const args[] = {"params", "init", TINY, a, NULL};
	cli_path(path, n, name);
	snprintf(a, sizeof(a), "out=%s", path);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
}

/* ---- 1. one file for two roles ------------------------------------------- */

/* out=, save_params=, params=, tokens=, the config and the suite file
 * naming one file (the same path, a link, a path through a missing
 * directory and "..") are refused up front, and the file is left as it
 * was: run, eval, grad, params init, suite and plan --run. */
Test(outputs, same_file_refused, .init = cli_setup, .fini = cli_teardown,
     .timeout = 300)
{
	char cfg[600], out[600], p[600], link[600], suite[600], a1[700];
	char a2[700], a3[700], err[4096];
	struct snap s;
	cli_path(cfg, sizeof(cfg), "tiny.json");
	cli_write_text(cfg, TINY_JSON);
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(a1, sizeof(a1), "out=%s", out);
	{
		const char *const args[] = {"run", cfg, a1, NULL};
		cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	}
	params_file(p, sizeof(p), "p.safetensors");

	/* run: save_params= is out= (the records it would overwrite) */
	s = snap_of(out);
	snprintf(a2, sizeof(a2), "save_params=%s", out);
	{
		const char *const args[] = {"run", cfg, a1, a2, NULL};
		expect_refused(args, "name the same file");
	}
	/* ... through a link and through a missing directory and ".." */
	cli_path(link, sizeof(link), "link.jsonl");
	cr_assert_eq(symlink("r.jsonl", link), 0);
	snprintf(a2, sizeof(a2), "save_params=%s", link);
	{
		const char *const args[] = {"run", cfg, a1, a2, NULL};
		expect_refused(args, "name the same file");
	}
	snprintf(a2, sizeof(a2), "save_params=%s/new/../r.jsonl", cli_dir);
	{
		const char *const args[] = {"run", cfg, a1, a2, NULL};
		expect_refused(args, "name the same file");
	}
	expect_same(out, &s);

	/* run and eval: params= is out=; run: out= is the config file */
	s = snap_of(p);
	snprintf(a2, sizeof(a2), "params=%s", p);
	snprintf(a3, sizeof(a3), "out=%s", p);
	{
		const char *const r[] = {"run", cfg, a2, a3, NULL};
		const char *const e[] = {"eval", cfg, a2, a3, NULL};
		expect_refused(r, "name the same file");
		expect_refused(e, "name the same file");
	}
	expect_same(p, &s);
	s = snap_of(cfg);
	snprintf(a3, sizeof(a3), "out=%s", cfg);
	{
		const char *const r[] = {"run", cfg, a3, NULL};
		expect_refused(r, "the config file");
	}
	/* params init and grad: out= is the config or the parameters */
	{
		const char *const r[] = {"params", "init", cfg, a3, NULL};
		expect_refused(r, "the config file");
	}
	expect_same(cfg, &s);
	s = snap_of(p);
	snprintf(a1, sizeof(a1), "tokens=%s", p);
	snprintf(a3, sizeof(a3), "out=%s", p);
	{
		const char *const r[] = {"grad", cfg, a2, a1, a3, NULL};
		expect_refused(r, "name the same file");
	}
	expect_same(p, &s);

	/* suite: out= is the suite file; plan --run: out= is the config */
	cli_path(suite, sizeof(suite), "s.json");
	cli_write_text(suite, "{\"name\":\"same\",\"base\":" TINY_JSON ","
			      "\"axes\":{\"layers\":[2,3]}}");
	s = snap_of(suite);
	snprintf(a1, sizeof(a1), "out=%s", suite);
	{
		const char *const r[] = {"suite", suite, a1, NULL};
		expect_refused(r, "the suite file");
	}
	expect_same(suite, &s);
	s = snap_of(cfg);
	snprintf(a1, sizeof(a1), "out=%s", cfg);
	{
		const char *const r[] = {"plan", cfg,	    "budget_mib=100",
					 a1,	 "--run=1", NULL};
		expect_refused(r, "the config file");
	}
	expect_same(cfg, &s);
}

/* An existing out= that is not a file of records (a safetensors file, a
 * JSON config over several lines, text) is refused and left as it was;
 * an empty or blank file and one of records are taken. */
Test(outputs, out_not_jsonl_refused, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	static const char *const bad[] = {"{\n  \"corpus\": \"synthetic\"\n}\n",
					  "hello\n", "[1, 2]\n"};
	static const char *const good[] = {"", "\n \n",
					   "{\"schema\":1,\"config\":null}\n"};
	char p[600], a[700], err[4096];
	const char *const args[] = {"run", TINY, a, NULL};
	struct snap s;
	params_file(p, sizeof(p), "p.safetensors");
	snprintf(a, sizeof(a), "out=%s", p);
	s = snap_of(p);
	expect_refused(args, "not a JSONL file");
	expect_same(p, &s);
	cli_path(p, sizeof(p), "f.jsonl");
	snprintf(a, sizeof(a), "out=%s", p);
	for (int i = 0; i < 3; i++) {
		cli_write_text(p, bad[i]);
		s = snap_of(p);
		expect_refused(args, "not a JSONL file");
		expect_same(p, &s);
	}
	for (int i = 0; i < 3; i++) {
		cli_write_text(p, good[i]);
		cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0,
			     "content %d: %s", i, err);
		cr_assert_eq(count_records(p), (size_t)(i == 2 ? 2 : 1));
	}
}

/* G3: a config or suite file written on one line, and other one-line
 * objects that are not records ("{}", an object without "config"), are
 * not files of records: out= naming one is refused up front and the file
 * is left as it was; run and suite. */
Test(outputs, one_line_json_not_records, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	static const char *const bad[] = {TINY_JSON "\n",
					  "{\"name\":\"s\",\"base\":" TINY_JSON
					  ",\"axes\":{}}\n",
					  "{}\n", "\n{\"schema\":1}\n"};
	char p[600], s2[600], a[700];
	const char *const run[] = {"run", TINY, a, NULL};
	struct snap s;
	cli_path(p, sizeof(p), "one.json");
	snprintf(a, sizeof(a), "out=%s", p);
	for (int i = 0; i < 4; i++) {
		cli_write_text(p, bad[i]);
		s = snap_of(p);
		expect_refused(run, "not a JSONL file of records");
		expect_same(p, &s);
	}
	cli_path(s2, sizeof(s2), "s.json");
	cli_write_text(s2, "{\"name\":\"s\",\"base\":" TINY_JSON
			   ",\"axes\":{\"layers\":[2]}}");
	cli_write_text(p, bad[1]);
	s = snap_of(p);
	{
		const char *const suite[] = {"suite", s2, a, NULL};
		expect_refused(suite, "not a JSONL file of records");
	}
	expect_same(p, &s);
}

/* G21: report, compare and suite --resume refuse a records file with one
 * malformed line, so run and suite refuse to append to it (exit 2, one
 * line naming the line and the fix) instead of adding records nobody can
 * read: a line in the middle, and a partial last line another tool left. */
Test(outputs, malformed_line_refused, .init = cli_setup, .fini = cli_teardown,
     .timeout = 300)
{
	char out[600], s2[600], a[700], err[4096], *rec;
	const char *const run[] = {"run", TINY, a, NULL};
	const char *const suite[] = {"suite", s2, a, NULL};
	struct snap s;
	FILE *f;
	size_t n;
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(a, sizeof(a), "out=%s", out);
	cr_assert_eq(cli_run(run, 0, err, sizeof(err)), 0, "%s", err);
	rec = cli_read(out, &n);
	f = fopen(out, "ab");
	cr_assert_not_null(f);
	fputs("not json\n", f);
	fwrite(rec, 1, n, f);
	fclose(f);
	s = snap_of(out);
	expect_refused(run, "r.jsonl:2:");
	expect_refused(run, "malformed");
	cli_path(s2, sizeof(s2), "s.json");
	cli_write_text(s2, "{\"name\":\"s\",\"base\":" TINY_JSON
			   ",\"axes\":{\"layers\":[2]}}");
	expect_refused(suite, "r.jsonl:2:");
	expect_same(out, &s);

	cli_write(out, rec, n);
	f = fopen(out, "ab");
	cr_assert_not_null(f);
	fwrite(rec, 1, n / 2, f);
	fclose(f);
	s = snap_of(out);
	expect_refused(run, "r.jsonl:2:");
	expect_same(out, &s);
	free(rec);
}

/* ---- 6. a record after a cut last line --------------------------------- */

/* A file whose last byte is not a newline (truncate -s -1): the next
 * record starts a line of its own, in a run and in process. */
Test(outputs, append_after_cut_line, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[600], a[700], err[4096];
	const char *const args[] = {"run", TINY, a, NULL};
	json_t *r = record_new();
	size_t n;
	char *text;
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(a, sizeof(a), "out=%s", out);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	text = cli_read(out, &n);
	cr_assert(n > 1 && text[n - 1] == '\n');
	cr_assert_eq(truncate(out, (off_t)n - 1), 0);
	free(text);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(count_records(out), 2);

	cli_path(out, sizeof(out), "x.jsonl");
	cli_write_text(out, "{\"a\": 1}");
	cr_assert_eq(record_append(out, r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(count_records(out), 2);
	json_decref(r);
}

/* ---- 7. runs started together into a new directory ---------------------- */

/* Six runs started at once with out= in a directory that does not exist
 * yet, ten times: every run exits 0, all six records are in out=, none in
 * the rescue file. */
Test(outputs, concurrent_runs_new_directory, .init = cli_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char out[600], a[700], rescue[600], tag[32];
	rescue_path(rescue, sizeof(rescue));
	for (int t = 0; t < 10; t++) {
		pid_t pid[6];
		snprintf(out, sizeof(out), "%s/t%d/a/b/r.jsonl", cli_dir, t);
		snprintf(a, sizeof(a), "out=%s", out);
		for (int i = 0; i < 6; i++) {
			const char *const args[] = {"run", TINY, a, NULL};
			snprintf(tag, sizeof(tag), "c%d", i);
			pid[i] = spawn(args, tag);
		}
		for (int i = 0; i < 6; i++) {
			int st;
			char ep[600], *e;
			cr_assert_eq(waitpid(pid[i], &st, 0), pid[i]);
			snprintf(ep, sizeof(ep), "%s/c%d.err", cli_dir, i);
			e = cli_read(ep, NULL);
			cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
				  "try %d run %d: status %#x: %s", t, i, st,
				  e ? e : "");
			free(e);
		}
		cr_assert_eq(count_records(out), 6, "try %d", t);
		cr_assert(!cli_exists(rescue), "try %d: records rescued", t);
	}
}

/* ---- 8. plan --run keeps a record it cannot append ---------------------- */

/* plan --run 1 with out=/dev/full: the record is in the rescue file and
 * on stderr, exit 1, and nothing claims the records were appended. */
Test(outputs, plan_run_keeps_unsaved_record, .init = cli_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char rescue[600], so[600], err[16384], *text;
	const char *const args[] = {
	    "plan",	     "budget_mib=100", TINY, "price_cap_s=1",
	    "out=/dev/full", "--run",	       "1",  NULL};
	struct stat sb;
	if (stat("/dev/full", &sb) != 0 || !S_ISCHR(sb.st_mode))
		cr_skip_test("no /dev/full on this host");
	rescue_path(rescue, sizeof(rescue));
	cli_path(so, sizeof(so), "stdout.txt");
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 1, "%s", err);
	cr_assert(strstr(err, "out=/dev/full: cannot append") &&
		      strstr(err, rescue),
		  "stderr: %s", err);
	cr_assert(strstr(err, "\n{\"schema\":"), "record not on stderr: %s",
		  err);
	text = cli_read(so, NULL);
	cr_assert_null(strstr(text, "appended"), "stdout: %s", text);
	free(text);
	cr_assert_eq(count_records(rescue), 1);
}

/* ---- 13. FIFOs and directories as inputs -------------------------------- */

/* params= (run, eval), tokens= (grad) and the files of report and validate
 * given a FIFO nobody writes: refused at once (exit 2, one line), never
 * waited on. */
Test(outputs, fifo_inputs_refused, .init = cli_setup, .fini = cli_teardown,
     .timeout = 300)
{
	char fifo[600], p[600], a1[700], a2[700], a3[700];
	cli_path(fifo, sizeof(fifo), "fifo");
	cr_assert_eq(mkfifo(fifo, 0644), 0);
	params_file(p, sizeof(p), "p.safetensors");
	snprintf(a1, sizeof(a1), "params=%s", fifo);
	snprintf(a3, sizeof(a3), "out=%s/g.safetensors", cli_dir);
	{
		const char *const r[] = {"run", TINY, a1, NULL};
		const char *const e[] = {"eval", TINY, a1, NULL};
		expect_refused(r, "params=");
		expect_refused(r, "FIFO");
		expect_refused(e, "FIFO");
	}
	snprintf(a1, sizeof(a1), "params=%s", p);
	snprintf(a2, sizeof(a2), "tokens=%s", fifo);
	{
		const char *const g[] = {"grad", TINY, a1, a2, a3, NULL};
		expect_refused(g, "tokens=");
		expect_refused(g, "FIFO");
	}
	{
		const char *const r[] = {"report", fifo, NULL};
		const char *const v[] = {"validate", fifo, NULL};
		expect_refused(r, "FIFO");
		expect_refused(v, "FIFO");
	}
}

/* ---- 16. save_params= checked up front ---------------------------------- */

/* save_params= an existing directory, a FIFO, a dangling link or a link
 * to a directory: refused before training (exit 2, one line, no record),
 * as out= is. */
Test(outputs, bad_save_params_refused_up_front, .init = cli_setup,
     .fini = cli_teardown, .timeout = 300)
{
	static const char *const names[] = {"dir", "fifo", "dangling",
					    "to_dir"};
	static const char *const says[] = {"directory", "FIFO",
					   "does not resolve", "directory"};
	char p[4][600], out[600], a1[700], a2[700];
	const char *const args[] = {"run", TINY, a1, a2, NULL};
	for (int i = 0; i < 4; i++)
		cli_path(p[i], sizeof(p[i]), names[i]);
	cr_assert_eq(mkdir(p[0], 0777), 0);
	cr_assert_eq(mkfifo(p[1], 0644), 0);
	cr_assert_eq(symlink("missing", p[2]), 0);
	cr_assert_eq(symlink("dir", p[3]), 0);
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(a1, sizeof(a1), "out=%s", out);
	for (int i = 0; i < 4; i++) {
		snprintf(a2, sizeof(a2), "save_params=%.600s", p[i]);
		expect_refused(args, says[i]);
		expect_refused(args, "save_params=");
		cr_assert(!cli_exists(out), "%s: a run trained", names[i]);
	}
}

/* ---- messages -------------------------------------------------------------- */

/* Messages: out= a dangling symbolic link says so (not "File exists")
 * and how to fix it, and nothing is created; eval params=<directory> says
 * it is a directory (not "too short for a safetensors file"); plan takes
 * --run=N as suite takes --shard=I/N. */
Test(outputs, messages_name_the_problem, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char l[600], a[700], p[700], err[4096];
	const char *const run[] = {"run", TINY, a, NULL};
	const char *const eval[] = {"eval", TINY, p, NULL};
	const char *const plan[] = {"plan", "budget_mib=100", TINY,
				    a,	    "--run=1",	      NULL};
	cli_path(l, sizeof(l), "dl.jsonl");
	cr_assert_eq(symlink("nowhere.jsonl", l), 0);
	snprintf(a, sizeof(a), "out=%s", l);
	expect_refused(run, "dangling symbolic link");
	expect_refused(run, "nowhere.jsonl");
	cli_path(l, sizeof(l), "nowhere.jsonl");
	cr_assert(!cli_exists(l), "the link's target was created");

	snprintf(p, sizeof(p), "params=%s", cli_dir);
	expect_refused(eval, "is a directory");

	cli_path(l, sizeof(l), "plan.jsonl");
	snprintf(a, sizeof(a), "out=%s", l);
	cr_assert_eq(cli_run(plan, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(count_records(l), 1);
}

/* ---- 13. the first signal ends a blocked call --------------------------- */

/* Whether /proc/locks shows pid waiting for a lock ("->" lines). -1 when
 * /proc/locks cannot be read. */
static int waits_for_lock(pid_t pid)
{
	FILE *f = fopen("/proc/locks", "r");
	char line[512], want[32];
	int found = 0;
	if (!f)
		return -1;
	snprintf(want, sizeof(want), " %ld ", (long)pid);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "->") && strstr(line, want);
	fclose(f);
	return found;
}

/* A run whose out= is locked by another process waits for the lock after
 * training; the first SIGTERM ends that wait: the record goes to the
 * rescue file and the run exits 143 while the lock is still held. */
Test(outputs, sigterm_ends_wait_for_lock, .init = cli_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char out[600], a[700], rescue[600];
	const char *const args[] = {"run", TINY, a, NULL};
	int fd, st, w = 0;
	pid_t pid;
	cli_path(out, sizeof(out), "locked.jsonl");
	rescue_path(rescue, sizeof(rescue));
	snprintf(a, sizeof(a), "out=%s", out);
	fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
	cr_assert(fd >= 0);
	cr_assert_eq(flock(fd, LOCK_EX), 0);
	pid = spawn(args, "locked");
	for (int t = 0; t < 1200 && (w = waits_for_lock(pid)) == 0; t++)
		usleep(50000);
	if (w < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		cr_skip_test("/proc/locks cannot be read");
	}
	cr_assert_eq(w, 1, "the run never waited for the lock");
	cr_assert_eq(kill(pid, SIGTERM), 0);
	st = wait_bounded(pid, 60);
	flock(fd, LOCK_UN);
	close(fd);
	cr_assert_neq(st, -1, "the first SIGTERM did not end the wait");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 143, "status %#x", st);
	cr_assert_eq(count_records(rescue), 1);
	{
		struct stat sb;
		cr_assert_eq(stat(out, &sb), 0);
		cr_assert_eq(sb.st_size, 0, "out= was written");
	}
}
