/* proc.h — deqbench's child processes: each dies with the process that
 * forked it (so `kill -9` of a run or a suite leaves nothing training), and
 * proc_run runs a program with bytes on its stdin, its stdout captured and
 * its stderr passed through and kept in part (impl=pytorch's deqtorch.py,
 * peer.c). */
#ifndef DQ_BENCH_PROC_H
#define DQ_BENCH_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* proc_die_with_parent — call in a child right after fork(), with parent
 * the pid that forked it (its getpid() before the fork): the kernel sends
 * the child SIGKILL when the thread that forked it ends
 * (prctl(PR_SET_PDEATHSIG), kept across exec). When the parent ended
 * before the request took effect (getppid() no longer parent), the child
 * kills itself at once. On systems without PR_SET_PDEATHSIG it does
 * nothing. */
void proc_die_with_parent(pid_t parent);

/* Bytes of a child's stderr that proc_run keeps (its tail). */
#define PROC_TAIL 1024

/* What a child printed and how it ended (proc_run). */
struct proc_out {
	char *out;	      /* its whole stdout, NUL-terminated (or NULL) */
	size_t n_out;	      /* bytes in out */
	char last[1024];      /* its last non-empty stderr line (invalid
				 UTF-8 bytes replaced by '?') */
	char tail[PROC_TAIL]; /* the last PROC_TAIL - 1 bytes of its stderr,
				 NUL-terminated */
	int wstatus;	      /* waitpid's status */
	int spawned;	      /* 0: pipe or fork failed (errno in err) */
	int err;	      /* errno of a failed pipe, fork or exec, else 0 */
	int exec_failed;      /* 1: forked, but argv[0] could not be run */
	/* proc_run's working state */
	char line[1024]; /* the stderr line being read */
	size_t n_line;	 /* bytes in line */
	int pass_stderr; /* copy its stderr to ours as it comes */
};

/* proc_run — runs argv (argv[0] looked up in PATH when it has no '/') as a
 * child in its own process group that dies with us
 * (proc_die_with_parent), with in[0..n_in) on its stdin, and waits for it:
 * its stdout is collected into c->out, its stderr copied to ours as it
 * comes when pass_stderr is set, and its last line and tail kept. The first
 * SIGINT or SIGTERM we receive (interrupt.h) is passed on to the child once,
 * so it can end as deqbench's own runs do; a tty's Ctrl-C reaches it only
 * that way (its own process group). SIGPIPE is ignored meanwhile. Fills
 * *c; free c->out. */
void proc_run(char *const argv[], const char *in, size_t n_in, int pass_stderr,
	      struct proc_out *c);

/* 1 when the child of c ran and exited with status code, else 0. */
int proc_exited_with(const struct proc_out *c, int code);

/* c's stderr tail as one line into buf[0..n): its last lines joined by
 * " | ", blank ones dropped, cut at the front (on a character boundary) to
 * fit, invalid UTF-8 bytes replaced by '?' (so it can go into a JSON
 * string); "(no message)" when it wrote nothing. Returns buf. */
const char *proc_tail_line(const struct proc_out *c, char *buf, size_t n);

#endif
