/* beside.c — see beside.h: the registry of running deqbench runs. */
#include "beside.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A set of pids, each once. */
struct pids {
	long *v;
	int n, cap;
};

struct beside {
	int ok; /* registered: the counts mean something */
	long pid;
	char dir[4096];
	struct pids start, end, joined;
};

static void pids_add(struct pids *p, long pid)
{
	long *v;
	for (int i = 0; i < p->n; i++)
		if (p->v[i] == pid)
			return;
	if (p->n == p->cap) {
		int cap = p->cap ? 2 * p->cap : 8;
		if (!(v = realloc(p->v, (size_t)cap * sizeof(*v))))
			return; /* out of memory: undercounts, never fails */
		p->v = v, p->cap = cap;
	}
	p->v[p->n++] = pid;
}

int beside_dir(char *buf, size_t n)
{
	const char *d = getenv("DQ_RUNS_DIR"), *x = getenv("XDG_RUNTIME_DIR");
	int w;
	if (d && *d)
		w = snprintf(buf, n, "%s", d);
	else if (x && *x)
		w = snprintf(buf, n, "%s/deqbench-runs", x);
	else
		w = snprintf(buf, n, "/tmp/deqbench-runs-%lu",
			     (unsigned long)getuid());
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* The registry directory, made when missing: 0 when it is a directory of
 * this user's (in /tmp another user could have made it first). */
static int dir_ready(const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -1;
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != getuid())
		return -1;
	return 0;
}

/* Process pid's start time (clock ticks since boot, /proc/PID/stat field
 * 22) into *start and whether it is a zombie; -1 when unreadable. */
static int proc_stat(long pid, unsigned long long *start, int *zombie)
{
	char path[64], buf[1024], *p;
	FILE *f;
	size_t got;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	got = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[got] = 0;
	/* the command name in parentheses may hold spaces: after the last
	 * ')' come state (field 3) ... starttime (field 22) */
	if (!(p = strrchr(buf, ')')))
		return -1;
	p++;
	*zombie = 0;
	for (int field = 3; field <= 22; field++) {
		char *end;
		while (*p == ' ')
			p++;
		if (field == 3)
			*zombie = *p == 'Z' || *p == 'X';
		if (field == 22) {
			*start = strtoull(p, &end, 10);
			return end == p ? -1 : 0;
		}
		p = strchr(p, ' ');
		if (!p)
			return -1;
	}
	return -1;
}

/* Whether process pid runs (start: its start time, 0 when unknown). */
static int alive(long pid, unsigned long long start)
{
	unsigned long long now = 0;
	int zombie = 0;
	if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH))
		return 0;
	if (proc_stat(pid, &now, &zombie) != 0)
		return 1; /* no /proc: kill's answer */
	return !zombie && (!start || now == start);
}

static unsigned long long start_of(long pid)
{
	unsigned long long s = 0;
	int z;
	return proc_stat(pid, &s, &z) == 0 ? s : 0;
}

/* The start time file dir/name holds (0: unreadable, or written by a run
 * that had no /proc). */
static unsigned long long entry_start(const char *dir, const char *name)
{
	char path[4400];
	long pid = 0;
	unsigned long long s = 0;
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "r")))
		return 0;
	if (fscanf(f, "%ld %llu", &pid, &s) != 2)
		s = 0;
	fclose(f);
	return s;
}

static void unlink_in(const char *dir, const char *name)
{
	char path[4400];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

/* Leaves mark seen.OTHER.ME: OTHER learns at its end that b joined. */
static void mark(const struct beside *b, long other)
{
	char name[64];
	char path[4400];
	int fd;
	snprintf(name, sizeof(name), "seen.%ld.%ld", other, b->pid);
	snprintf(path, sizeof(path), "%s/%s", b->dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
}

/* One pass over the registry: the other runs running now into *set
 * (marked when marking), b's marks into b->joined (mine: 1, else removed
 * as stale: 0 and 2 are not looked at), the files and marks of processes
 * that are gone removed. */
static void scan(struct beside *b, struct pids *set, int marking, int mine)
{
	DIR *d = opendir(b->dir);
	struct dirent *e;
	long p, q;
	char c;
	if (!d)
		return;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (sscanf(n, "run.%ld%c", &p, &c) == 1) {
			if (p == b->pid)
				continue;
			if (!alive(p, entry_start(b->dir, n))) {
				unlink_in(b->dir, n);
				continue;
			}
			pids_add(set, p);
			if (marking)
				mark(b, p);
		} else if (sscanf(n, "seen.%ld.%ld%c", &p, &q, &c) == 2) {
			if (p == b->pid && mine == 1)
				pids_add(&b->joined, q);
			else if (p == b->pid && mine == 2)
				unlink_in(b->dir, n);
			else if (p != b->pid && !alive(p, 0))
				unlink_in(b->dir, n);
		} else if (sscanf(n, "tmp.%ld%c", &p, &c) == 1 && p != b->pid &&
			   !alive(p, 0))
			unlink_in(b->dir, n);
	}
	closedir(d);
}

/* Writes run.PID through tmp.PID and a rename, so that a reader never
 * sees it half written. 0 or -1. */
static int register_me(const struct beside *b, const char *label)
{
	char tmp[4400], path[4400];
	FILE *f;
	int ok;
	snprintf(tmp, sizeof(tmp), "%s/tmp.%ld", b->dir, b->pid);
	snprintf(path, sizeof(path), "%s/run.%ld", b->dir, b->pid);
	if (!(f = fopen(tmp, "w")))
		return -1;
	ok = fprintf(f, "%ld %llu\n%.200s\n", b->pid, start_of(b->pid),
		     label ? label : "deqbench") > 0;
	ok &= fclose(f) == 0;
	if (!ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

struct beside *beside_enter(const char *label)
{
	struct beside *b = calloc(1, sizeof(*b));
	struct pids none = {0};
	if (!b)
		return NULL;
	b->pid = (long)getpid();
	if (beside_dir(b->dir, sizeof(b->dir)) != 0 || dir_ready(b->dir) != 0)
		return b;
	/* marks left under this pid by a process before it are not ours */
	scan(b, &none, 0, 2);
	free(none.v);
	if (register_me(b, label) != 0)
		return b;
	b->ok = 1;
	scan(b, &b->start, 1, 0);
	return b;
}

static json_t *count_or_null(int ok, int n)
{
	return ok ? json_integer(n) : json_null();
}

json_t *beside_leave(struct beside *b, int lanes)
{
	json_t *o = json_object();
	int ok = b && b->ok;
	struct pids all = {0}, later = {0};
	if (ok) {
		char name[64];
		scan(b, &b->end, 0, 1);
		for (int i = 0; i < b->start.n; i++)
			pids_add(&all, b->start.v[i]);
		for (int i = 0; i < b->end.n; i++)
			pids_add(&all, b->end.v[i]);
		for (int i = 0; i < b->joined.n; i++)
			pids_add(&all, b->joined.v[i]);
		snprintf(name, sizeof(name), "run.%ld", b->pid);
		unlink_in(b->dir, name);
		scan(b, &later, 0, 2); /* removes my marks */
	}
	json_object_set_new(o, "runs", count_or_null(ok, all.n));
	json_object_set_new(o, "at_start",
			    count_or_null(ok, ok ? b->start.n : 0));
	json_object_set_new(o, "at_end", count_or_null(ok, ok ? b->end.n : 0));
	json_object_set_new(o, "lanes",
			    lanes > 0 ? json_integer(lanes) : json_null());
	if (b) {
		free(b->start.v);
		free(b->end.v);
		free(b->joined.v);
	}
	free(all.v);
	free(later.v);
	free(b);
	return o;
}
