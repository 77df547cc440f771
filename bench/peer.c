/* peer.c — impl=pytorch runs (peer.h): deqtorch.py as a child process. */
#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data.h"
#include "env.h"
#include "fileio.h"
#include "interrupt.h"
#include "jsontext.h"
#include "record.h"

#ifndef DQ_SOURCE_ROOT
#define DQ_SOURCE_ROOT "."
#endif

int peer_wanted(const struct bench_config *cfg)
{
	return strcmp(cfg->impl, "pytorch") == 0;
}

static const char *python_path(void)
{
	const char *p = getenv("DQ_PYTHON");
	if (p && *p)
		return p;
	return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3"
						     : "python3";
}

static const char *script_path(void)
{
	const char *p = getenv("DQ_PYTORCH_SCRIPT");
	return p && *p ? p : DQ_SOURCE_ROOT "/bench/pytorch/deqtorch.py";
}

/* What a child printed and how it ended. */
struct child_out {
	char *out;	 /* its whole stdout, NUL-terminated (or NULL) */
	size_t n_out;	 /* bytes in out */
	char last[1024]; /* its last non-empty stderr line */
	char line[1024]; /* the stderr line being read */
	size_t n_line;	 /* bytes in line */
	int wstatus;	 /* waitpid's status */
	int spawned;	 /* 0: fork or exec failed (errno in wstatus) */
	int pass_stderr; /* copy its stderr to ours as it comes */
};

/* Appends n bytes of the child's stderr: copied through when asked, lines
 * kept so that the last one can name a failure. */
static void take_stderr(struct child_out *c, const char *b, size_t n)
{
	if (c->pass_stderr)
		fwrite(b, 1, n, stderr);
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

static int take_stdout(struct child_out *c, const char *b, size_t n)
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

/* The child side: pipes onto 0, 1, 2, then exec. */
static void child_exec(char *const argv[], int in, int out, int err)
{
	dup2(in, 0);
	dup2(out, 1);
	dup2(err, 2);
	for (int fd = 3; fd < 256; fd++)
		close(fd);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	execvp(argv[0], argv);
	dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Feeds `in` to the child's stdin and reads its stdout and stderr until
 * both close (poll, so neither pipe can fill while we write the other). */
static void child_talk(struct child_out *c, pid_t pid, int fin, int fout,
		       int ferr, const char *in, size_t n_in)
{
	size_t off = 0;
	int forwarded = 0;
	char buf[65536];
	struct pollfd p[3] = {
	    {fin, POLLOUT, 0}, {fout, POLLIN, 0}, {ferr, POLLIN, 0}};
	if (n_in == 0) {
		close(fin);
		p[0].fd = -1;
	}
	while (p[0].fd >= 0 || p[1].fd >= 0 || p[2].fd >= 0) {
		if (poll(p, 3, -1) < 0) {
			if (errno != EINTR)
				break;
			/* SIGINT/SIGTERM reached us (interrupt.h): pass it
			 * on once, so the child stops too */
			if (interrupt_signal() && !forwarded) {
				kill(pid, interrupt_signal());
				forwarded = 1;
			}
			continue;
		}
		if (p[0].fd >= 0 && p[0].revents) {
			ssize_t w = (p[0].revents & POLLOUT)
					? write(fin, in + off, n_in - off)
					: -1;
			int again = w < 0 && (p[0].revents & POLLOUT) &&
				    errno == EINTR; /* a signal: write on */
			off += w > 0 ? (size_t)w : 0;
			if ((w < 0 && !again) || off == n_in) {
				close(fin);
				p[0].fd = -1;
			}
		}
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
}

/* Runs argv with `in` on its stdin; fills *c (free c->out). SIGPIPE is
 * ignored meanwhile, so a child that exits without reading does not kill
 * us. */
static void child_run(char *const argv[], const char *in, size_t n_in,
		      int pass_stderr, struct child_out *c)
{
	int pi[2], po[2], pe[2];
	pid_t pid;
	void (*old)(int);
	memset(c, 0, sizeof(*c));
	c->pass_stderr = pass_stderr;
	if (pipe(pi) != 0)
		goto fail;
	if (pipe(po) != 0 || pipe(pe) != 0)
		goto fail;
	fflush(NULL);
	if ((pid = fork()) < 0)
		goto fail;
	if (pid == 0)
		child_exec(argv, pi[0], po[1], pe[1]);
	close(pi[0]);
	close(po[1]);
	close(pe[1]);
	old = signal(SIGPIPE, SIG_IGN);
	child_talk(c, pid, pi[1], po[0], pe[0], in, n_in);
	signal(SIGPIPE, old);
	while (waitpid(pid, &c->wstatus, 0) < 0 && errno == EINTR)
		;
	c->spawned = 1;
	return;
fail:
	c->wstatus = errno;
}

/* 1 when the child exited with status code. */
static int exited_with(const struct child_out *c, int code)
{
	return c->spawned && WIFEXITED(c->wstatus) &&
	       WEXITSTATUS(c->wstatus) == code;
}

static const char TORCH_PROBE[] =
    "import importlib.util, sys; "
    "sys.exit(0 if importlib.util.find_spec('torch') else 3)";

/* python3 with torch importable, and the script where it should be. */
static int check_python(char *err, size_t errlen)
{
	char *argv[] = {(char *)python_path(), "-c", (char *)TORCH_PROBE, NULL};
	struct child_out c;
	if (access(script_path(), R_OK) != 0) {
		snprintf(err, errlen,
			 "impl=pytorch: cannot read %s (%s); run from a "
			 "deqbench source tree or set DQ_PYTORCH_SCRIPT",
			 script_path(), strerror(errno));
		return -1;
	}
	child_run(argv, NULL, 0, 0, &c);
	free(c.out);
	if (exited_with(&c, 0))
		return 0;
	snprintf(err, errlen,
		 "impl=pytorch needs PyTorch for %s: apt-get install "
		 "python3-torch (scripts/setup.sh installs it), or set "
		 "DQ_PYTHON to a python3 with torch",
		 python_path());
	return -1;
}

int peer_check(const struct bench_config *const *cfgs, int n, char *err,
	       size_t errlen)
{
	char *argv[] = {(char *)python_path(), (char *)script_path(), "check",
			NULL};
	json_t *all = json_array();
	struct child_out c;
	char *in;
	int rc = 0;
	for (int i = 0; i < n; i++)
		if (peer_wanted(cfgs[i]))
			json_array_append_new(all, config_to_json(cfgs[i]));
	if (json_array_size(all) == 0) {
		json_decref(all);
		return 0;
	}
	if (check_python(err, errlen) != 0) {
		json_decref(all);
		return -1;
	}
	in = json_dumps(all, JSON_COMPACT);
	json_decref(all);
	child_run(argv, in, in ? strlen(in) : 0, 0, &c);
	free(in);
	free(c.out);
	if (!exited_with(&c, 0)) {
		rc = -1;
		if (exited_with(&c, 2) && *c.last)
			snprintf(err, errlen, "%s", c.last);
		else
			snprintf(err, errlen,
				 "impl=pytorch: %s check failed (%s); run it "
				 "by hand to see why",
				 script_path(),
				 *c.last ? c.last : "no message");
	}
	return rc;
}

int peer_refuse(const struct bench_config *cfg, const char *command, char *err,
		size_t errlen)
{
	if (!peer_wanted(cfg))
		return 0;
	snprintf(err, errlen,
		 "impl=pytorch works with run, eval and suite, not with %s; "
		 "drop "
		 "impl or use impl=deqbench",
		 command);
	return -1;
}

/* The corpus of cfg as token-id files in a new temporary directory dir
 * (peer_cleanup removes it); *V the model's vocabulary. */
static int write_tokens(const struct bench_config *cfg, char *dir, size_t n,
			int *V, char *err, size_t errlen)
{
	struct corpus c;
	const char *tmp = getenv("TMPDIR");
	if (runner_load_corpus(&c, cfg, V, err, errlen) != 0)
		return -1;
	snprintf(dir, n, "%s/deqbench-peer-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir) || corpus_write_ids(&c, dir) != 0) {
		snprintf(err, errlen,
			 "impl=pytorch: cannot write the tokens under %s (%s); "
			 "set TMPDIR to a writable directory",
			 dir, strerror(errno));
		corpus_free(&c);
		*dir = 0;
		return -1;
	}
	corpus_free(&c);
	return 0;
}

static void peer_cleanup(const char *dir)
{
	static const char *const names[] = {"vocab.txt",	"train.ids",
					    "valid.ids",	"test.ids",
					    "init.safetensors", NULL};
	char p[1200];
	if (!*dir)
		return;
	for (int i = 0; names[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
	rmdir(dir);
}

/* The request deqtorch.py run reads on stdin; init: deqbench's seeded
 * initial parameters for it to start from, or NULL. */
static char *request_json(const struct bench_config *cfg, const char *dir,
			  int V, const char *init)
{
	json_t *q = json_object(), *d = json_object();
	char p[1200];
	char *s;
	static const char *const split[] = {"train", "valid", "test"};
	json_object_set_new(d, "corpus", json_string(cfg->corpus));
	json_object_set_new(d, "vocab_size", json_integer(V));
	for (int k = 0; k < 3; k++) {
		snprintf(p, sizeof(p), "%s/%s.ids", dir, split[k]);
		json_object_set_new(d, split[k], json_string(p));
	}
	json_object_set_new(q, "config", config_to_json(cfg));
	json_object_set_new(q, "data", d);
	if (init)
		json_object_set_new(q, "init_params", json_string(init));
	s = json_dumps(q, JSON_COMPACT);
	json_decref(q);
	return s;
}

/* The record deqtorch.py printed (its last stdout line), or NULL. */
static json_t *child_record(const struct child_out *c)
{
	char *p;
	json_t *r;
	if (!c->out)
		return NULL;
	while (c->n_out && (p = strrchr(c->out, '\n')) && !p[1])
		*p = 0;
	p = strrchr(c->out, '\n');
	r = json_loads(p ? p + 1 : c->out, 0, NULL);
	if (r && !json_is_object(r)) {
		json_decref(r);
		r = NULL;
	}
	return r;
}

/* Copies the sections the child measured into rec; deqbench's own
 * `schema`, `kind`, `config`, `suite`, `host` and `build` stay. */
static void merge_child(json_t *rec, json_t *got)
{
	static const char *const ours[] = {"schema", "kind",  "config", "suite",
					   "host",   "build", NULL};
	const char *key;
	json_t *v;
	json_object_foreach(got, key, v)
	{
		int keep = 0;
		for (int i = 0; ours[i]; i++)
			keep |= !strcmp(ours[i], key);
		if (!keep)
			json_object_set(rec, key, v);
	}
}

static enum run_status status_of(const json_t *rec)
{
	const char *s = json_string_value(json_object_get(rec, "status"));
	if (!s)
		return RUN_ERROR;
	return !strcmp(s, "ok")		   ? RUN_OK
	       : !strcmp(s, "diverged")	   ? RUN_DIVERGED
	       : !strcmp(s, "interrupted") ? RUN_INTERRUPTED
					   : RUN_ERROR;
}

/* Sets rec's status and message for a child that printed no record. */
static enum run_status child_failed(json_t *rec, const struct child_out *c)
{
	char m[1400];
	enum run_status st = RUN_ERROR;
	if (interrupt_signal()) {
		st = RUN_INTERRUPTED;
		snprintf(m, sizeof(m),
			 "%s: the pytorch run stopped before writing its "
			 "record (its statistics are lost)",
			 interrupt_name());
	} else if (!c->spawned)
		snprintf(m, sizeof(m), "impl=pytorch: cannot start %s: %s",
			 python_path(), strerror(c->wstatus));
	else {
		if (exited_with(c, 2))
			st = RUN_SETUP_FAILED;
		snprintf(m, sizeof(m),
			 "impl=pytorch: deqtorch.py %s %d without a record: %s",
			 WIFEXITED(c->wstatus) ? "exited with status"
					       : "was killed by signal",
			 WIFEXITED(c->wstatus) ? WEXITSTATUS(c->wstatus)
					       : WTERMSIG(c->wstatus),
			 *c->last ? c->last : "(no message)");
	}
	json_object_set_new(rec, "status", json_string(runner_status_name(st)));
	json_object_set_new(rec, "message", jsontext_buf(m, sizeof(m)));
	return st;
}

/* deqtorch.py run, or with eval deqtorch.py eval (kind "eval"; cfg has
 * params=, so no initial parameters are written). */
static enum run_status peer_exec(const struct bench_config *cfg,
				 const struct run_meta *meta, int eval,
				 json_t **record)
{
	char *argv[] = {(char *)python_path(), (char *)script_path(),
			eval ? "eval" : "run", NULL};
	json_t *rec = record_new(), *got;
	char dir[1024] = "", err[1024], init[1100];
	struct child_out c;
	enum run_status st;
	char *in;
	int V = 0;

	if (eval)
		json_object_set_new(rec, "kind", json_string("eval"));
	json_object_set_new(rec, "config", config_to_json(cfg));
	if (meta && meta->suite)
		json_object_set_new(rec, "suite", runner_meta_json(meta));
	json_object_set_new(rec, "host", env_host_json());
	json_object_set_new(rec, "build", env_build_json());
	*record = rec;
	if (write_tokens(cfg, dir, sizeof(dir), &V, err, sizeof(err)) != 0) {
		json_object_set_new(rec, "message",
				    jsontext_buf(err, sizeof(err)));
		return RUN_SETUP_FAILED;
	}
	/* the same initial parameters as a deqbench run of cfg (unless
	 * params= gives them): losses of the two are comparable step by
	 * step */
	snprintf(init, sizeof(init), "%s/init.safetensors", dir);
	if (!*cfg->params) {
		struct bench_config c = *cfg;
		c.model.vocab_size = V;
		if (runner_params_init(&c, init, err, sizeof(err)) != 0) {
			peer_cleanup(dir);
			json_object_set_new(rec, "message",
					    jsontext_buf(err, sizeof(err)));
			return RUN_SETUP_FAILED;
		}
	}
	in = request_json(cfg, dir, V, *cfg->params ? NULL : init);
	child_run(argv, in, in ? strlen(in) : 0, !(meta && meta->quiet), &c);
	free(in);
	peer_cleanup(dir);
	got = child_record(&c);
	free(c.out);
	if (!got)
		return child_failed(rec, &c);
	merge_child(rec, got);
	json_decref(got);
	st = status_of(rec);
	if (st == RUN_ERROR &&
	    !json_string_value(json_object_get(rec, "status")))
		json_object_set_new(rec, "status", json_string("error"));
	return st;
}

enum run_status peer_run(const struct bench_config *cfg,
			 const struct run_meta *meta, json_t **record)
{
	return peer_exec(cfg, meta, 0, record);
}

enum run_status peer_eval(const struct bench_config *cfg,
			  const struct run_meta *meta, json_t **record)
{
	return peer_exec(cfg, meta, 1, record);
}
