/*
 * test_deq_tools.c — the DEQ Jacobian tools and bookkeeping of
 * methods/deq.c on the CPU backends:
 *
 *   1. Spectral radius by power iteration on tanh_cell where ρ is known
 *      (a non-normal W at z* = 0; a diagonal W at a z* ≠ 0), and NAN where
 *      it cannot be measured.
 *   2. Exact depth memory of every combination of b_mode, the Jacobian
 *      regulariser and the spectral radius against the allocator and
 *      method_memory; evaluation counts; no allocation in a step.
 *   3. Records (runner): solver.jac_loss_mean, trace.jac_loss,
 *      quality.valid_spectral_radius; bad input exits 2 naming the key.
 *
 * Tolerances are justified where they are used.
 */
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../methods/checkpoint.h"
#include "../methods/deq.h"
#include "bench/config/config.h"
#include "bench/run/runner.h"
#include "methods/method.h"

#define DQ_TEST_SEED 23
#include "test_util.h"

#include "test_deq_util.h"

static const struct shape odd = {3, 5, 12, 3, 20, 17};

/* ------------------------------------------------- 3. spectral radius */

/* Uploads W (d×d, host) as cell.weight. */
static void set_cell(struct model *m, const double *w)
{
	const struct model_param *p = model_param_find(m, "cell.weight");
	up(m->be, dq_at(m->be, m->param_buf, p->offset), w, p->numel);
}

/* tanh_cell, f(z) = tanh(z Wᵀ + u) per row, J = diag(1 − f²) W per row,
 * block-diagonal over the B·T rows.
 * (a) u = 0: z* = 0 exactly (the first residual is 0), J = W. W upper
 *     triangular with diagonal 0.9, then |w_ii| ≤ 0.5, and w_01 = 0.8:
 *     ρ = 0.9 while ‖W‖₂ ≥ ‖(0.9, 0.8)‖ = 1.2, so the norm would fail.
 * (b) W diagonal, u = 0.1 at (row 0, col 0), |u| ≥ 2 elsewhere in column
 *     0, N(0, 1) elsewhere: ρ = max over elements of (1 − z*²)|w_i| from
 *     the solved z*, 0.68 at (0, 0) (0.8 at z = 0: the point matters).
 * Convergence factors 0.5/0.9 and 0.3/0.68 per iteration: 120
 * iterations leave < 1e-30; tolerance 1e-9 (solver 1e-12). */
Test(spectral, tanh_cell_known_radius)
{
	struct backend *be = make_be("cpu64");
	struct model *m = deq_model(be, MODEL_TANH_CELL, odd);
	size_t d = (size_t)m->d, n = m->n_state, N = n / d;
	double *w = host(d * d), *u = host(n);
	void *z = dev_state(m), *du = dev(be, n);
	struct method_config c = deq_cfg(BMODE_IFT);
	deq_config(&c)->spectral_radius_iters = 120;
	deq_config(&c)->f_tol = 1e-12;
	deq_config(&c)->f_stop_mode = STOP_ABS;
	deq_config(&c)->f_max_iter = 100;
	struct method *me = make_method(m, c, 3);
	for (size_t i = 0; i < d; i++) {
		w[i * d + i] = i == 0 ? 0.9 : 0.5 * (1.0 - (double)i / d);
		for (size_t j = i + 1; j < d; j++)
			w[i * d + j] = 0.2 * (rnd_u01() - 0.5);
	}
	w[1] = 0.8;
	set_cell(m, w);
	up(be, du, u, n);
	method_forward(me, du, z, 0);
	double r = method_spectral_radius(me);
	cr_assert(fabs(r - 0.9) <= 1e-9, "(a) %.15g", r);
	cr_assert_eq(method_get_stats(me)->vjp_evals, 120);

	memset(w, 0, sizeof(double) * d * d);
	for (size_t i = 0; i < d; i++)
		w[i * d + i] = i == 0 ? 0.8 : 0.3 * (i % 2 ? 1 : -1);
	set_cell(m, w);
	rnd_fill(u, n, 1.0);
	for (size_t row = 0; row < N; row++)
		u[row * d] = row == 0 ? 0.1 : (row % 2 ? 2.0 : -2.5);
	up(be, du, u, n);
	method_forward(me, du, z, 0);
	cr_assert(method_get_stats(me)->fwd.converged);
	double *zs = download(be, method_fixed_point(me), n), want = 0;
	for (size_t i = 0; i < n; i++)
		want = fmax(want,
			    (1 - zs[i] * zs[i]) * fabs(w[(i % d) * (d + 1)]));
	cr_assert(want > 0.6 && want < 0.75, "%g", want);
	r = method_spectral_radius(me);
	cr_assert(fabs(r - want) <= 1e-9, "(b) %.15g vs %.15g", r, want);
	free(zs), free(w), free(u);
	method_destroy(me);
	close_model(m);
}

/* NAN when off, for unroll, before a forward, and after a training forward
 * (its tape awaits the backward). */
Test(spectral, nan_when_not_measurable)
{
	struct model *m = open_model("cpu", MODEL_TANH_CELL, odd, 1);
	model_inject_forward(m);
	void *z = dev_state(m);
	struct method_config c = deq_cfg(BMODE_IFT);
	struct method *me = make_method(m, c, 1);
	method_forward(me, m->u, z, 0);
	cr_assert(isnan(method_spectral_radius(me)), "off");
	method_destroy(me);
	deq_config(&c)->spectral_radius_iters = 5;
	me = make_method(m, c, 1);
	cr_assert(isnan(method_spectral_radius(me)), "before a forward");
	method_forward(me, m->u, z, 1);
	cr_assert(isnan(method_spectral_radius(me)), "training forward");
	method_forward(me, m->u, z, 0);
	cr_assert(isfinite(method_spectral_radius(me)));
	method_destroy(me);
	c.method = method_kind_parse("unroll");
	me = make_method(m, c, 1);
	method_forward(me, m->u, z, 0);
	cr_assert(isnan(method_spectral_radius(me)), "unroll");
	method_destroy(me);
	close_model(m);
}

/* ----------------------------------------------------------- 4. memory */

/* Depth peak of one training step followed by an evaluation forward and
 * a spectral radius; must equal method_memory and the allocation at
 * create, and nothing may be allocated meanwhile. */
static size_t depth_of(struct model *m, struct method_config c,
		       struct method_stats *st)
{
	struct backend *be = m->be;
	void *z = dev_state(m);
	struct method *me = make_method(m, c, 1);
	size_t at_create = be->mem.live[MEM_DEPTH], db, sb;
	char err[256];
	backend_mem_reset_peak(be);
	size_t allocs = be->mem.n_allocs;
	step(m, me, z, NULL);
	*st = *method_get_stats(me);
	model_inject_forward(m);
	method_forward(me, m->u, z, 0);
	if (deq_config(&c)->spectral_radius_iters > 0)
		cr_assert(isfinite(method_spectral_radius(me)));
	cr_assert_eq(be->mem.n_allocs, allocs, "a step allocated");
	method_config_resolve(&c);
	cr_assert_eq(method_memory(m, &c, &db, &sb, err, sizeof(err)), 0);
	cr_assert_eq(db, at_create);
	cr_assert_eq(sb, be->mem.live[MEM_SOLVER]);
	cr_assert_eq(be->mem.peak[MEM_DEPTH], at_create);
	method_destroy(me);
	backend_free(be, z);
	return at_create;
}

/* depth = n_tapes·tape + n_vecs·n (deq.c): n_tapes = 1 or k (phantom),
 * n_vecs = max(1 or 2 (phantom), 4 with γ > 0, 2 with the spectral
 * radius). Evaluations: the regulariser adds 2 forwards and 3 VJPs. */
Test(memory, exact_formulas)
{
	struct model *m = open_contractive("cpu", MODEL_TRANSFORMER, odd, 1);
	struct backend *be = m->be;
	size_t e = be->elem, tape = model_tape_elems(m), n = m->n_state;
	struct {
		enum b_mode b;
		int k, jac, sr;
		size_t tapes, vecs;
	} cases[] = {
	    {BMODE_IFT, 5, 0, 0, 1, 1},	    {BMODE_JFB, 5, 0, 0, 1, 1},
	    {BMODE_PHANTOM, 1, 0, 0, 1, 2}, {BMODE_PHANTOM, 2, 0, 0, 2, 2},
	    {BMODE_PHANTOM, 7, 0, 0, 7, 2}, {BMODE_IFT, 5, 1, 0, 1, 4},
	    {BMODE_JFB, 5, 1, 0, 1, 4},	    {BMODE_PHANTOM, 3, 1, 0, 3, 4},
	    {BMODE_IFT, 5, 0, 1, 1, 2},	    {BMODE_PHANTOM, 4, 0, 1, 4, 2},
	    {BMODE_IFT, 5, 1, 1, 1, 4},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct method_config c = deq_cfg(cases[i].b);
		struct method_stats st;
		deq_config(&c)->phantom_steps = cases[i].k;
		deq_config(&c)->jac_loss_weight = cases[i].jac ? 0.5 : 0;
		deq_config(&c)->spectral_radius_iters = cases[i].sr ? 4 : 0;
		size_t got = depth_of(m, c, &st);
		size_t want = e * (cases[i].tapes * tape + cases[i].vecs * n);
		cr_assert_eq(got, want, "case %zu: %zu vs %zu", i, got, want);
		int ph = cases[i].b == BMODE_PHANTOM;
		long fe =
		    st.fwd.iters + (ph ? cases[i].k : 1) + 2 * cases[i].jac;
		long ve = (cases[i].b == BMODE_IFT ? st.bwd.iters + 1
			   : ph			   ? cases[i].k
						   : 1) +
			  3 * cases[i].jac;
		cr_assert_eq(st.forward_evals, fe, "case %zu", i);
		cr_assert_eq(st.vjp_evals, ve, "case %zu", i);
	}
	close_model(m);
}

/* ------------------------------------------------ 5. records, bad input */

static void tiny(struct bench_config *c, const char *extra[])
{
	char err[512];
	const char *kv[] = {"corpus=synthetic", "d_model=16", "n_heads=2",
			    "d_ff=32",		"seq_len=8",  "batch_size=4",
			    "vocab_size=50",	"steps=6",    "warmup_steps=2",
			    "eval_tokens=64",	"threads=1",  "trace=true",
			    "method=deq",	NULL};
	config_defaults(c);
	for (int i = 0; kv[i]; i++)
		cr_assert_eq(config_set_arg(c, kv[i], err, sizeof(err)), 0);
	for (int i = 0; extra[i]; i++)
		cr_assert_eq(config_set_arg(c, extra[i], err, sizeof(err)), 0,
			     "%s", err);
	cr_assert_eq(config_finish(c, err, sizeof(err)), 0, "%s", err);
}

static const json_t *at(const json_t *r, const char *a, const char *b)
{
	const json_t *o = json_object_get(json_object_get(r, a), b);
	cr_assert_not_null(o, "record lacks %s.%s", a, b);
	return o;
}

Test(record, jac_and_spectral_fields, .timeout = 120)
{
	const char *on[] = {"jac_loss_weight=0.5", "spectral_radius_iters=30",
			    "b_mode=phantom", "phantom_steps=2", NULL};
	const char *off[] = {"jac_loss_freq=0", "jac_loss_weight=0.5", NULL};
	struct run_meta meta = {.quiet = 1};
	struct bench_config c;
	json_t *r;
	tiny(&c, on);
	cr_assert_eq(runner_run(&c, &meta, &r), RUN_OK);
	double jm = json_number_value(at(r, "solver", "jac_loss_mean"));
	double rho =
	    json_number_value(at(r, "quality", "valid_spectral_radius"));
	cr_assert(jm > 0 && isfinite(jm), "jac_loss_mean %g", jm);
	cr_assert_eq(json_integer_value(at(r, "solver", "jac_loss_steps")), 6);
	cr_assert(rho > 0.1 && rho < 2, "valid_spectral_radius %g", rho);
	const json_t *tr = at(r, "trace", "jac_loss");
	double s = 0;
	for (size_t i = 0; i < json_array_size(tr); i++)
		s += json_number_value(json_array_get(tr, i));
	cr_assert_eq(json_array_size(tr), 6);
	cr_assert(fabs(s / 6 - jm) <= 1e-9 * jm);
	/* the prediction is the measured peak, regulariser included */
	cr_assert_eq(
	    json_integer_value(at(r, "memory", "predicted_depth_bytes")),
	    json_integer_value(
		json_object_get(at(r, "memory", "peak_bytes"), "depth")));
	cr_assert_eq(json_integer_value(at(r, "method", "phantom_steps")), 2);
	json_decref(r);

	tiny(&c, off);
	cr_assert_eq(runner_run(&c, &meta, &r), RUN_OK);
	cr_assert(json_is_null(at(r, "solver", "jac_loss_mean")));
	cr_assert_eq(json_integer_value(at(r, "solver", "jac_loss_steps")), 0);
	cr_assert(json_is_null(at(r, "quality", "valid_spectral_radius")));
	json_decref(r);
}

/* method_config_validate names the key; the CLI exits 2 with one line
 * naming it and its range. */
Test(config, bad_values_exit_2)
{
	const char *bad[][2] = {
	    {"phantom_tau=0", "(0, 1]"},       {"phantom_tau=1.5", "(0, 1]"},
	    {"jac_loss_freq=1.1", "[0, 1]"},   {"jac_loss_freq=-0.1", "[0, 1]"},
	    {"jac_loss_weight=-1", "0"},       {"phantom_steps=0", "1"},
	    {"spectral_radius_iters=-1", "0"}, {"jac_fd_eta=2", "[0, 1]"},
	    {"b_mode=phantoms", "phantom"},
	};
	const char *exe = getenv("DQ_DEQBENCH");
	cr_assert_not_null(exe);
	char errp[] = "/tmp/dq_deq_grad_XXXXXX";
	int fd = mkstemp(errp);
	cr_assert_geq(fd, 0);
	close(fd);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[] = {(char *)exe, "run", "method=deq",
				(char *)bad[i][0], NULL};
		posix_spawn_file_actions_t fa;
		pid_t pid;
		int st;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY,
						 0);
		posix_spawn_file_actions_addopen(&fa, 2, errp,
						 O_WRONLY | O_TRUNC, 0);
		cr_assert_eq(posix_spawn(&pid, exe, &fa, NULL, argv, NULL), 0);
		posix_spawn_file_actions_destroy(&fa);
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2,
			  "%s: status %d", bad[i][0], st);
		char line[1024] = "", key[64];
		FILE *f = fopen(errp, "r");
		cr_assert_not_null(f);
		size_t len = fread(line, 1, sizeof(line) - 1, f);
		fclose(f);
		line[len] = 0;
		snprintf(key, sizeof(key), "%.*s",
			 (int)(strchr(bad[i][0], '=') - bad[i][0]), bad[i][0]);
		cr_assert(strstr(line, key) && strstr(line, bad[i][1]),
			  "%s: '%s'", bad[i][0], line);
		cr_assert(len > 0 && strchr(line, '\n') == line + len - 1,
			  "%s: not one line: '%s'", bad[i][0], line);
	}
	unlink(errp);

	struct method_config c;
	char err[256];
	method_config_defaults(&c);
	c.method = deq_kind();
	deq_config(&c)->phantom_tau = 0;
	cr_assert_eq(method_config_validate(&c, err, sizeof(err)), -1);
	cr_assert(!strncmp(err, "phantom_tau=", 12), "%s", err);
	method_config_defaults(&c);
	c.method = deq_kind();
	deq_config(&c)->jac_loss_freq = NAN;
	cr_assert_eq(method_config_validate(&c, err, sizeof(err)), -1);
	cr_assert(!strncmp(err, "jac_loss_freq=", 14), "%s", err);
	method_config_defaults(&c);
	c.method = deq_kind();
	deq_config(&c)->jac_loss_weight = INFINITY;
	cr_assert_eq(method_config_validate(&c, err, sizeof(err)), -1);
	cr_assert(!strncmp(err, "jac_loss_weight=", 16), "%s", err);
	cr_assert_eq(b_mode_parse("phantom"), BMODE_PHANTOM);
	cr_assert_str_eq(b_mode_name(BMODE_PHANTOM), "phantom");
}
