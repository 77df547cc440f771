/* main.c — the deqbench command line.
 *
 *   deqbench run [FILE.json] [key=value ...]
 *   deqbench eval [FILE.json] [key=value ...] params=P.safetensors
 *   deqbench suite FILE.json [--dry-run] [--shard I/N] [--resume]
 *                  [--lanes N] [key=value ...]
 *   deqbench report FILE.jsonl ...
 *   deqbench validate [--strict] FILE.jsonl ...
 *   deqbench env
 *   deqbench params init [FILE.json] [key=value ...] out=P.safetensors
 *   deqbench grad [FILE.json] [key=value ...] params=P.safetensors
 *                 tokens=TOK.safetensors out=G.safetensors
 *   deqbench bench-block [...]
 *
 * Exit status: 0 success; 1 a run failed at run time (its record says why)
 * or a record could not be appended to out= (it is then on stderr and in
 * the rescue file, record_save); 2 bad input (one line on stderr naming the
 * file, key or value and the fix; nothing is written).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../methods/solver_types.h"
#include "cmd.h"
#include "../config/config.h"
#include "../data/data.h"
#include "dispatch.h"
#include "dq_build.h"
#include "dq_git.h"
#include "../records/env.h"
#include "../io/fileio.h"
#include "../io/interrupt.h"
#include "../io/jsontext.h"
#include "../run/memfit.h"
#include "../run/param_files.h"
#include "../pytorch/peer.h"
#include "../records/record.h"
#include "../records/record_usable.h"
#include "../report/report.h"
#include "../suite/suite.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: deqbench COMMAND ...\n"
		"  run [FILE.json] [key=value ...]     train once, append a "
		"record\n"
		"  eval [FILE.json] [key=value ...] params=P.safetensors\n"
		"                                      evaluate trained "
		"parameters, append a record\n"
		"  suite FILE.json [--dry-run] [--shard I/N] [--resume] "
		"[--lanes N]\n"
		"                  [key=value ...]\n"
		"  report FILE.jsonl ...               summary table of "
		"records\n"
		"  compare BASE NEW [--match KEY] [--fail-above PCT] "
		"[--format md|csv|json]\n"
		"                                      pair configurations, "
		"ratios, U test, verdicts\n"
		"  validate [--strict] FILE.jsonl ...  check records against "
		"results/SCHEMA.md\n"
		"  env                                 host and device facts "
		"(JSON)\n"
		"  params init [FILE.json] [key=value ...] out=P.safetensors\n"
		"  grad [key=value ...] params=P.safetensors "
		"tokens=T.safetensors out=G.safetensors\n"
		"  bench-block [...]                   time one block "
		"forward/vjp\n"
		"  price [RECORDS.jsonl] [key=value ...] [out=PRICES.jsonl]\n"
		"                                      each work unit's "
		"price, interleaved\n"
		"  plan budget_mib=M [FILE.json] [key=value ...]\n"
		"                                      the fastest methods "
		"that fit M MiB\n"
		"  --version\n"
		"`deqbench run --help` lists the config keys and defaults.\n");
}

static int has_help(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	return 0;
}

/* One line after `deqbench run`: what ran (the method's label, method.label
 * of the record) and its headline figures. */
static void print_run_line(const json_t *rec)
{
	const json_t *cfg = json_object_get(rec, "config");
	const char *st = json_string_value(json_object_get(rec, "status"));
	const char *label = json_string_value(
	    json_object_get(json_object_get(rec, "method"), "label"));
	if (!label) /* no method object: the run did not get that far */
		label = json_string_value(json_object_get(cfg, "method"));
	const char *impl = json_string_value(json_object_get(rec, "impl"));
	const char *prec = json_string_value(json_object_get(cfg, "precision"));
	int graphs = json_is_true(json_object_get(cfg, "cuda_graphs"));
	int cap =
	    (int)json_integer_value(json_object_get(cfg, "device_mem_cap_mib"));
	char extra[64] = "";
	/* a run not at the defaults of precision, graphs and the memory cap
	 * says so */
	if (prec && strcmp(prec, "fp32"))
		snprintf(extra, sizeof(extra), " %s", prec);
	if (graphs)
		strcat(extra, " graphs");
	if (cap > 0)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
			 " cap %d MiB", cap);
	if (impl && strcmp(impl, "deqbench"))
		printf("%s: ", impl);
	printf("%s: %s %s%s on %s, %.0f steps: step %.3g ms (median), "
	       "%.0f tokens/s, depth+solver peak %.3g MiB, total peak %.3g "
	       "MiB, valid ppl %.5g (%.0f tokens), test ppl %.5g (%.0f "
	       "tokens)\n",
	       st ? st : "?", json_string_value(json_object_get(cfg, "model")),
	       label ? label : "?", extra,
	       json_string_value(json_object_get(cfg, "corpus")),
	       record_num(cfg, "steps"),
	       record_num(rec, "timing.step_ms.median"),
	       record_num(rec, "timing.tokens_per_s"),
	       record_num(rec, "memory.peak_depth_solver_bytes") / 1048576.0,
	       record_num(rec, "memory.peak_total_bytes") / 1048576.0,
	       record_num(rec, "quality.valid_ppl"),
	       record_num(rec, "quality.valid_eval_tokens"),
	       record_num(rec, "quality.test_ppl"),
	       record_num(rec, "quality.test_eval_tokens"));
}

/* ---- run, eval ---- */

/* Exit status of `run` (docs/commands.md): 0 for a result (ok or diverged) appended
 * to out=; 1 when the run failed after setup or its record could not be
 * appended (record_save kept it in the rescue file); 130 / 143 when
 * SIGINT / SIGTERM interrupted it (its record, status interrupted, is
 * saved). RUN_SETUP_FAILED is bad input (2) and handled before any record
 * is saved. */
static int run_exit_status(enum run_status st, int saved)
{
	/* a signal after the run (saving its record) ends it the same way */
	if (st == RUN_INTERRUPTED || interrupt_signal())
		return interrupt_exit_status();
	return st == RUN_ERROR || !saved ? 1 : 0;
}

/* One line after `deqbench eval`: perplexities, inference time and the
 * forward solve. */
static void print_eval_line(const json_t *rec)
{
	const json_t *cfg = json_object_get(rec, "config");
	const char *st = json_string_value(json_object_get(rec, "status"));
	printf("%s: eval %s %s of %s: valid ppl %.5g (%.0f tokens), test ppl "
	       "%.5g, inference %.3g ms per batch (median of %.0f), %.3g "
	       "forward evals per batch, depth+solver peak %.3g MiB\n",
	       st ? st : "?", json_string_value(json_object_get(cfg, "model")),
	       json_string_value(json_object_get(cfg, "method")),
	       json_string_value(json_object_get(cfg, "params")),
	       record_num(rec, "quality.valid_ppl"),
	       record_num(rec, "quality.valid_eval_tokens"),
	       record_num(rec, "quality.test_ppl"),
	       record_num(rec, "inference.step_ms.median"),
	       record_num(rec, "inference.batches_timed"),
	       record_num(rec, "inference.forward_evals_per_batch"),
	       record_num(rec, "inference.memory.peak_depth_solver_bytes") /
		   1048576.0);
}

/* `run` or, with eval, `eval`. */
static int cmd_run_or_eval(int argc, char **argv, int eval)
{
	struct bench_config cfg;
	struct eval_origin origin;
	char err[1024];
	json_t *rec, *all;
	enum run_status st;
	const char *msg;
	int saved;

	if (argc == 1 && !strcmp(argv[0], "--help-markdown")) {
		config_print_markdown(stdout);
		return 0;
	}
	if (argc == 1 && !strcmp(argv[0], "--help-json")) {
		config_print_json(stdout);
		return 0;
	}
	if (has_help(argc, argv)) {
		if (eval)
			printf(
			    "usage: deqbench eval [FILE.json] [key=value ...] "
			    "params=P.safetensors\n  evaluates P on the "
			    "valid and test splits with the configured "
			    "method's forward; the keys are run's:\n\n");
		config_print_help(stdout);
		return 0;
	}
	if (eval
		? eval_parse_config(&cfg, argc, argv, &origin, err, sizeof(err))
		: (parse_config_args(&cfg, argc, argv, NULL, NULL, err,
				     sizeof(err)) ||
		   config_check_method_keys(&cfg, err, sizeof(err))))
		return bad_input(err);
	/* cheap checks first, so bad input leaves no empty results file */
	if (check_distinct_files(&cfg, config_file_arg(argc, argv), NULL, err,
				 sizeof(err)) != 0 ||
	    (eval ? eval_corpus_check(&cfg, &origin, err, sizeof(err))
		  : corpus_check(corpus_kind_name(cfg.corpus), cfg.data_dir,
				 err, sizeof(err))) != 0 ||
	    check_params_key(&cfg, eval, err, sizeof(err)) != 0 ||
	    (eval && check_eval_tokens(&cfg, err, sizeof(err)) != 0) ||
	    dispatch_precheck(&cfg, eval, err, sizeof(err)) != 0 ||
	    record_check_out(cfg.out, err, sizeof(err)) != 0)
		return bad_input(err);
	interrupt_install();
	st = (eval ? dispatch_eval : dispatch_run)(&cfg, NULL, &rec);
	msg = json_string_value(json_object_get(rec, "message"));
	if (st == RUN_SETUP_FAILED) {
		/* missing corpus, bad sizes: bad input, no record */
		snprintf(err, sizeof(err), "%s", msg ? msg : "setup failed");
		json_decref(rec);
		return bad_input(err);
	}
	saved = record_save(cfg.out, rec) == 0;
	if (st != RUN_OK)
		fprintf(stderr, "deqbench: run %s: %s\n",
			st == RUN_DIVERGED	? "diverged"
			: st == RUN_INTERRUPTED ? "interrupted"
						: "failed",
			msg);
	all = json_array();
	json_array_append(all, rec);
	print_summary(all);
	printf("\n");
	(eval ? print_eval_line : print_run_line)(rec);
	if (saved)
		printf("record appended to %s\n", cfg.out);
	json_decref(rec);
	json_decref(all);
	return run_exit_status(st, saved);
}

/* ---- report ---- */

/* ---- env ---- */

static int cmd_env(void)
{
	json_t *o = json_object(), *devs = json_array();
	char *s;
	json_object_set_new(o, "host", env_host_json());
	for (int i = 0; backend_names[i]; i++) {
		struct backend *be;
		char err[512];
		if (backend_create(&be, backend_names[i], 0, err,
				   sizeof(err)) == 0) {
			json_array_append_new(
			    devs, env_device_json(be, backend_names[i], 0));
			backend_destroy(be);
		} else {
			json_t *d = json_object();
			json_object_set_new(d, "device",
					    json_string(backend_names[i]));
			json_object_set_new(d, "error",
					    jsontext_buf(err, sizeof(err)));
			json_array_append_new(devs, d);
		}
	}
	json_object_set_new(o, "devices", devs);
	json_object_set_new(o, "build", env_build_json());
	const char *warn = json_string_value(json_object_get(
	    json_object_get(json_object_get(o, "host"), "blas"), "warning"));
	if (warn)
		fprintf(stderr, "deqbench: %s\n", warn);
	s = json_dumps(o, JSON_INDENT(2));
	printf("%s\n", s);
	free(s);
	json_decref(o);
	return 0;
}

/* ---- params / grad ---- */

/* out= of params init and grad, checked before any work
 * (params_check_out: a new path or a safetensors file, never a file of
 * records or a config). */
static int check_replace_out(const char *out)
{
	char err[1024];
	if (params_check_out("out=", out, err, sizeof(err)) == 0)
		return 0;
	return bad_input(err);
}

static int cmd_params(int argc, char **argv)
{
	static const char *const extra[] = {"out", NULL};
	const char *val[1] = {NULL};
	struct bench_config cfg;
	char err[1024];

	if (argc < 1 || strcmp(argv[0], "init") || has_help(argc, argv)) {
		fprintf(argc && has_help(argc, argv) ? stdout : stderr,
			"usage: deqbench params init [FILE.json] "
			"[key=value ...] out=P.safetensors\n");
		return has_help(argc, argv) ? 0 : EXIT_BAD_INPUT;
	}
	if (parse_config_args(&cfg, argc - 1, argv + 1, extra, val, err,
			      sizeof(err)) ||
	    peer_refuse(&cfg, "params init", err, sizeof(err)))
		return bad_input(err);
	if (!val[0])
		return bad_input("params init: give out=P.safetensors");
	{
		const struct fileio_named f[] = {
		    {"the config file ", config_file_arg(argc - 1, argv + 1),
		     0},
		    {"out=", val[0], 1}};
		if (fileio_distinct(f, 2, err, sizeof(err)) != 0)
			return bad_input(err);
	}
	if (check_replace_out(val[0]) != 0)
		return EXIT_BAD_INPUT;
	if (params_init(&cfg, val[0], err, sizeof(err)) != 0)
		return bad_input(err);
	return 0;
}

/* One line on stderr for a solve of `deqbench grad`, e.g.
 * "deqbench grad: forward solve (broyden): 14 iters, rel residual 8.1e-04,
 * converged (f_tol 0.001)". */
static void print_solve_line(const char *what, const char *key,
			     const struct solve_stats *s)
{
	fprintf(stderr,
		"deqbench grad: %s solve (%s): %d iters, %s residual %.3g, "
		"%s (%s_tol %g)\n",
		what, solver_kind_name(s->solver), s->iters,
		stop_mode_name(s->stop), s->residual,
		s->converged ? "converged" : "NOT converged", key, s->tol);
}

/* The files of grad: params= and tokens= not a FIFO, directory or device
 * (refused, never waited on), none of them the same file as out= or the
 * config file.
 * val: params, tokens, out. 0, or -1 with one line. */
static int check_grad_files(const char *config_file, const char *const *val,
			    char *err, size_t errlen)
{
	static const char *const fix[] = {
	    "a file written by deqbench params init or save_params=",
	    "a safetensors file with int32 tokens [B, T+1]"};
	const struct fileio_named f[] = {{"the config file ", config_file, 0},
					 {"params=", val[0], 0},
					 {"tokens=", val[1], 0},
					 {"out=", val[2], 1}};
	char e[900];
	if (fileio_distinct(f, 4, err, errlen) != 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		int fd = fileio_open_read(val[i], e, sizeof(e));
		/* not a regular file; a missing one is params_grad's to name,
		 * after what it checks first */
		if (fd < 0 && (errno == EISDIR || errno == EINVAL)) {
			snprintf(err, errlen, "%s%s; give the path of %s",
				 f[i + 1].what, e, fix[i]);
			return -1;
		}
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

static int cmd_grad(int argc, char **argv)
{
	static const char *const extra[] = {"params", "tokens", "out", NULL};
	const char *val[3] = {NULL, NULL, NULL};
	struct bench_config cfg;
	struct method_stats st;
	char err[1024];

	if (has_help(argc, argv)) {
		printf("usage: deqbench grad [FILE.json] [key=value ...] "
		       "params=P.safetensors tokens=T.safetensors "
		       "out=G.safetensors\n");
		return 0;
	}
	if (parse_config_args(&cfg, argc, argv, extra, val, err, sizeof(err)) ||
	    peer_refuse(&cfg, "grad", err, sizeof(err)))
		return bad_input(err);
	for (int i = 0; i < 3; i++)
		if (!val[i]) {
			snprintf(err, sizeof(err),
				 "grad: give %s=FILE.safetensors (params=, "
				 "tokens= and out= are required)",
				 extra[i]);
			return bad_input(err);
		}
	if (check_grad_files(config_file_arg(argc, argv), val, err,
			     sizeof(err)) != 0)
		return bad_input(err);
	if (check_replace_out(val[2]) != 0)
		return EXIT_BAD_INPUT;
	if (params_grad(&cfg, val[0], val[1], val[2], &st, err, sizeof(err)) !=
	    0)
		return bad_input(err);
	if (st.has_fwd_solve)
		print_solve_line("forward", "f", &st.fwd);
	if (st.has_bwd_solve)
		print_solve_line("backward", "b", &st.bwd);
	return 0;
}

/* OpenMP threads that spin-wait between parallel regions steal the core
 * from the thread doing the serial part of a step when there are as many
 * threads as cores (the 2-core CI machines): bench-block on such a host ran
 * a block forward+VJP in a median of 24 ms under libgomp's default
 * policy against 17 ms with OMP_WAIT_POLICY=passive. libgomp reads the
 * variable once, when it loads, so it is set here and the process
 * re-executes itself; OMP_WAIT_POLICY set by the user is left as it is and
 * recorded (build.omp_wait_policy). If the re-exec fails, the run goes on
 * with the library default. */
static void omp_wait_policy_default(char **argv)
{
	if (getenv("OMP_WAIT_POLICY"))
		return;
	if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0)
		return;
	execv("/proc/self/exe", argv);
	unsetenv("OMP_WAIT_POLICY");
}

static int cmd_run(int argc, char **argv)
{
	return cmd_run_or_eval(argc, argv, 0);
}

static int cmd_eval(int argc, char **argv)
{
	return cmd_run_or_eval(argc, argv, 1);
}

/* The commands that take the arguments after their name. */
static const struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
    {"run", cmd_run},	      {"eval", cmd_eval},
    {"suite", cmd_suite},     {"report", cmd_report},
    {"params", cmd_params},   {"grad", cmd_grad},
    {"plan", cmd_plan},	      {"validate", cmd_validate},
    {"compare", cmd_compare}, {"price", cmd_price},
};

int main(int argc, char **argv)
{
	omp_wait_policy_default(argv);
	const char *cmd = argc > 1 ? argv[1] : "";
	char e[512];

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(cmd, commands[i].name))
			return commands[i].fn(argc - 2, argv + 2);
	if (!strcmp(cmd, "env"))
		return cmd_env();
	if (!strcmp(cmd, "bench-block"))
		return cmd_bench_block(argc - 1, argv + 1);
	if (!strcmp(cmd, "--version")) {
		printf("deqbench %s (%s, %s)\n", DQ_VERSION, DQ_GIT_COMMIT,
		       DQ_BUILDTYPE);
		return 0;
	}
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") ||
	    !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!*cmd)
		return bad_input(
		    "give a command: run, eval, suite, report, compare, plan, "
		    "validate, env, params, grad, price or bench-block "
		    "(deqbench "
		    "--help lists them)");
	snprintf(
	    e, sizeof(e),
	    "unknown command '%.200s'; use run, eval, suite, report, "
	    "compare, plan, validate, env, params, grad, price or bench-block "
	    "(deqbench --help)",
	    cmd);
	return bad_input(e);
}
