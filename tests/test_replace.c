/*
 * test_replace.c — outputs that replace a file whole (`params init` and
 * `grad` out=, save_params=, `report --html`): an existing file is
 * replaced only when it is of the output's own kind (a safetensors file; a
 * page report --html wrote), never an input of the same command, and every
 * reason the replacement could fail after the work (a name too long, a
 * file owned by another user in a sticky directory, an immutable file) is
 * found before it, with exit 2 and one line whose reason survives a long
 * path. Every test runs the deqbench binary (test_cli.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <linux/fs.h>
#include <stdint.h>
#include <dirent.h>
#include <sys/ioctl.h>

#include "config.h"
#include "runner.h"
#include "test_cli.h"

#define TINY                                                                   \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=2", "layers=3", "steps=3", "warmup_steps=1",           \
	    "lr_warmup=1", "eval_tokens=64", "threads=1", "eval_warmup=0"

#define TINY_JSON                                                              \
	"{\"corpus\":\"synthetic\",\"d_model\":16,\"n_heads\":2,\"d_ff\":32,"  \
	"\"seq_len\":8,\"batch_size\":2,\"layers\":3,\"steps\":3,"             \
	"\"warmup_steps\":1,\"lr_warmup\":1,\"eval_tokens\":64,\"threads\":1," \
	"\"eval_warmup\":0}"

/* ---- helpers ------------------------------------------------------------- */

/* Exit 2 with exactly one line on stderr holding must_contain. */
static void expect_refused(const char *const *args, const char *must_contain)
{
	char err[65536];
	int rc = cli_run(args, 0, err, sizeof(err));
	char *nl = strchr(err, '\n');
	cr_assert_eq(rc, 2, "%s %s: exit %d, stderr: %s", args[0], args[1], rc,
		     err);
	cr_assert(nl && !nl[1], "one line expected, got: %s", err);
	cr_assert(strstr(err, must_contain), "'%s' not in: %s", must_contain,
		  err);
}

/* cli_dir/name: a file of records (one run), a parameter file (params
 * init) or a token file (int32 tokens [2, 9], written by hand). */
static void records_file(char *path, size_t n, const char *name)
{
	char a[700], err[4096];
	const char *const args[] = {"run", TINY, a, NULL};
	cli_path(path, n, name);
	snprintf(a, sizeof(a), "out=%s", path);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
}

static void params_file(char *path, size_t n, const char *name)
{
	char a[700], err[4096];
	const char *const args[] = {"params", "init", TINY, a, NULL};
	cli_path(path, n, name);
	snprintf(a, sizeof(a), "out=%s", path);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
}

static void tokens_file(char *path, size_t n, const char *name)
{
	static const char hdr[] =
	    "{\"tokens\":{\"dtype\":\"I32\",\"shape\":[2,9],"
	    "\"data_offsets\":[0,72]}}";
	uint64_t hl = sizeof(hdr) - 1; /* little-endian hosts */
	int32_t tok[18];
	FILE *f;
	for (int i = 0; i < 18; i++)
		tok[i] = (i * 7 + 3) % 20;
	cli_path(path, n, name);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	fwrite(&hl, 8, 1, f);
	fwrite(hdr, 1, hl, f);
	fwrite(tok, sizeof(tok), 1, f);
	fclose(f);
}

/* ---- G2: an existing file of another kind is never replaced ------------- */

/* G2: report --html naming its own input (the same path, a link to it),
 * another records file or a config file; params init, grad and run with
 * save_params= naming a records file: each refused up front (exit 2, one
 * line) and the file left as it was; nothing trained. */
Test(replace, other_kinds_refused, .init = cli_setup, .fini = cli_teardown,
     .timeout = 300)
{
	char rec[600], other[600], cfg[600], link[600], p[600], tok[600];
	char out[600], a1[700], a2[700], a3[700], a4[700];
	struct snap s;
	records_file(rec, sizeof(rec), "victim.jsonl");
	records_file(other, sizeof(other), "other.jsonl");
	cli_path(cfg, sizeof(cfg), "cfg.json");
	cli_write_text(cfg, TINY_JSON);
	cli_path(link, sizeof(link), "link.html");
	cr_assert_eq(symlink("victim.jsonl", link), 0);
	params_file(p, sizeof(p), "p.safetensors");
	tokens_file(tok, sizeof(tok), "tok.safetensors");

	s = snap_of(rec);
	{
		const char *const self[] = {"report", "--html", rec, rec, NULL};
		const char *const ln[] = {"report", "--html", link, rec, NULL};
		expect_refused(self, "name the same file");
		expect_refused(ln, "name the same file");
	}
	expect_same(rec, &s);
	s = snap_of(other);
	{
		const char *const r[] = {"report", "--html", other, rec, NULL};
		expect_refused(r, "not a page deqbench report --html wrote");
	}
	expect_same(other, &s);
	s = snap_of(cfg);
	{
		const char *const r[] = {"report", "--html", cfg, rec, NULL};
		expect_refused(r, "not a page deqbench report --html wrote");
	}
	expect_same(cfg, &s);

	s = snap_of(other);
	snprintf(a1, sizeof(a1), "out=%s", other);
	{
		const char *const r[] = {"params", "init", TINY, a1, NULL};
		expect_refused(r, "not a safetensors file");
	}
	snprintf(a2, sizeof(a2), "params=%s", p);
	snprintf(a3, sizeof(a3), "tokens=%s", tok);
	{
		const char *const r[] = {"grad", TINY, a2, a3, a1, NULL};
		expect_refused(r, "not a safetensors file");
	}
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(a1, sizeof(a1), "out=%s", out);
	snprintf(a4, sizeof(a4), "save_params=%s", other);
	{
		const char *const r[] = {"run", TINY, a1, a4, NULL};
		expect_refused(r, "not a safetensors file");
	}
	cr_assert(!cli_exists(out), "a refused run trained");
	expect_same(other, &s);
}

/* G2: outputs of their own kind are still replaced: params init over a
 * parameter file, grad over a gradient file, save_params= over a
 * parameter file, report --html over the page it wrote before, and any of
 * them over an empty file. */
Test(replace, own_kind_replaced, .init = cli_setup, .fini = cli_teardown,
     .timeout = 300)
{
	char rec[600], p[600], tok[600], g[600], html[600], empty[600];
	char out[600], a1[700], a2[700], a3[700], err[4096];
	records_file(rec, sizeof(rec), "r.jsonl");
	params_file(p, sizeof(p), "p.safetensors");
	params_file(p, sizeof(p), "p.safetensors");
	tokens_file(tok, sizeof(tok), "tok.safetensors");
	cli_path(g, sizeof(g), "g.safetensors");
	snprintf(a1, sizeof(a1), "params=%s", p);
	snprintf(a2, sizeof(a2), "tokens=%s", tok);
	snprintf(a3, sizeof(a3), "out=%s", g);
	for (int i = 0; i < 2; i++) {
		const char *const r[] = {"grad", TINY, a1, a2, a3, NULL};
		cr_assert_eq(cli_run(r, 0, err, sizeof(err)), 0, "%s", err);
	}
	cli_path(out, sizeof(out), "r2.jsonl");
	snprintf(a1, sizeof(a1), "out=%s", out);
	snprintf(a2, sizeof(a2), "save_params=%s", p);
	{
		const char *const r[] = {"run", TINY, a1, a2, NULL};
		cr_assert_eq(cli_run(r, 0, err, sizeof(err)), 0, "%s", err);
	}
	cli_path(html, sizeof(html), "report.html");
	for (int i = 0; i < 2; i++) {
		const char *const r[] = {"report", "--html", html, rec, NULL};
		cr_assert_eq(cli_run(r, 0, err, sizeof(err)), 0, "%s", err);
	}
	cli_path(empty, sizeof(empty), "empty.html");
	cli_write_text(empty, "");
	{
		const char *const r[] = {"report", "--html", empty, rec, NULL};
		cr_assert_eq(cli_run(r, 0, err, sizeof(err)), 0, "%s", err);
	}
	cli_path(empty, sizeof(empty), "empty.safetensors");
	cli_write_text(empty, "");
	snprintf(a1, sizeof(a1), "out=%s", empty);
	{
		const char *const r[] = {"params", "init", TINY, a1, NULL};
		cr_assert_eq(cli_run(r, 0, err, sizeof(err)), 0, "%s", err);
	}
}

/* ---- G17, G20.11, G20.12: failures found before the work ---------------- */

/* G17 and G20.11: save_params= a name of 300 bytes is refused before
 * training with one line whose reason is not cut off by the name; a name
 * of 250 bytes (itself allowed, but its temporary name PATH.tmp.HOST.PID
 * longer than NAME_MAX) is saved. */
Test(replace, long_names, .init = cli_setup, .fini = cli_teardown,
     .timeout = 300)
{
	char name[301], p[900], out[600], a1[700], a2[1000], err[4096];
	const char *const args[] = {"run", TINY, a1, a2, NULL};
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(a1, sizeof(a1), "out=%s", out);
	memset(name, 'p', 300);
	name[300] = 0;
	cli_path(p, sizeof(p), name);
	snprintf(a2, sizeof(a2), "save_params=%s", p);
	expect_refused(args, "name too long");
	cr_assert(!cli_exists(out), "a refused run trained");
	name[250] = 0;
	cli_path(p, sizeof(p), name);
	snprintf(a2, sizeof(a2), "save_params=%s", p);
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert(cli_exists(p));
}

/* G20.12: report --html naming a directory that does not exist (adir/)
 * or a path longer than PATH_MAX: one line naming the user's path and the
 * reason, never a temporary file. */
Test(replace, html_path_messages, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char rec[600], dir[600], *lng;
	records_file(rec, sizeof(rec), "r.jsonl");
	cli_path(dir, sizeof(dir), "adir/");
	{
		const char *const r[] = {"report", "--html", dir, rec, NULL};
		char err[4096];
		expect_refused(r, "adir/");
		cr_assert_eq(cli_run(r, 0, err, sizeof(err)), 2);
		cr_assert_null(strstr(err, ".tmp"), "%s", err);
		cr_assert(strstr(err, "directory"), "%s", err);
	}
	cli_path(dir, sizeof(dir), "missing/x.html");
	{
		const char *const r[] = {"report", "--html", dir, rec, NULL};
		expect_refused(r, "does not exist");
	}
	lng = malloc(5000);
	cr_assert_not_null(lng);
	memset(lng, 'a', 4999);
	lng[4999] = 0;
	for (int i = 100; i < 4999; i += 100)
		lng[i] = '/';
	{
		const char *const r[] = {"report", "--html", lng, rec, NULL};
		expect_refused(r, "too long");
	}
	free(lng);
}

/* ---- G17: a sticky directory, an immutable file ------------------------- */

/* Runs deqbench as uid and gid 65534 (no setuid binary: the forked child
 * drops root's ids before exec), stdout and stderr in cli_dir; its exit
 * status, stderr in err. 127: it could not exec deqbench. */
static int run_as_nobody(const char *const *args, char *err, size_t errlen)
{
	char *argv[64], ep[600], *e;
	const char *bin = cli_argv(args, argv);
	int st;
	pid_t pid;
	cli_path(ep, sizeof(ep), "nobody.err");
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int o = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0666);
		if (o < 0 || dup2(o, 1) < 0 || dup2(o, 2) < 0 ||
		    setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
		    setuid(65534) != 0)
			_exit(126);
		execv(bin, argv);
		_exit(127);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "deqbench died of signal %d",
		  WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	e = cli_read(ep, NULL);
	snprintf(err, errlen, "%s", e ? e : "");
	free(e);
	return WEXITSTATUS(st);
}

/* G17: in a world-writable sticky directory (mode 1777, as /tmp), uid
 * 65534 may not replace a parameter file root owns (rename fails with
 * EPERM): refused before training (exit 2, one line); a new name in the
 * same directory is saved. Needs root to switch users; skips otherwise. */
Test(replace, sticky_directory_other_owner, .init = cli_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char d[600], p[700], out[700], a1[800], a2[800], err[4096];
	const char *const args[] = {"run", TINY, a1, a2, NULL};
	int rc;
	if (geteuid() != 0)
		cr_skip_test("needs root to run deqbench as uid 65534 against "
			     "a file root owns in a sticky directory");
	cr_assert_eq(chmod(cli_dir, 0755), 0);
	cli_path(d, sizeof(d), "sticky");
	cr_assert_eq(mkdir(d, 0777), 0);
	cr_assert_eq(chmod(d, 01777), 0);
	params_file(p, sizeof(p), "sticky/p.safetensors");
	cr_assert_eq(chmod(p, 0666), 0);
	snprintf(out, sizeof(out), "%s/r.jsonl", d);
	snprintf(a1, sizeof(a1), "out=%s", out);
	snprintf(a2, sizeof(a2), "save_params=%s", p);
	rc = run_as_nobody(args, err, sizeof(err));
	if (rc == 127 || rc == 126)
		cr_skip_test("uid 65534 cannot run %s (exit %d)",
			     getenv("DQ_DEQBENCH"), rc);
	cr_assert_eq(rc, 2, "exit %d: %s", rc, err);
	cr_assert(strstr(err, "sticky") && strchr(err, '\n') &&
		      !strchr(err, '\n')[1],
		  "%s", err);
	cr_assert(!cli_exists(out), "a refused run trained");
	snprintf(a2, sizeof(a2), "save_params=%s/q.safetensors", d);
	rc = run_as_nobody(args, err, sizeof(err));
	cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
}

static char immutable[700];

/* .fini: the immutable flag off again, so the directory can be removed. */
static void immutable_teardown(void)
{
	if (immutable[0]) {
		int fd = open(immutable, O_RDONLY), fl = 0;
		if (fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0) {
			fl &= ~FS_IMMUTABLE_FL;
			ioctl(fd, FS_IOC_SETFLAGS, &fl);
		}
		if (fd >= 0)
			close(fd);
	}
	immutable[0] = 0;
	cli_teardown();
}

/* How many files deqbench-unsaved-*.safetensors (rescued parameters) the
 * rescue directory ($TMPDIR: cli_dir) holds. */
static int rescued_params(void)
{
	DIR *d = opendir(cli_dir);
	struct dirent *de;
	int n = 0;
	cr_assert_not_null(d);
	while ((de = readdir(d)))
		n += !strncmp(de->d_name, "deqbench-unsaved-", 17) &&
		     strstr(de->d_name, ".safetensors") != NULL;
	closedir(d);
	return n;
}

/* G17: save_params= an immutable parameter file (chattr +i: rename over it
 * fails with EPERM) is refused before training. Where the check is passed
 * by (runner_run in process, as after a flag set during training), the
 * message names the rename, not a write, and the parameters are rescued.
 * Needs the flag (root, and a file system that has it); skips otherwise. */
Test(replace, immutable_file, .init = cli_setup, .fini = immutable_teardown,
     .timeout = 300)
{
	char out[600], a1[700], a2[800];
	const char *const args[] = {"run", TINY, a1, a2, NULL};
	int fd, fl = 0;
	params_file(immutable, sizeof(immutable), "imm.safetensors");
	fd = open(immutable, O_RDONLY);
	cr_assert(fd >= 0);
	if (ioctl(fd, FS_IOC_GETFLAGS, &fl) != 0 ||
	    (fl |= FS_IMMUTABLE_FL, ioctl(fd, FS_IOC_SETFLAGS, &fl)) != 0) {
		int e = errno;
		close(fd);
		immutable[0] = 0;
		cr_skip_test(
		    "cannot set the immutable flag (chattr +i) on %s "
		    "(%s): needs root and ext4, xfs, btrfs or the like",
		    cli_dir, strerror(e));
	}
	close(fd);
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(a1, sizeof(a1), "out=%s", out);
	snprintf(a2, sizeof(a2), "save_params=%s", immutable);
	expect_refused(args, "immutable");
	cr_assert(!cli_exists(out), "a refused run trained");
	{
		static const char *const kv[] = {TINY, NULL};
		struct bench_config c;
		char err[512];
		json_t *r = NULL;
		const char *msg;
		config_defaults(&c);
		for (int i = 0; kv[i]; i++)
			cr_assert_eq(
			    config_set_arg(&c, kv[i], err, sizeof(err)), 0,
			    "%s", err);
		cr_assert_eq(config_finish(&c, err, sizeof(err)), 0, "%s", err);
		snprintf(c.save_params, sizeof(c.save_params), "%s", immutable);
		cr_assert_eq(runner_run(&c, NULL, &r), RUN_ERROR);
		msg = json_string_value(json_object_get(r, "message"));
		cr_assert(strstr(msg, "renaming") &&
			      !strstr(msg, "write failed"),
			  "%s", msg);
		cr_assert_eq(rescued_params(), 1, "%s", msg);
		json_decref(r);
	}
}
