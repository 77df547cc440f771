/* cmd_suite.c — `deqbench suite`: expands a suite file, checks every run
 * of the shard up front (bad input exits 2 before anything is written),
 * then runs each run in its own child process (run_isolated), so a crash
 * becomes that run's error record, and prints the summary table. Suites
 * with "command": "eval" run deqbench eval for each run (dispatch.h). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "../config/config.h"
#include "../data/data.h"
#include "dispatch.h"
#include "../records/env.h"
#include "../io/fileio.h"
#include "../io/interrupt.h"
#include "../run/memfit.h"
#include "../run/param_files.h"
#include "../pytorch/peer.h"
#include "../io/proc.h"
#include "../records/record.h"
#include "../run/run_ctx.h"
#include "../run/run_record.h"
#include "../suite/suite.h"
#include "../suite/suite_resume.h"

/* ---- suite ---- */

/* Exit status of a suite child whose record went to the rescue file. */
#define CHILD_UNSAVED 3

/* The error record of a suite run whose child died before reporting. */
static json_t *crash_record(const struct suite *s, const struct suite_run *r,
			    const struct run_meta *meta, int wst)
{
	json_t *rec = record_new();
	char ts[32];
	time_t t = time(NULL);
	struct tm tm;

	if (peer_wanted(&r->cfg))
		json_object_set_new(rec, "impl", json_string(peer_impl_name()));
	if (s->eval)
		json_object_set_new(rec, "kind", json_string("eval"));
	json_object_set_new(rec, "config", config_to_json(&r->cfg));
	json_object_set_new(
	    rec, "message",
	    WIFSIGNALED(wst)
		? json_sprintf("run crashed with signal %d (%s)", WTERMSIG(wst),
			       strsignal(WTERMSIG(wst)))
		: json_sprintf("run exited with status %d before writing its "
			       "record",
			       WEXITSTATUS(wst)));
	json_object_set_new(rec, "suite", run_record_meta_json(meta));
	json_object_set_new(rec, "build", env_build_json());
	json_object_set_new(rec, "host", env_host_json());
	gmtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_set_new(rec, "finished_at", json_string(ts));
	return rec;
}

/* Reads fd to its end into a NUL-terminated buffer (NULL when empty). */
static char *read_to_end(int fd)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		ssize_t got;
		if (cap - len < 65536) {
			char *nb = realloc(buf, cap + 65536 + 1);
			if (!nb)
				break;
			buf = nb;
			cap += 65536;
		}
		got = read(fd, buf + len, cap - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	if (buf && len)
		buf[len] = 0;
	else {
		free(buf);
		buf = NULL;
	}
	return buf;
}

/* Child side of run_isolated: runs, saves the record, sends it to the
 * parent through fd and exits 0, or CHILD_UNSAVED when the record could not
 * be appended to out= (record_save kept it). */
static void child_run(const struct suite *s, const struct suite_run *r,
		      const struct run_meta *meta, int fd)
{
	json_t *x;
	char *s2;
	size_t n, off = 0;
	int saved;
	(s->eval ? dispatch_eval : dispatch_run)(&r->cfg, meta, &x);
	saved = record_save(r->cfg.out, x) == 0;
	s2 = record_dumps(x);
	n = s2 ? strlen(s2) : 0;
	while (off < n) {
		ssize_t w = write(fd, s2 + off, n - off);
		if (w < 0 && errno == EINTR)
			continue; /* the parent reads on: finish the record */
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	fflush(NULL);
	_exit(saved ? 0 : CHILD_UNSAVED);
}

/* Runs one suite entry in a child process: a crash or an abort inside one
 * run becomes that run's error record and the suite goes on; each record's
 * max RSS is its own run's; the child dies with the suite (proc.h). The parent never starts OpenMP or BLAS threads,
 * so fork() is safe. *saved: whether the record reached out= (else it is
 * in the rescue file and on stderr). */
static json_t *run_isolated(const struct suite *s, const struct suite_run *r,
			    const struct run_meta *place, int *saved)
{
	int fds[2];
	pid_t pid, parent;
	struct run_meta meta = *place;
	char *buf;
	int wst = 0;
	json_t *rec = NULL;

	meta.index = r->index, meta.combo = r->combo, meta.repeat = r->repeat;
	fflush(NULL);
	parent = getpid();
	pid = pipe(fds) == 0 ? fork() : -2;
	if (pid == -1) {
		close(fds[0]);
		close(fds[1]);
	}
	if (pid < 0) {
		(s->eval ? dispatch_eval : dispatch_run)(&r->cfg, &meta, &rec);
		*saved = record_save(r->cfg.out, rec) == 0;
		return rec;
	}
	if (pid == 0) {
		/* killed with the suite: a kill -9 of the suite leaves no run
		 * training that appends later */
		proc_die_with_parent(parent);
		close(fds[0]);
		child_run(s, r, &meta, fds[1]);
	}
	close(fds[1]);
	buf = read_to_end(fds[0]);
	close(fds[0]);
	while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
		;
	if (buf)
		rec = json_loads(buf, 0, NULL);
	free(buf);
	if (rec) {
		*saved = WIFEXITED(wst) && WEXITSTATUS(wst) == 0;
		return rec;
	}
	/* the child died before reporting: record why */
	rec = crash_record(s, r, &meta, wst);
	*saved = record_save(r->cfg.out, rec) == 0;
	return rec;
}

/* The suite's last line: where the records went, that nothing ran (every
 * run skipped by --resume), or how many records could not be appended
 * (those are in the rescue file and on stderr). */
static void suite_final_line(const struct suite *s, size_t n_runs, int n_ran,
			     int n_unsaved)
{
	char rescue[1024];
	if (!n_ran) {
		printf("\nnothing ran, nothing appended to %s\n",
		       s->runs[0].cfg.out);
		return;
	}
	if (!n_unsaved) {
		printf("\nrecords appended to %s\n", s->runs[0].cfg.out);
		return;
	}
	fflush(stdout);
	fprintf(stderr,
		"deqbench: %d of %zu records could not be appended to out=%s; "
		"each is on stderr above and, unless noted there, in %s\n",
		n_unsaved, n_runs, s->runs[0].cfg.out,
		fileio_rescue_path(rescue, sizeof(rescue)));
}

/* The runs of shard si/sn through peer_check, which checks their
 * impl=pytorch ones with deqtorch.py in one call. */
static int suite_check_peer(const struct suite *s, int si, int sn, char *err,
			    size_t errlen)
{
	const struct bench_config **cfgs =
	    calloc(s->n_runs > 0 ? (size_t)s->n_runs : 1, sizeof(*cfgs));
	int n = 0, rc;
	if (!cfgs) {
		snprintf(err, errlen, "out of memory checking the suite");
		return -1;
	}
	for (int i = 0; i < s->n_runs; i++) {
		const struct bench_config *c = &s->runs[i].cfg;
		if (suite_in_shard(i, si, sn))
			cfgs[n++] = c;
	}
	rc = peer_check(cfgs, n, err, errlen);
	free(cfgs);
	return rc;
}

/* The eval run last checked by check_eval_params. */
struct params_checked {
	const struct bench_config *c; /* NULL: none yet */
	int V;
};

/* The parameter file of an eval run with vocabulary V loads into its model
 * (params_check), as `deqbench eval`'s setup requires; a run with
 * the file, model keys and V of the last one checked (*last) is not read
 * again. 0, or -1 with one line. */
static int check_eval_params(const struct bench_config *c, int V,
			     struct params_checked *last, char *err,
			     size_t errlen)
{
	if (last->c && last->V == V && !strcmp(last->c->params, c->params) &&
	    !memcmp(&last->c->model, &c->model, sizeof(c->model)))
		return 0;
	if (params_check(c, V, err, errlen) != 0)
		return -1;
	last->c = c, last->V = V;
	return 0;
}

/* Up-front checks of the runs of shard si/sn, so that bad input exits 2
 * with nothing written whichever shard meets it: each run's files (none
 * the same as another or as the suite file; params= and save_params=
 * usable: check_params_key), the impl=pytorch runs by deqtorch.py
 * (peer.h), every corpus there (loading it also builds its cache once,
 * before the runs fork; a corpus is resolved again only when it differs
 * from the previous run of this shard), every deqbench run within memory
 * (memfit.h) and, in an eval suite, its parameter file loading into its
 * model, then every output writable (each out= once in a row; and an
 * eval's eval_tokens at least one batch). */
static int suite_check_runs(const struct suite *s, const char *path, int si,
			    int sn, char *err, size_t errlen)
{
	for (int i = 0; i < s->n_runs; i++)
		if (suite_in_shard(i, si, sn) &&
		    (check_distinct_files(&s->runs[i].cfg, NULL, path, err,
					  errlen) != 0 ||
		     check_params_key(&s->runs[i].cfg, s->eval, err, errlen) !=
			 0))
			return -1;
	if (suite_check_peer(s, si, sn, err, errlen) != 0)
		return -1;
	for (int pass = 0; pass < 2; pass++) {
		const struct bench_config *prev = NULL;
		struct params_checked checked = {NULL, 0};
		int V = 0;
		for (int i = 0; i < s->n_runs; i++) {
			const struct bench_config *c = &s->runs[i].cfg;
			int rc = 0;
			if (!suite_in_shard(i, si, sn))
				continue;
			if (pass == 1) {
				if (!prev || strcmp(c->out, prev->out))
					rc = record_check_out(c->out, err,
							      errlen);
				prev = c;
				if (rc == 0 && s->eval)
					rc = check_eval_tokens(c, err, errlen);
			} else {
				if (!prev || c->corpus != prev->corpus ||
				    strcmp(c->data_dir, prev->data_dir) ||
				    c->model.vocab_size !=
					prev->model.vocab_size)
					rc = run_ctx_resolve_vocab(c, &V, err,
								   errlen);
				if (rc == 0 && !peer_wanted(c))
					rc = memfit_check(c, V, NULL, !s->eval,
							  err, errlen);
				if (rc == 0 && s->eval && !peer_wanted(c))
					rc = check_eval_params(c, V, &checked,
							       err, errlen);
				prev = c;
			}
			if (rc != 0)
				return -1;
		}
	}
	return 0;
}

#define SUITE_USAGE                                                            \
	"deqbench suite FILE.json [--dry-run] [--shard I/N] [--resume] "       \
	"[--lanes N] [key=value ...]"

/* What `deqbench suite` was given. */
struct suite_args {
	const char *path; /* the suite file */
	int dry, si, sn;  /* --dry-run, --shard si/sn */
	int resume;	  /* --resume: skip runs with an ok record in out= */
	int lanes;	  /* --lanes N: N lanes side by side (records say so) */
	int help;	  /* --help given: the usage is printed, nothing runs */
	int n_over;
	char **over; /* n_over key=value overrides (argc slots) */
};

/* --lanes N (argv[*i], its value there or next) into a->lanes: 1..1000,
 * once. 0, or bad input's exit status after its message. */
static int lanes_arg(int argc, char **argv, int *i, struct suite_args *a)
{
	char err[256], *end;
	const char *v = argv[*i][7] == '=' ? argv[*i] + 8
			: *i + 1 < argc	   ? argv[++*i]
					   : "";
	long n = strtol(v, &end, 10);
	if (a->lanes) {
		snprintf(err, sizeof(err),
			 "suite: --lanes is given twice; give it once");
		return bad_input(err);
	}
	if (end == v || *end || n < 1 || n > 1000) {
		snprintf(err, sizeof(err),
			 "--lanes %.50s: expected how many suites run side by "
			 "side on this host, 1..1000, e.g. --lanes 2",
			 v);
		return bad_input(err);
	}
	a->lanes = (int)n;
	return 0;
}

/* Reads the arguments of `deqbench suite` into *a. 0 (after printing the
 * usage when --help comes before any bad argument), or bad input's exit
 * status after its message (a flag given twice is one: --shard 0/2
 * --shard 1/2 would otherwise run the second shard silently). */
static int parse_suite_args(int argc, char **argv, struct suite_args *a)
{
	char err[1024];
	const char *shard = NULL;
	for (int i = 0; i < argc; i++) {
		const char *twice = NULL;
		if (!strcmp(argv[i], "--dry-run"))
			twice = a->dry++ ? "--dry-run" : NULL;
		else if (!strcmp(argv[i], "--resume"))
			twice = a->resume++ ? "--resume" : NULL;
		else if (!strcmp(argv[i], "--shard") ||
			 !strncmp(argv[i], "--shard=", 8)) {
			const char *v = argv[i][7] == '=' ? argv[i] + 8
					: i + 1 < argc	  ? argv[++i]
							  : "";
			if (shard) {
				snprintf(err, sizeof(err),
					 "suite: --shard is given twice "
					 "(%.100s, then %.100s); give it once",
					 shard, v);
				return bad_input(err);
			}
			shard = v;
			if (suite_shard_parse(v, &a->si, &a->sn, err,
					      sizeof(err)))
				return bad_input(err);
		} else if (!strcmp(argv[i], "--lanes") ||
			   !strncmp(argv[i], "--lanes=", 8)) {
			int rc = lanes_arg(argc, argv, &i, a);
			if (rc != 0)
				return rc;
		} else if (!strcmp(argv[i], "--help") ||
			   !strcmp(argv[i], "-h")) {
			printf("usage: " SUITE_USAGE "\n");
			a->help = 1;
			return 0;
		} else if (argv[i][0] == '-') {
			snprintf(err, sizeof(err),
				 "unknown flag '%s'; suite takes --dry-run, "
				 "--shard I/N, --resume and --lanes N",
				 argv[i]);
			return bad_input(err);
		} else if (strchr(argv[i], '='))
			a->over[a->n_over++] = argv[i];
		else if (!a->path)
			a->path = argv[i];
		else {
			snprintf(
			    err, sizeof(err),
			    "unexpected argument '%s'; usage: " SUITE_USAGE,
			    argv[i]);
			return bad_input(err);
		}
		if (twice) {
			snprintf(err, sizeof(err),
				 "suite: %s is given twice; give it once",
				 twice);
			return bad_input(err);
		}
	}
	if (!a->path)
		return bad_input("suite: give a suite file, e.g. deqbench "
				 "suite bench/suites/default.json");
	return 0;
}

/* Loads A's suite file with its overrides, which may not repeat a key. 0,
 * or bad input's exit status after its message. */
static int load_suite(const struct suite_args *a, struct suite *s)
{
	char err[1024], e[1100];
	if (config_args_unique(a->n_over, a->over, err, sizeof(err)) != 0) {
		snprintf(e, sizeof(e), "command line: %s", err);
		return bad_input(e);
	}
	if (suite_load(s, a->path, a->n_over, a->over, err, sizeof(err)) != 0)
		return bad_input(err);
	if (s->n_collapsed)
		fprintf(stderr,
			"deqbench: %s; %d run(s) of the expansion collapsed "
			"so (deqbench suite --dry-run lists what runs)\n",
			s->collapsed_note, s->n_collapsed);
	return 0;
}

/* What an interrupted suite says: from which run on nothing ran (stopped_at
 * -1: the signal came during the shard's last run). */
static void interrupted_line(const struct suite *s, int stopped_at)
{
	fflush(stdout);
	if (stopped_at < 0)
		fprintf(stderr,
			"deqbench: suite %s interrupted during its last "
			"run; the records so far are in out=\n",
			s->name);
	else
		fprintf(stderr,
			"deqbench: suite %s interrupted: runs %d.. of %d did "
			"not run (deqbench suite FILE --dry-run lists them by "
			"index); the records so far are in out=; the same "
			"command with --resume runs only what has no ok "
			"record\n",
			s->name, stopped_at, s->n_runs);
}

/* --resume before run i: 1 when it is skipped (its ok record, now used, is
 * added to records, or another process is running it), else 0 (the caller
 * runs it and then releases its claim). */
static int resume_skips(struct resume *rs, const struct suite *s, int i,
			json_t *records, int *n_skip, int *n_busy)
{
	json_t *rec = NULL;
	switch (rs ? resume_claim(rs, s, &s->runs[i], &rec) : RESUME_RUN) {
	case RESUME_DONE:
		fprintf(stderr,
			"[%d] skipped (--resume): its ok record is in "
			"out=\n",
			i);
		json_array_append_new(records, rec);
		++*n_skip;
		return 1;
	case RESUME_BUSY:
		fprintf(stderr,
			"[%d] skipped (--resume): another deqbench suite is "
			"running it and appends its record to out=\n",
			i);
		++*n_busy;
		return 1;
	default:
		return 0;
	}
}

/* The lines after the summary table of a suite with --resume. */
static void resume_lines(int n_skip, int n_busy)
{
	if (n_skip)
		printf(
		    "\n--resume: %d run(s) skipped, their ok records already "
		    "in out=; their rows above are those records\n",
		    n_skip);
	if (n_busy)
		printf("\n--resume: %d run(s) skipped while another deqbench "
		       "suite runs them; their records are not in the table\n",
		       n_busy);
}

/* Runs the runs of shard si/sn, each in its own process (run_isolated),
 * but those --resume skips (rs non-NULL), then prints the summary table
 * and the last line. Exit status 1 when a run ended in error or a record
 * could not be appended, else 0 (a diverged run is a result). */
/* "1h02m", "3m05s" or "42s" of t seconds into buf. */
static void fmt_duration(char *buf, size_t n, double t)
{
	long s = t > 0 ? (long)(t + 0.5) : 0;
	if (s >= 3600)
		snprintf(buf, n, "%ldh%02ldm", s / 3600, s / 60 % 60);
	else if (s >= 60)
		snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
	else
		snprintf(buf, n, "%lds", s);
}

/* The suite's progress before a run, one plain line on stderr (terminal
 * or not): "deqbench: suite NAME: run K of N (index I), elapsed T, ETA
 * E" — ETA from the mean wall time of the runs this process ran, once
 * one has. */
static void suite_progress(const struct suite *s, int k, int n, int index,
			   double elapsed, int n_ran, double ran_s)
{
	char el[32], eta[48] = "";
	fmt_duration(el, sizeof(el), elapsed);
	if (n_ran > 0) {
		char d[32];
		fmt_duration(d, sizeof(d), ran_s / n_ran * (n - k + 1));
		snprintf(eta, sizeof(eta), ", ETA %s", d);
	}
	fprintf(stderr,
		"deqbench: suite %s: run %d of %d (index %d), elapsed %s%s\n",
		s->name, k, n, index, el, eta);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int run_suite(const struct suite *s, const struct suite_args *a,
		     struct resume *rs)
{
	const int si = a->si, sn = a->sn;
	const struct run_meta place = {
	    .suite = s->name,
	    .order = suite_order_name(s->order),
	    .order_seed = s->order_seed,
	    .shard_i = si,
	    .shard_n = sn,
	    .lanes = a->lanes,
	};
	double t0 = now_s(), ran_s = 0;
	int n_shard = 0, k = 0;
	for (int i = 0; i < s->n_runs; i++)
		n_shard += suite_in_shard(i, si, sn);
	json_t *records = json_array();
	int any_error = 0, n_unsaved = 0, stopped_at = -1, n_skip = 0;
	int unsaved_at = -1, n_busy = 0, n_ran = 0;
	interrupt_install();
	for (int i = 0; i < s->n_runs; i++) {
		json_t *rec;
		const char *st;
		int saved;
		if (!suite_in_shard(i, si, sn))
			continue;
		if (interrupt_signal()) {
			stopped_at = i;
			break;
		}
		k++;
		if (resume_skips(rs, s, i, records, &n_skip, &n_busy))
			continue;
		suite_progress(s, k, n_shard, i, now_s() - t0, n_ran, ran_s);
		double t_run = now_s();
		rec = run_isolated(s, &s->runs[i], &place, &saved);
		ran_s += now_s() - t_run;
		resume_release(rs);
		n_ran++;
		n_unsaved += !saved;
		st = json_string_value(json_object_get(rec, "status"));
		if (strcmp(st, "ok")) {
			fprintf(
			    stderr, "deqbench: run %d %s: %s\n", i, st,
			    json_string_value(json_object_get(rec, "message")));
			any_error |= !strcmp(st, "error");
		}
		json_array_append_new(records, rec);
		if (!saved) { /* out= cannot take records: stop here */
			unsaved_at = i;
			break;
		}
	}
	print_summary(records);
	resume_lines(n_skip, n_busy);
	suite_final_line(s, json_array_size(records), n_ran, n_unsaved);
	json_decref(records);
	if (unsaved_at >= 0)
		fprintf(stderr,
			"deqbench: suite %s stopped after run %d: its record "
			"could not be appended to out=; the later runs did not "
			"run; once out= is writable, the same command with "
			"--resume runs what has no ok record there\n",
			s->name, unsaved_at);
	if (interrupt_signal()) {
		interrupted_line(s, stopped_at);
		return interrupt_exit_status();
	}
	return any_error || n_unsaved ? 1 : 0;
}

int cmd_suite(int argc, char **argv)
{
	struct suite_args a = {.sn = 1};
	char err[1024];
	struct suite s;
	struct resume *rs = NULL;
	int rc;

	if (!(a.over = calloc((size_t)argc + 1, sizeof(*a.over))))
		return bad_input("out of host memory");
	rc = parse_suite_args(argc, argv, &a);
	if (rc == 0 && !a.help)
		rc = load_suite(&a, &s);
	free(a.over);
	if (rc != 0 || a.help)
		return rc;
	if (a.dry) {
		suite_print_runs(&s, a.si, a.sn, stdout);
		suite_free(&s);
		return 0;
	}
	if (suite_check_runs(&s, a.path, a.si, a.sn, err, sizeof(err)) != 0 ||
	    (a.resume &&
	     !(rs = resume_open(&s, a.si, a.sn, err, sizeof(err))))) {
		suite_free(&s);
		return bad_input(err);
	}
	rc = run_suite(&s, &a, rs);
	resume_close(rs);
	suite_free(&s);
	return rc;
}
