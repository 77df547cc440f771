/* test_proc.h — for tests of deqbench's child processes
 * (test_children.c): deqbench started in the background, and bounded
 * polls for a file's text, a process's end and a process's child. A wait
 * that reaches its bound fails the test; none is a timing threshold.
 * Include after test_cli.h; header-only, static inline. */
#ifndef DQ_TEST_PROC_H
#define DQ_TEST_PROC_H

#include <dirent.h>
#include <errno.h>
#include <time.h>

#include "test_cli.h"

/* Sleeps 10 ms. */
static inline void nap(void)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	nanosleep(&ts, NULL);
}

/* Starts deqbench with args in the background, stdout and stderr in
 * cli_dir/bg_out.txt and bg_err.txt. Returns its pid. */
static inline pid_t spawn(const char *const *args)
{
	char *argv[64], o[512], e[512];
	const char *bin = cli_argv(args, argv);
	pid_t pid;
	cli_path(o, sizeof(o), "bg_out.txt");
	cli_path(e, sizeof(e), "bg_err.txt");
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

/* 1 once pid no longer runs: no such process, or a zombie (an orphan
 * that init has not reaped yet). */
static inline int gone(pid_t pid)
{
	char p[64], buf[512], *rp;
	FILE *f;
	snprintf(p, sizeof(p), "/proc/%ld/stat", (long)pid);
	if (!(f = fopen(p, "r")))
		return kill(pid, 0) != 0 && errno == ESRCH;
	rp = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	return rp && (rp[2] == 'Z' || rp[2] == 'X');
}

/* Polls up to 60 s for pid to end; 1 when it did. */
static inline int wait_gone(pid_t pid)
{
	for (int i = 0; i < 6000; i++) {
		if (gone(pid))
			return 1;
		nap();
	}
	return 0;
}

/* Polls up to 120 s for the file cli_dir/name to hold text (or, with text
 * NULL, to exist) while the process pid runs. 1 when it does; 0 when pid
 * ended first (then reaped) or at the bound. */
static inline int wait_text(pid_t pid, const char *name, const char *text)
{
	char p[512];
	int st;
	cli_path(p, sizeof(p), name);
	for (int i = 0; i < 12000; i++) {
		char *t = cli_read(p, NULL);
		int ok = t && (!text || strstr(t, text));
		free(t);
		if (ok)
			return 1;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return 0;
		nap();
	}
	return 0;
}

/* wait_text, else the test fails with msg after killing pid. */
static inline void wait_or_fail(pid_t pid, const char *name, const char *text,
				const char *msg)
{
	if (wait_text(pid, name, text))
		return;
	if (kill(pid, SIGKILL) == 0)
		waitpid(pid, NULL, 0);
	cr_assert_fail("%s", msg);
}

/* The pid in cli_dir/child.pid (the stand-in's). */
static inline pid_t child_pid(void)
{
	char p[512], *t;
	long v;
	cli_path(p, sizeof(p), "child.pid");
	t = cli_read(p, NULL);
	cr_assert_not_null(t);
	v = strtol(t, NULL, 10);
	free(t);
	cr_assert(v > 1);
	return (pid_t)v;
}

/* A child of pid (from /proc), or 0. */
static inline pid_t child_of(pid_t pid)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;
	cr_assert_not_null(d);
	while (!found && (de = readdir(d))) {
		char p[300], buf[512], *rp;
		long ppid;
		FILE *f;
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/stat", de->d_name);
		if (!(f = fopen(p, "r")))
			continue;
		rp = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		if (rp && sscanf(rp + 2, "%*c %ld", &ppid) == 1 && ppid == pid)
			found = (pid_t)strtol(de->d_name, NULL, 10);
	}
	closedir(d);
	return found;
}

#endif
