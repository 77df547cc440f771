/* proc.c — child processes (proc.h). */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "interrupt.h"

void proc_die_with_parent(pid_t parent)
{
#ifdef PR_SET_PDEATHSIG
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() != parent)
		raise(SIGKILL); /* the parent ended before the request */
#else
	(void)parent;
#endif
}

int proc_exited_with(const struct proc_out *c, int code)
{
	return c->spawned && !c->exec_failed && WIFEXITED(c->wstatus) &&
	       WEXITSTATUS(c->wstatus) == code;
}

/* Keeps the last PROC_TAIL - 1 bytes of the child's stderr in c->tail. */
static void keep_tail(struct proc_out *c, const char *b, size_t n)
{
	size_t cap = sizeof(c->tail) - 1, have = strlen(c->tail);
	if (n >= cap) {
		memcpy(c->tail, b + n - cap, cap);
		c->tail[cap] = 0;
		return;
	}
	if (have + n > cap) {
		memmove(c->tail, c->tail + (have + n - cap), cap - n);
		have = cap - n;
	}
	memcpy(c->tail + have, b, n);
	c->tail[have + n] = 0;
}

/* Appends n bytes of the child's stderr: copied through when asked, lines
 * kept so that the last one can name a failure. */
static void take_stderr(struct proc_out *c, const char *b, size_t n)
{
	if (c->pass_stderr)
		fwrite(b, 1, n, stderr);
	keep_tail(c, b, n);
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '\n' || b[i] == '\r') {
			if (c->n_line) {
				c->line[c->n_line] = 0;
				memcpy(c->last, c->line, c->n_line + 1);
			}
			c->n_line = 0;
		} else if (c->n_line + 1 < sizeof(c->line))
			c->line[c->n_line++] = b[i];
	}
}

static int take_stdout(struct proc_out *c, const char *b, size_t n)
{
	char *p = realloc(c->out, c->n_out + n + 1);
	if (!p)
		return -1;
	memcpy(p + c->n_out, b, n);
	c->out = p;
	c->n_out += n;
	c->out[c->n_out] = 0;
	return 0;
}

/* Length of the valid UTF-8 sequence at s (jansson's rules: no overlong
 * forms, no surrogates, at most U+10FFFF), or 0. */
static int utf8_len(const unsigned char *s)
{
	unsigned c = s[0], cp, min;
	int n;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		n = 2, cp = c & 0x1F, min = 0x80;
	} else if ((c & 0xF0) == 0xE0) {
		n = 3, cp = c & 0x0F, min = 0x800;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4, cp = c & 0x07, min = 0x10000;
	} else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

/* Replaces each byte of s that is not part of valid UTF-8 by '?', so the
 * text can go into a JSON string. */
static void scrub_utf8(char *s)
{
	unsigned char *p = (unsigned char *)s;
	while (*p) {
		int n = utf8_len(p);
		if (n)
			p += n;
		else
			*p++ = '?';
	}
}

const char *proc_tail_line(const struct proc_out *c, char *buf, size_t n)
{
	char all[4 * PROC_TAIL];
	size_t len = 0, start = 0;
	const char *p = c->tail;
	if (!n)
		return buf;
	while (*p && len < sizeof(all) - 1) {
		size_t k = strcspn(p, "\r\n");
		if (k) {
			int w = snprintf(all + len, sizeof(all) - len, "%s%.*s",
					 len ? " | " : "", (int)k, p);
			len += w > 0 ? (size_t)w : 0;
		}
		p += k;
		p += strspn(p, "\r\n");
	}
	if (len >= sizeof(all))
		len = sizeof(all) - 1;
	if (!len) {
		snprintf(buf, n, "(no message)");
		return buf;
	}
	if (len >= n) /* keep the end; start on a character */
		start = len - (n - 1);
	while (start < len && ((unsigned char)all[start] & 0xC0) == 0x80)
		start++;
	snprintf(buf, n, "%s", all + start);
	scrub_utf8(buf);
	return buf;
}

/* The child side: its own process group, death with the parent, pipes onto
 * 0, 1, 2, then exec; a failed exec's errno goes to ep. */
static void child_exec(char *const argv[], pid_t parent, const int fds[3],
		       int ep)
{
	sigset_t none;
	int e;
	setpgid(0, 0);
	proc_die_with_parent(parent);
	for (int k = 0; k < 3; k++)
		dup2(fds[k], k);
	for (int fd = 3; fd < 256; fd++)
		if (fd != ep)
			close(fd);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execvp(argv[0], argv);
	e = errno;
	while (write(ep, &e, sizeof(e)) < 0 && errno == EINTR)
		;
	_exit(127);
}

/* Passes our first SIGINT/SIGTERM on to the child, once. */
static void forward_interrupt(pid_t pid, int *forwarded)
{
	if (interrupt_signal() && !*forwarded) {
		kill(pid, interrupt_signal());
		*forwarded = 1;
	}
}

/* Reads what is ready on p[1] (stdout) and p[2] (stderr) into c, closing
 * each at its end. */
static void read_ready(struct proc_out *c, struct pollfd p[3])
{
	char buf[65536];
	for (int k = 1; k < 3; k++) {
		ssize_t r;
		if (p[k].fd < 0 || !p[k].revents)
			continue;
		r = read(p[k].fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			close(p[k].fd);
			p[k].fd = -1;
		} else if (k == 2)
			take_stderr(c, buf, (size_t)r);
		else if (take_stdout(c, buf, (size_t)r) != 0) {
			close(p[k].fd);
			p[k].fd = -1;
		}
	}
}

/* Feeds `in` to the child's stdin and reads its stdout and stderr until
 * both close (poll, so neither pipe can fill while we write the other).
 * SIGINT and SIGTERM are blocked but inside ppoll, so a signal is either
 * seen by the flag test before the wait or ends the wait: it is passed on
 * without delay whenever it comes. */
static void child_talk(struct proc_out *c, pid_t pid, int fin, int fout,
		       int ferr, const char *in, size_t n_in)
{
	size_t off = 0;
	int forwarded = 0;
	sigset_t block, old;
	struct pollfd p[3] = {
	    {fin, POLLOUT, 0}, {fout, POLLIN, 0}, {ferr, POLLIN, 0}};
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &old);
	if (n_in == 0) {
		close(fin);
		p[0].fd = -1;
	}
	while (p[0].fd >= 0 || p[1].fd >= 0 || p[2].fd >= 0) {
		forward_interrupt(pid, &forwarded);
		if (ppoll(p, 3, NULL, &old) < 0) {
			if (errno != EINTR)
				break;
			continue;
		}
		if (p[0].fd >= 0 && p[0].revents) {
			ssize_t w = (p[0].revents & POLLOUT)
					? write(fin, in + off, n_in - off)
					: -1;
			off += w > 0 ? (size_t)w : 0;
			if (w < 0 || off == n_in) {
				close(fin);
				p[0].fd = -1;
			}
		}
		read_ready(c, p);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* After fork: whether the child's exec failed (its errno in c->err). */
static void exec_result(struct proc_out *c, int ep)
{
	int e = 0;
	ssize_t r;
	while ((r = read(ep, &e, sizeof(e))) < 0 && errno == EINTR)
		;
	if (r == (ssize_t)sizeof(e)) {
		c->exec_failed = 1;
		c->err = e;
	}
	close(ep);
}

/* Closes both ends of each of the n pipes fds[k][0..1] that is open. */
static void close_pipes(int (*fds)[2], int n)
{
	for (int k = 0; k < n; k++)
		for (int e = 0; e < 2; e++)
			if (fds[k][e] >= 0)
				close(fds[k][e]);
}

void proc_run(char *const argv[], const char *in, size_t n_in, int pass_stderr,
	      struct proc_out *c)
{
	/* stdin, stdout, stderr, exec error (close-on-exec) */
	int fds[4][2] = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
	pid_t pid, parent = getpid();
	void (*old)(int);
	memset(c, 0, sizeof(*c));
	c->pass_stderr = pass_stderr;
	for (int k = 0; k < 4; k++)
		if ((k < 3 ? pipe(fds[k]) : pipe2(fds[k], O_CLOEXEC)) != 0)
			goto fail;
	fflush(NULL);
	if ((pid = fork()) < 0)
		goto fail;
	if (pid == 0) {
		const int ends[3] = {fds[0][0], fds[1][1], fds[2][1]};
		child_exec(argv, parent, ends, fds[3][1]);
	}
	close(fds[0][0]);
	close(fds[1][1]);
	close(fds[2][1]);
	close(fds[3][1]);
	exec_result(c, fds[3][0]);
	old = signal(SIGPIPE, SIG_IGN);
	child_talk(c, pid, fds[0][1], fds[1][0], fds[2][0], in, n_in);
	signal(SIGPIPE, old);
	while (waitpid(pid, &c->wstatus, 0) < 0 && errno == EINTR)
		;
	scrub_utf8(c->last);
	c->spawned = 1;
	return;
fail:
	c->err = errno;
	close_pipes(fds, 4);
}
