/* test_cli.h — helpers for tests that run the deqbench binary (DQ_DEQBENCH
 * gives its path, tests/meson.build sets it): a per-test temp directory
 * (removed afterwards), small file helpers, and cli_run / cli_run_with,
 * which run deqbench with its stdout and stderr in files of that directory.
 * Header-only, static inline (a test need not use every helper), for one
 * test executable at a time. */
#ifndef DQ_TEST_CLI_H
#define DQ_TEST_CLI_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char cli_dir[256];

static inline int cli_rm_one(const char *p, const struct stat *st, int flag,
			     struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* Criterion .init: a fresh temp directory, also $TMPDIR of the test and of
 * the deqbench processes it starts (so rescue files land in it). */
static inline void cli_setup(void)
{
	snprintf(cli_dir, sizeof(cli_dir), "/tmp/dq_test_cli_XXXXXX");
	cr_assert_not_null(mkdtemp(cli_dir));
	cr_assert_eq(setenv("TMPDIR", cli_dir, 1), 0);
}

/* Criterion .fini: removes the temp directory (not across mount points:
 * a test that mounts unmounts first). */
static inline void cli_teardown(void)
{
	if (cli_dir[0])
		nftw(cli_dir, cli_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	cli_dir[0] = 0;
}

/* buf = cli_dir/name. */
static inline void cli_path(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", cli_dir, name);
}

static inline void cli_write(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "cannot write %s", path);
	cr_assert_eq(fwrite(data, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

/* cli_write of a NUL-terminated text (without the NUL). */
static inline void cli_write_text(const char *path, const char *text)
{
	cli_write(path, text, strlen(text));
}

/* 1 when path names anything (a dangling link too), else 0. */
static inline int cli_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* The whole file, NUL-terminated, its size in *len when len is non-NULL
 * (NULL and *len = 0 when it cannot be opened). */
static inline char *cli_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;
	if (len)
		*len = 0;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

/* Waits for child pid (deqbench); its exit status. Fails the test when it
 * died of a signal. */
static inline int cli_wait_exit(pid_t pid)
{
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "deqbench died of signal %d",
		  WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	return WEXITSTATUS(st);
}

/* argv for execv into argv[64]: the deqbench binary DQ_DEQBENCH names,
 * then args (at most 62), NULL-terminated. Returns the binary; fails the
 * test when DQ_DEQBENCH is not set. */
static inline const char *cli_argv(const char *const *args, char **argv)
{
	const char *bin = getenv("DQ_DEQBENCH");
	int n = 0;
	cr_assert_not_null(bin, "DQ_DEQBENCH must give the deqbench binary");
	argv[n++] = (char *)bin;
	for (int i = 0; args[i] && n < 63; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	return bin;
}

/* Options of cli_run_with; all zero runs as cli_run(args, 0, ...) does. */
struct cli_opts {
	/* > 0: the size limit in bytes of any file the run writes
	 * (RLIMIT_FSIZE, SIGXFSZ ignored): writes past it come back short, as
	 * on a full disk */
	long fsize;
	/* non-NULL: the run's stdin is this file (e.g. "/dev/null"); NULL:
	 * the test's own */
	const char *in;
};

/*
 * cli_run_with — runs deqbench with args (NULL-terminated) and returns its
 * exit status; stdout and stderr go to cli_dir/stdout.txt and stderr.txt,
 * and stderr's text (truncated) to err_text when that is non-NULL. Fails
 * the test if deqbench dies of a signal. A run that blocks (on a FIFO, say)
 * hangs here until the test's timeout fails it.
 */
static inline int cli_run_with(const char *const *args,
			       const struct cli_opts *o, char *err_text,
			       size_t errlen)
{
	char *argv[64], out_p[512], err_p[512], *e;
	const char *bin = cli_argv(args, argv);
	int st;
	pid_t pid;

	cli_path(out_p, sizeof(out_p), "stdout.txt");
	cli_path(err_p, sizeof(err_p), "stderr.txt");
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int o1 = open(out_p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int o2 = open(err_p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (o1 < 0 || o2 < 0 || dup2(o1, 1) < 0 || dup2(o2, 2) < 0)
			_exit(126);
		if (o->in) {
			int i0 = open(o->in, O_RDONLY);
			if (i0 < 0 || dup2(i0, 0) < 0)
				_exit(126);
		}
		if (o->fsize > 0) {
			struct rlimit rl = {(rlim_t)o->fsize, (rlim_t)o->fsize};
			signal(SIGXFSZ, SIG_IGN);
			if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
				_exit(126);
		}
		execv(bin, argv);
		_exit(127);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	e = cli_read(err_p, NULL);
	if (err_text)
		snprintf(err_text, errlen, "%s", e ? e : "");
	free(e);
	cr_assert(WIFEXITED(st), "deqbench died of signal %d",
		  WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	return WEXITSTATUS(st);
}

/* cli_run_with, stdin the test's own; fsize > 0 limits the size of any
 * file the run writes (struct cli_opts). */
static inline int cli_run(const char *const *args, long fsize, char *err_text,
			  size_t errlen)
{
	const struct cli_opts o = {fsize, NULL};
	return cli_run_with(args, &o, err_text, errlen);
}

/* args (a run with out=<cli_dir>/r.jsonl) is bad input: exit 2, stderr
 * naming want, and no r.jsonl written. */
static inline void cli_expect_refused(const char *const *args,
				      const char *want)
{
	char err[4096], out[600];
	cli_path(out, sizeof(out), "r.jsonl");
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, want), "want \"%s\" in: %s", want, err);
	cr_assert(!cli_exists(out), "a refused run wrote %s", out);
}

/* A file's bytes, to compare before and after a refused command:
 * snap_of reads them, expect_same asserts the file still holds them (and
 * frees the snapshot). */
struct snap {
	char *bytes;
	size_t n;
};

static inline struct snap snap_of(const char *path)
{
	struct snap s;
	s.bytes = cli_read(path, &s.n);
	cr_assert_not_null(s.bytes, "cannot read %s", path);
	return s;
}

static inline void expect_same(const char *path, struct snap *s)
{
	size_t n;
	char *now = cli_read(path, &n);
	cr_assert(now && n == s->n && !memcmp(now, s->bytes, n),
		  "%s was changed", path);
	free(now);
	free(s->bytes);
}

#endif
