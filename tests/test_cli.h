/* test_cli.h — helpers for tests that run the deqbench binary (DQ_DEQBENCH
 * gives its path, tests/meson.build sets it): a per-test temp directory
 * (removed afterwards), small file helpers, and cli_run, which runs
 * deqbench with its stdout and stderr in files of that directory.
 * Header-only, static, for one test executable at a time. */
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

static int cli_rm_one(const char *p, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* Criterion .init: a fresh temp directory, also $TMPDIR of the test and of
 * the deqbench processes it starts (so rescue files land in it). */
static void cli_setup(void)
{
	snprintf(cli_dir, sizeof(cli_dir), "/tmp/dq_test_cli_XXXXXX");
	cr_assert_not_null(mkdtemp(cli_dir));
	cr_assert_eq(setenv("TMPDIR", cli_dir, 1), 0);
}

/* Criterion .fini: removes the temp directory (not across mount points:
 * a test that mounts unmounts first). */
static void cli_teardown(void)
{
	if (cli_dir[0])
		nftw(cli_dir, cli_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	cli_dir[0] = 0;
}

/* buf = cli_dir/name. */
static void cli_path(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", cli_dir, name);
}

static void cli_write(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "cannot write %s", path);
	cr_assert_eq(fwrite(data, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

/* The whole file, NUL-terminated (NULL when it cannot be opened). */
static char *cli_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;
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

/*
 * cli_run — runs deqbench with args (NULL-terminated) and returns its exit
 * status; stdout and stderr go to cli_dir/stdout.txt and stderr.txt, and
 * stderr's text (truncated) to err_text. fsize > 0 limits the size of any
 * file it writes to fsize bytes (RLIMIT_FSIZE, SIGXFSZ ignored): writes
 * past it come back short, as on a full disk. Fails the test if deqbench
 * dies of a signal.
 */
static int cli_run(const char *const *args, long fsize, char *err_text,
		   size_t errlen)
{
	const char *bin = getenv("DQ_DEQBENCH");
	char *argv[64], out_p[512], err_p[512], *e;
	int st, n = 0;
	pid_t pid;

	cr_assert_not_null(bin, "DQ_DEQBENCH must give the deqbench binary");
	argv[n++] = (char *)bin;
	for (int i = 0; args[i] && n < 63; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	cli_path(out_p, sizeof(out_p), "stdout.txt");
	cli_path(err_p, sizeof(err_p), "stderr.txt");
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int o = open(out_p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int x = open(err_p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (o < 0 || x < 0 || dup2(o, 1) < 0 || dup2(x, 2) < 0)
			_exit(126);
		if (fsize > 0) {
			struct rlimit rl = {(rlim_t)fsize, (rlim_t)fsize};
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

#endif
