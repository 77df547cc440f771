/* peer.c — impl=pytorch runs (peer.h): deqtorch.py as a child process. */
#include "peer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../data/data.h"
#include "../records/env.h"
#include "../records/health.h"
#include "../io/interrupt.h"
#include "../io/jsontext.h"
#include "../run/param_files.h"
#include "../io/proc.h"
#include "../records/record.h"
#include "../run/run_record.h"
#include "../records/validate.h"

#ifndef DQ_SOURCE_ROOT
#define DQ_SOURCE_ROOT "."
#endif

int peer_wanted(const struct bench_config *cfg)
{
	return cfg->impl == IMPL_PYTORCH;
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

/* torch.__version__ as the torch probe found it ("" when unknown): the
 * impl of the records deqbench writes itself for a pytorch run. */
static char torch_version[64];

/* The torch probe: exit 3 without torch, else prints torch.__version__
 * from torch/version.py (without importing torch: about 30 ms). */
static const char TORCH_PROBE[] =
    "import importlib.util, os, sys\n"
    "s = importlib.util.find_spec('torch')\n"
    "if s is None:\n"
    "    sys.exit(3)\n"
    "v = {}\n"
    "try:\n"
    "    d = list(s.submodule_search_locations)[0]\n"
    "    exec(open(os.path.join(d, 'version.py')).read(), v)\n"
    "except Exception:\n"
    "    pass\n"
    "print(v.get('__version__', ''))\n";

/* Keeps the probe's version when it looks like one. */
static void keep_version(const char *out)
{
	size_t n = out ? strcspn(out, "\r\n") : 0;
	torch_version[0] = 0;
	if (!n || n >= sizeof(torch_version))
		return;
	for (size_t i = 0; i < n; i++)
		if (!strchr(
			"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			"0123456789.+_-",
			out[i]))
			return;
	memcpy(torch_version, out, n);
	torch_version[n] = 0;
}

const char *peer_impl_name(void)
{
	static char name[80];
	snprintf(name, sizeof(name), "pytorch%s%s", *torch_version ? "-" : "",
		 torch_version);
	return name;
}

/* DQ_PYTHON, when set to a path, names an executable file. */
static int check_dq_python(char *err, size_t errlen)
{
	const char *p = getenv("DQ_PYTHON");
	struct stat st;
	if (!p || !*p || !strchr(p, '/'))
		return 0;
	if (stat(p, &st) != 0) {
		snprintf(err, errlen,
			 "impl=pytorch: DQ_PYTHON=%s does not exist (%s); "
			 "point it to a python3 with torch, or unset it to use "
			 "/usr/bin/python3",
			 p, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode) || access(p, X_OK) != 0) {
		snprintf(err, errlen,
			 "impl=pytorch: DQ_PYTHON=%s is not executable; point "
			 "it to a python3 with torch, or unset it to use "
			 "/usr/bin/python3",
			 p);
		return -1;
	}
	return 0;
}

/* python3 with torch importable, and the script where it should be. */
static int check_python(char *err, size_t errlen)
{
	char *argv[] = {(char *)python_path(), "-c", (char *)TORCH_PROBE, NULL};
	const char *env = getenv("DQ_PYTHON");
	struct proc_out c;
	if (check_dq_python(err, errlen) != 0)
		return -1;
	if (access(script_path(), R_OK) != 0) {
		snprintf(err, errlen,
			 "impl=pytorch: cannot read %s (%s); run from a "
			 "deqbench source tree or set DQ_PYTORCH_SCRIPT",
			 script_path(), strerror(errno));
		return -1;
	}
	proc_run(argv, NULL, 0, 0, &c);
	if (proc_exited_with(&c, 0))
		keep_version(c.out);
	free(c.out);
	if (proc_exited_with(&c, 0))
		return 0;
	if (c.exec_failed && env && *env)
		snprintf(err, errlen,
			 "impl=pytorch: DQ_PYTHON=%s cannot be run (%s); point "
			 "it to a python3 with torch, or unset it to use "
			 "/usr/bin/python3",
			 env, strerror(c.err));
	else
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
	struct proc_out c;
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
	proc_run(argv, in, in ? strlen(in) : 0, 0, &c);
	free(in);
	free(c.out);
	if (!proc_exited_with(&c, 0)) {
		rc = -1;
		if (proc_exited_with(&c, 2) && *c.last)
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

/* ---- the temporary directory of a run ---- */

#define PEER_DIR_PREFIX "deqbench-peer."

/* The directory temporary files go to: $TMPDIR, else /tmp. */
static const char *tmp_root(void)
{
	const char *t = getenv("TMPDIR");
	return t && *t ? t : "/tmp";
}

/* This host's name as it appears in directory names: letters, digits, '-'
 * and '.', others replaced by '_' (fileio.c's temporary names alike). */
static void host_tag(char *buf, size_t n)
{
	if (gethostname(buf, n) != 0 || !buf[0])
		snprintf(buf, n, "localhost");
	buf[n - 1] = 0;
	for (char *p = buf; *p; p++)
		if (!strchr(
			"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			"0123456789-.",
			*p))
			*p = '_';
}

/* Whether NAME is a run directory "deqbench-peer.HOST.PID.XXXXXX" of a
 * process of this host that no longer runs (or an earlier process that
 * had our pid: ours is made after this check). */
static int stale_dir_name(const char *name, const char *host)
{
	size_t pl = strlen(PEER_DIR_PREFIX), hl = strlen(host);
	const char *rnd = strrchr(name, '.'), *pid_s;
	char *end;
	long pid;
	if (strncmp(name, PEER_DIR_PREFIX, pl) || !rnd || strlen(rnd) != 7)
		return 0;
	pid_s = name + pl + hl + 1;
	if (strncmp(name + pl, host, hl) || name[pl + hl] != '.' ||
	    pid_s >= rnd)
		return 0;
	errno = 0;
	pid = strtol(pid_s, &end, 10);
	if (end != rnd || errno || pid <= 0 || pid > INT_MAX)
		return 0;
	if (pid == (long)getpid())
		return 1;
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Removes the directory `name` of the directory dfd: every entry in it but
 * subdirectories, then the directory itself (a run's directory holds only
 * files). Symbolic links are removed, not followed. */
static void remove_run_dir(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Removes the run directories under tmp_root() that processes of this host
 * left behind when killed (SIGKILL leaves no time to clean up): ours, by
 * name, and only those owned by us. */
static void remove_stale_dirs(void)
{
	char host[256];
	DIR *d = opendir(tmp_root());
	struct dirent *de;
	if (!d)
		return;
	host_tag(host, sizeof(host));
	while ((de = readdir(d))) {
		struct stat st;
		if (!stale_dir_name(de->d_name, host) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		remove_run_dir(dirfd(d), de->d_name);
	}
	closedir(d);
}

/* The corpus of cfg as token-id files in a new temporary directory
 * $TMPDIR/deqbench-peer.HOST.PID.XXXXXX (peer_cleanup removes it; a later
 * run removes it when this process was killed first); *V the model's
 * vocabulary. */
static int write_tokens(const struct bench_config *cfg, char *dir, size_t n,
			int *V, char *err, size_t errlen)
{
	struct corpus c;
	char host[256];
	int made;
	if (run_ctx_load_corpus(&c, cfg, V, err, errlen) != 0)
		return -1;
	remove_stale_dirs();
	host_tag(host, sizeof(host));
	snprintf(dir, n, "%s/" PEER_DIR_PREFIX "%s.%ld.XXXXXX", tmp_root(),
		 host, (long)getpid());
	made = mkdtemp(dir) != NULL;
	if (!made || corpus_write_ids(&c, dir) != 0) {
		snprintf(err, errlen,
			 "impl=pytorch: cannot write the tokens under %s (%s); "
			 "set TMPDIR to a writable directory",
			 dir, strerror(errno));
		corpus_free(&c);
		if (made)
			remove_run_dir(AT_FDCWD, dir);
		*dir = 0;
		return -1;
	}
	corpus_free(&c);
	return 0;
}

static void peer_cleanup(const char *dir)
{
	if (*dir)
		remove_run_dir(AT_FDCWD, dir);
}

/* ---- one run ---- */

/* cfg's params= file through deqbench's own loader (params_load:
 * every tensor with the model's shape, the file's model and n_heads,
 * finite values; with eval, the vocabulary of the corpus it was trained
 * on), so impl=pytorch refuses what deqbench refuses, with the same
 * message. The model is built small (on the CPU, one unrolled layer,
 * batch 1): its parameters do not depend on the method or the batch. */
static int check_params_file(const struct bench_config *cfg, int V, int eval,
			     char *err, size_t errlen)
{
	static const char *const small[][2] = {{"device", "cpu"},
					       {"tf32", "false"},
					       {"threads", "1"},
					       {"method", "unroll"},
					       {"layers", "1"},
					       {"batch_size", "1"},
					       {"pretrain_steps", "0"},
					       {"jac_loss_weight", "0"},
					       {"spectral_radius_iters", "0"}};
	struct bench_config c = *cfg;
	struct run_ctx rc;
	struct corpus corp;
	char e[256];
	int rv, Vc;
	for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++)
		config_set(&c, small[i][0], small[i][1], e, sizeof(e));
	if (eval && run_ctx_load_corpus(&corp, cfg, &Vc, err, errlen) != 0)
		return -1;
	rv = run_ctx_create(&rc, &c, V, err, errlen);
	if (rv == 0) {
		rc.corpus = eval ? &corp : NULL;
		rc.vocab_check = eval; /* as the runner's eval */
		rv = params_load(&rc, cfg->params, err, errlen);
		run_ctx_destroy(&rc);
	}
	if (eval)
		corpus_free(&corp);
	return rv;
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
	json_object_set_new(d, "corpus",
			    json_string(corpus_kind_name(cfg->corpus)));
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

/* The record deqtorch.py printed (its last non-empty stdout line), or
 * NULL: with why[0] = 0 when it printed nothing, else why says what is
 * wrong with the line. */
static json_t *child_record(const struct proc_out *c, char *why, size_t n)
{
	char *p;
	json_t *r;
	json_error_t e;
	*why = 0;
	if (!c->out)
		return NULL;
	while (c->n_out && (p = strrchr(c->out, '\n')) && !p[1])
		*p = 0;
	p = strrchr(c->out, '\n');
	p = p ? p + 1 : c->out;
	if (!*p)
		return NULL;
	r = json_loads(p, 0, &e);
	if (!r)
		snprintf(why, n, "%s at column %d of its last stdout line",
			 e.text, e.column);
	else if (!json_is_object(r)) {
		snprintf(why, n, "its last stdout line is not a JSON object");
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

/* The first problem validate_record reports, and their count. */
struct problems {
	int n;
	char first[600];
};

static void note_problem(void *ctx, const char *path, const char *what)
{
	struct problems *p = ctx;
	if (p->n++ == 0)
		snprintf(p->first, sizeof(p->first), "%s: %s",
			 *path ? path : "record", what);
}

/* What the contract asks of a child's record beyond results/SCHEMA.md:
 * impl "pytorch" or "pytorch-VERSION"; an ok training run has its
 * timing, memory and quality, an ok eval its quality. NULL when met, else
 * the problem. */
static const char *contract_problem(const json_t *rec)
{
	static const char *const train[] = {"timing", "memory", "quality",
					    NULL};
	static const char *const eval[] = {"quality", NULL};
	const char *impl = json_string_value(json_object_get(rec, "impl"));
	const char *kind = json_string_value(json_object_get(rec, "kind"));
	const char *const *need = kind && !strcmp(kind, "eval") ? eval : train;
	if (!impl || (strcmp(impl, "pytorch") && strncmp(impl, "pytorch-", 8)))
		return "impl: expected \"pytorch-VERSION\"";
	if (status_of(rec) != RUN_OK)
		return NULL;
	for (int i = 0; need[i]; i++)
		if (!json_is_object(json_object_get(rec, need[i])))
			return "an ok record without its measurements "
			       "(timing, memory or quality null)";
	return NULL;
}

/* The health of m from its trace where the child gave none (health.h;
 * the child always traces a training run, peer_exec). */
static void health_from_trace(json_t *m)
{
	json_t *h;
	if (json_is_null(json_object_get(m, "health")) &&
	    (h = health_of_record(m)))
		json_object_set_new(m, "health", h);
}

/* rec (deqbench's part) with what the child printed and, in its method
 * object, deqbench's label of mc (method_label), when the result is a
 * valid record (validate_record, strict, and contract_problem): returns
 * it as a new record; else NULL with the problem in why. With trace 0
 * the child's trace (asked for the health: peer_exec) gives the record
 * its health and is then left out, as config trace=false says. */
static json_t *merged_record(const json_t *rec, json_t *got,
			     const struct method_config *mc, int trace,
			     char *why, size_t n)
{
	json_t *m = json_deep_copy(rec), *meth;
	struct problems p = {0, ""};
	const char *c;
	char label[128];
	merge_child(m, got);
	if (!trace) {
		health_from_trace(m);
		json_object_set_new(m, "trace", json_null());
	}
	if (json_is_object(meth = json_object_get(m, "method"))) {
		method_label(mc, label, sizeof(label));
		json_object_set_new(meth, "label", json_string(label));
	}
	validate_record(m, VALIDATE_STRICT, note_problem, &p);
	if (!p.n && (c = contract_problem(m)))
		note_problem(&p, "", c);
	if (!p.n)
		return m;
	json_decref(m);
	snprintf(why, n, "%s%s", p.first,
		 p.n > 1 ? " (and more problems)" : "");
	return NULL;
}

/* Sets rec's status and message for a child that gave no usable record:
 * why says what was wrong with what it printed ("" when it printed
 * nothing); the message ends with the child's stderr tail. */
static enum run_status child_failed(json_t *rec, const struct proc_out *c,
				    const char *why)
{
	char m[2048], tail[700];
	enum run_status st = RUN_ERROR;
	proc_tail_line(c, tail, sizeof(tail));
	if (!c->spawned || c->exec_failed)
		snprintf(m, sizeof(m), "impl=pytorch: cannot run %s: %s",
			 python_path(), strerror(c->err));
	else if (*why)
		snprintf(m, sizeof(m),
			 "impl=pytorch: deqtorch.py printed an unusable record "
			 "(%s); its stderr ended: %s",
			 why, tail);
	else if (interrupt_signal()) {
		st = RUN_INTERRUPTED;
		snprintf(m, sizeof(m),
			 "%s: deqtorch.py ended without a record (the signal "
			 "came before it could stop after a step); its stderr "
			 "ended: %s",
			 interrupt_name(), tail);
	} else {
		if (proc_exited_with(c, 2))
			st = RUN_SETUP_FAILED;
		snprintf(m, sizeof(m),
			 "impl=pytorch: deqtorch.py %s %d without a record: %s",
			 WIFEXITED(c->wstatus) ? "exited with status"
					       : "was killed by signal",
			 WIFEXITED(c->wstatus) ? WEXITSTATUS(c->wstatus)
					       : WTERMSIG(c->wstatus),
			 st == RUN_SETUP_FAILED && *c->last ? c->last : tail);
	}
	json_object_set_new(rec, "status",
			    json_string(run_record_status_name(st)));
	json_object_set_new(rec, "message", jsontext_buf(m, sizeof(m)));
	return st;
}

/* deqbench's part of a pytorch run's record: impl, kind, config, suite,
 * host, build; the rest null until the child fills it. */
static json_t *base_record(const struct bench_config *cfg,
			   const struct run_meta *meta, int eval)
{
	json_t *rec = record_new();
	run_record_set_now(rec, "started_at");
	json_object_set_new(rec, "impl", json_string(peer_impl_name()));
	if (eval)
		json_object_set_new(rec, "kind", json_string("eval"));
	json_object_set_new(rec, "config", config_to_json(cfg));
	if (meta && meta->suite)
		json_object_set_new(rec, "suite", run_record_meta_json(meta));
	json_object_set_new(rec, "host", env_host_json());
	json_object_set_new(rec, "build", env_build_json());
	return rec;
}

/* What comes before the child: the token files in dir, *V, the params=
 * check (with eval: of the vocabulary too), and (without params=)
 * deqbench's initial parameters in init. 0, or -1 with one line in err. */
static int prepare(const struct bench_config *cfg, int eval, char *dir,
		   size_t n_dir, int *V, char *init, size_t n_init, char *err,
		   size_t errlen)
{
	if (write_tokens(cfg, dir, n_dir, V, err, errlen) != 0)
		return -1;
	snprintf(init, n_init, "%s/init.safetensors", dir);
	if (*cfg->params)
		return check_params_file(cfg, *V, eval, err, errlen);
	/* the same initial parameters as a deqbench run of cfg: losses of the
	 * two are comparable step by step */
	struct bench_config c = *cfg;
	c.model.vocab_size = *V;
	return params_init(&c, init, err, errlen);
}

/* The record of a finished child of config cfg: its own when usable
 * (merged into rec), else rec as an error record naming the problem. */
static enum run_status take_record(json_t **record, const struct proc_out *c,
				   const struct bench_config *cfg)
{
	char why[800];
	json_t *got = child_record(c, why, sizeof(why)), *m = NULL;
	if (got)
		m = merged_record(*record, got, &cfg->method, cfg->trace, why,
				  sizeof(why));
	json_decref(got);
	if (!m)
		return child_failed(*record, c, why);
	json_decref(*record);
	*record = m;
	return status_of(m);
}

/* The record's finish time when the child did not give one, and its
 * health from its trace (health.h; with trace=true) when the child gave
 * none. Returns st. */
static enum run_status finished(json_t *rec, enum run_status st)
{
	if (!json_is_string(json_object_get(rec, "finished_at")))
		run_record_set_now(rec, "finished_at");
	health_from_trace(rec);
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
	char dir[1024] = "", err[1024], init[1100];
	struct proc_out c;
	enum run_status st;
	char *in;
	int V = 0;

	*record = base_record(cfg, meta, eval);
	if (prepare(cfg, eval, dir, sizeof(dir), &V, init, sizeof(init), err,
		    sizeof(err)) != 0) {
		peer_cleanup(dir);
		json_object_set_new(*record, "message",
				    jsontext_buf(err, sizeof(err)));
		return finished(*record, RUN_SETUP_FAILED);
	}
	if (interrupt_signal()) { /* before the child started: nothing ran */
		peer_cleanup(dir);
		snprintf(err, sizeof(err),
			 "interrupted by %s before the pytorch run started",
			 interrupt_name());
		json_object_set_new(*record, "status",
				    json_string("interrupted"));
		json_object_set_new(*record, "message",
				    jsontext_buf(err, sizeof(err)));
		return finished(*record, RUN_INTERRUPTED);
	}
	/* a training child always traces (its per-step losses and norms are
	 * logged anyway; the trace is formatted after the timed steps): the
	 * record's health comes from it, and merged_record drops it again
	 * under trace=false */
	struct bench_config asked = *cfg;
	asked.trace = asked.trace || !eval;
	in = request_json(&asked, dir, V, *cfg->params ? NULL : init);
	proc_run(argv, in, in ? strlen(in) : 0, !(meta && meta->quiet), &c);
	free(in);
	peer_cleanup(dir);
	st = take_record(record, &c, cfg);
	free(c.out);
	return finished(*record, st);
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
