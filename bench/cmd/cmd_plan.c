/* cmd_plan.c — `deqbench plan budget_mib=M [FILE.json] [key=value ...]
 * [--run N]`: the fastest way to train the configured model in M MiB of
 * device memory (docs/ARCHITECTURE.md §Plan).
 *
 * Candidates: what each registered method's descriptor lists
 * (method_candidate, methods/method.h), in registry order: unroll;
 * checkpoint for every k in 1..L; deq with Broyden history h (forward and
 * backward) in {4, 8, 16, the cap} and with Anderson m in {3, 5, 8};
 * revolve for every slots in 1..L−2; offload; each without and with
 * head_chunk = N/8 (N = batch_size·seq_len; the config's own head_chunk
 * when it sets one).
 *
 * Peak memory: memfit_estimate, the same layout functions the allocator's
 * buffers come from (the device total; offload's host bytes beside it).
 *
 * Step time, from short calibration runs (PLAN_CAL_STEPS steps, the first
 * PLAN_CAL_WARMUP untimed, medians) of the configured model:
 *   unroll at L_a = max(L, 4) and at L_b = max(1, L_a/4), revolve slots=1
 *   at L_a, unroll at L_a with head_chunk, offload at L_a, and every deq
 *   candidate. With T(c) = R + fwd·F + vjp·V + X: the two unroll runs give
 *   F + V (slope) and R (the rest: embeddings, head, optimizer), revolve's
 *   A(L_a, 1) extra forwards split F from V, head_chunk scales R (by the
 *   ratio its calibration gives; 1 when its difference is within the
 *   calibrations' interquartile ranges), offload adds its copies X (scaled
 *   by L − 2 tapes), and a deq candidate's X is its solver's own work
 *   beside the F and V of the evaluation counts its calibration run made
 *   (those counts depend on the solves, so deq's prediction is its
 *   calibration run's step, and its head_chunk twin scales the head's
 *   share of that step, at most R; later training steps may need more
 *   iterations). Forward and VJP counts of the other methods are
 *   method_evals_per_step's closed forms. No unit cost is negative and no
 *   prediction is below PLAN_MIN_MS; the table says how many met that
 *   floor (plan_cost.h holds the arithmetic).
 *
 * --run N trains the N fastest candidates that fit with the config's steps
 * and appends their records (out=) with a `plan` object: the budget, the
 * rank, predicted peak, host bytes and step time beside the measured ones.
 *
 * Bad input (exit 2, before any calibration): budget_mib not in (0, 1e9],
 * pretrain_steps, a device that cannot be opened, no candidate that fits
 * (naming the smallest peak); a calibration run that fails in its setup.
 * SIGINT / SIGTERM (interrupt.h) stop the calibration or --run's training
 * after the current step: exit 130 / 143 with a line saying what stopped.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../methods/method.h"
#include "cmd.h"
#include "../data/data.h"
#include "dispatch.h"
#include "../io/fileio.h"
#include "../io/interrupt.h"
#include "../run/memfit.h"
#include "../pytorch/peer.h"
#include "../records/record.h"
#include "../run/run_ctx.h"
#include "plan_cost.h"

#define PLAN_CAL_STEPS	10
#define PLAN_CAL_WARMUP 3
/* The largest N of --run N (the candidate list itself is sized to the
 * layers: enumerate). */
#define PLAN_MAX_CANDS 512
/* The largest budget_mib (the message says 1e9): the budget in bytes is a
 * size_t, and 1e9 MiB (about 954 TiB) is far above any device. */
#define PLAN_MAX_BUDGET_MIB 1e9

struct cand {
	struct bench_config cfg; /* resolved */
	char label[64];
	int chunk; /* head_chunk on */
	int deq;   /* index among the calibrated (deq), -1 for others */
	size_t peak, host;
	double fwd, vjp; /* per step; deq: from its calibration */
	double ms;	 /* predicted step */
	int order;	 /* place in the enumeration: breaks ties of ms */
};

/* A copy of base with `n` key=value settings; 0, or -1 with err. */
static int derive(struct bench_config *out, const struct bench_config *base,
		  const char *const *kv, int n, char *err, size_t errlen)
{
	*out = *base;
	out->method.resolved = 0;
	for (int i = 0; i < n; i += 2)
		if (config_set(out, kv[i], kv[i + 1], err, errlen) != 0)
			return -1;
	return config_finish(out, err, errlen);
}

/* Set by calibrate when a calibration run failed in its setup (no GPU for
 * device=cuda, a corpus, a size): bad input, as for `run`. */
static int cal_setup_failed;

/* Median step ms of a quiet calibration run of c; the record in *rec. NAN
 * with err on failure: a setup failure sets cal_setup_failed; an
 * interruption (interrupt.h) says which run it stopped. */
static double calibrate(const struct bench_config *c, const char *what, int i,
			int n, json_t **rec, char *err, size_t errlen)
{
	struct bench_config k = *c;
	struct run_meta meta = {.quiet = 1};
	k.steps = PLAN_CAL_STEPS;
	k.warmup_steps = PLAN_CAL_WARMUP;
	k.lr_warmup = 0;
	k.eval_tokens = 0;
	k.trace = 0;
	snprintf(k.save_params, sizeof(k.save_params), "%s", "");
	fprintf(stderr, "plan: calibrating %d/%d: %s ... ", i, n, what);
	enum run_status st = dispatch_run(&k, &meta, rec);
	double ms = record_num(*rec, "timing.step_ms.median");
	if (st != RUN_OK || !isfinite(ms)) {
		const char *m =
		    json_string_value(json_object_get(*rec, "message"));
		cal_setup_failed = st == RUN_SETUP_FAILED;
		if (st == RUN_INTERRUPTED)
			snprintf(err, errlen,
				 "interrupted by %s in calibration run %d/%d "
				 "(%s); no plan was made",
				 interrupt_name(), i, n, what);
		else
			snprintf(err, errlen, "calibration run %s failed: %s",
				 what, m ? m : "?");
		fprintf(stderr, "%s\n",
			st == RUN_INTERRUPTED ? "interrupted" : "failed");
		return NAN;
	}
	fprintf(stderr, "%.1f ms/step\n", ms);
	return ms;
}

/* A calibration of base with settings kv; NAN on failure. */
static double cal_with(const struct bench_config *base, const char *const *kv,
		       int n, const char *what, int i, int total, json_t **rec,
		       char *err, size_t errlen)
{
	struct bench_config c;
	*rec = NULL;
	if (derive(&c, base, kv, n, err, errlen) != 0)
		return NAN;
	return calibrate(&c, what, i, total, rec, err, errlen);
}

/* ---- candidates ---- */

struct plan {
	struct bench_config base;
	double budget_mib;
	int chunk; /* head_chunk of the "with" variants */
	struct cand *c;
	int n, cap; /* candidates, and room for cap (enumerate) */
	int n_deq;  /* deq candidates without head_chunk (calibrated) */
	int V;	    /* vocabulary, from the first calibration */
	struct plan_costs k;
	int clamped; /* predictions raised to PLAN_MIN_MS (plan_cost.h) */
};

/* Appends base + kv as a candidate (label), without and with head_chunk;
 * one whose evaluation counts depend on the solves (method_evals_per_step
 * refuses it: deq) is calibrated. */
static int add(struct plan *p, const char *label, const char *const *kv, int n,
	       char *err, size_t errlen)
{
	int deq = 0;
	for (int chunk = 0; chunk < 2; chunk++) {
		struct cand *c = &p->c[p->n];
		char v[32];
		const char *all[2 * METHOD_CAND_KEYS + 4];
		long f, vj;
		if (p->n >= p->cap) { /* enumerate counts every add */
			snprintf(err, errlen,
				 "plan: more than the %d candidates counted",
				 p->cap);
			return -1;
		}
		memset(c, 0, sizeof(*c));
		memcpy(all, kv, (size_t)n * sizeof(*kv));
		snprintf(v, sizeof(v), "%d", chunk ? p->chunk : 0);
		all[n] = "head_chunk", all[n + 1] = v;
		if (derive(&c->cfg, &p->base, all, n + 2, err, errlen) != 0)
			return -1;
		deq = method_evals_per_step(&c->cfg.method, &f, &vj) != 0;
		snprintf(c->label, sizeof(c->label), "%s", label);
		c->chunk = chunk;
		c->order = p->n;
		c->deq = deq ? p->n_deq : -1;
		p->n++;
	}
	if (deq)
		p->n_deq++;
	return 0;
}

/* Every candidate of the method registry (method_candidate: each method
 * says which of its settings plan tries) into p->c, each without and with
 * head_chunk, allocated here (free it); those whose evaluation counts
 * depend on the solves (method_evals_per_step refuses them: deq) are
 * calibrated. 0, or -1 with err. */
/* Method k is tried unless it keeps tapes in unified memory
 * (method=managed): where its pages live is the driver's decision under
 * the run, which neither memfit's estimate nor the cost model above can
 * see; measure it with run or suite. */
static int plan_tries(int k)
{
	return !method_kind_needs_managed(k);
}

static int enumerate(struct plan *p, char *err, size_t errlen)
{
	struct method_candidate mc;
	const char *kv[2 * METHOD_CAND_KEYS + 2];
	p->cap = 0;
	for (int k = 0; k < method_kind_count(); k++)
		for (int i = 0; plan_tries(k) &&
				method_candidate(k, &p->base.method, i, &mc);
		     i++)
			p->cap += 2;
	p->c = calloc((size_t)p->cap, sizeof(*p->c));
	if (!p->c) {
		snprintf(err, errlen,
			 "out of host memory for the plan's %d candidates "
			 "(layers=%d); lower layers",
			 p->cap, p->base.method.layers);
		return -1;
	}
	for (int k = 0; k < method_kind_count(); k++)
		for (int i = 0; plan_tries(k) &&
				method_candidate(k, &p->base.method, i, &mc);
		     i++) {
			int n = 2;
			kv[0] = "method", kv[1] = method_kind_name(k);
			for (int j = 0; j < mc.n_keys; j++) {
				kv[n++] = mc.key[j];
				kv[n++] = mc.value[j];
			}
			if (add(p, mc.label, kv, n, err, errlen) != 0)
				return -1;
		}
	return 0;
}

/* ---- calibration and prediction ---- */

#define CAL(var, ...)                                                          \
	do {                                                                   \
		const char *x_[] = {__VA_ARGS__};                              \
		json_t *r_;                                                    \
		var.ms =                                                       \
		    cal_with(&p->base, x_, (int)(sizeof(x_) / sizeof(*x_)),    \
			     what, ++i, total, &r_, err, errlen);              \
		var.iqr = record_num(r_, "timing.step_ms.p75") -               \
			  record_num(r_, "timing.step_ms.p25");                \
		if (r_ && !p->V)                                               \
			p->V = (int)record_num(r_, "model.vocab_size");        \
		json_decref(r_);                                               \
		if (isnan(var.ms))                                             \
			return -1;                                             \
	} while (0)

/* The unit costs (struct plan_costs) from five calibration runs. */
static int calibrate_units(struct plan *p, int total, char *err, size_t errlen)
{
	int L = p->base.method.layers, La = L > 4 ? L : 4, Lb = La / 4, i = 0;
	char la[16], lb[16], ch[16], what[96];
	struct plan_cals c = {.La = La, .Lb = Lb > 0 ? Lb : 1};
	long v = 0;
	struct bench_config rc;
	snprintf(la, sizeof(la), "%d", La);
	snprintf(lb, sizeof(lb), "%d", c.Lb);
	snprintf(ch, sizeof(ch), "%d", p->chunk);
	snprintf(what, sizeof(what), "unroll layers=%s", la);
	CAL(c.unroll_a, "method", "unroll", "layers", la, "head_chunk", "0");
	snprintf(what, sizeof(what), "unroll layers=%s", lb);
	CAL(c.unroll_b, "method", "unroll", "layers", lb, "head_chunk", "0");
	snprintf(what, sizeof(what), "revolve layers=%s slots=1", la);
	CAL(c.revolve, "method", "revolve", "layers", la, "slots", "1",
	    "head_chunk", "0");
	snprintf(what, sizeof(what), "unroll layers=%s head_chunk=%s", la, ch);
	CAL(c.unroll_chunk, "method", "unroll", "layers", la, "head_chunk", ch);
	snprintf(what, sizeof(what), "offload layers=%s", la);
	CAL(c.offload, "method", "offload", "layers", la, "head_chunk", "0");
	{
		const char *kv[] = {"method", "revolve", "layers",
				    la,	      "slots",	 "1"};
		if (derive(&rc, &p->base, kv, 6, err, errlen) != 0)
			return -1;
		long f;
		method_evals_per_step(&rc.method, &f, &v);
		c.revolve_extra = f - La;
	}
	plan_costs_fit(&c, &p->k);
	return 0;
}

/* Each deq candidate's calibration: its evaluation counts and step. */
static int calibrate_deq(struct plan *p, int total, char *err, size_t errlen)
{
	int i = 5;
	for (int j = 0; j < p->n; j++) {
		struct cand *c = &p->c[j];
		json_t *r;
		if (c->deq < 0 || c->chunk)
			continue;
		char what[96];
		snprintf(what, sizeof(what), "%s", c->label);
		double T =
		    calibrate(&c->cfg, what, ++i, total, &r, err, errlen);
		c->fwd = record_num(r, "evals.forward_evals_per_step");
		c->vjp = record_num(r, "evals.vjp_evals_per_step");
		json_decref(r);
		if (isnan(T))
			return -1;
		c->ms = T;
		/* its with-head_chunk twin follows it */
		c[1].fwd = c->fwd, c[1].vjp = c->vjp;
		c[1].ms = plan_chunk_twin_ms(&p->k, T, &p->clamped);
	}
	return 0;
}

static void predict(struct plan *p)
{
	for (int j = 0; j < p->n; j++) {
		struct cand *c = &p->c[j];
		const struct method_config *mc = &c->cfg.method;
		long f, v, tapes = 0;
		if (c->deq >= 0)
			continue;
		method_evals_per_step(mc, &f, &v);
		c->fwd = (double)f, c->vjp = (double)v;
		if (!strcmp(method_kind_name(mc->method), "offload") &&
		    mc->layers > 2)
			tapes = mc->layers - 2;
		c->ms =
		    plan_predict_ms(&p->k, f, v, c->chunk, tapes, &p->clamped);
	}
}

/* Predicted memory of every candidate (memfit, vocabulary p->V). */
static int predict_memory(struct plan *p, char *err, size_t errlen)
{
	size_t elem = p->base.device == DEVICE_CPU64 ? 8 : 4;
	for (int j = 0; j < p->n; j++) {
		struct run_memory rm;
		if (memfit_estimate(&p->c[j].cfg, p->V, elem, 1, &rm, err,
				    errlen) != 0)
			return -1;
		p->c[j].peak = rm.device_total;
		p->c[j].host = rm.device[MEM_HOST];
	}
	return 0;
}

/* The candidate with the smallest predicted peak (p->n > 0). */
static const struct cand *smallest(const struct plan *p)
{
	const struct cand *m = &p->c[0];
	for (int j = 1; j < p->n; j++)
		if (p->c[j].peak < m->peak)
			m = &p->c[j];
	return m;
}

/* How many candidates fit in the budget. */
static int count_fit(const struct plan *p)
{
	size_t budget = (size_t)(p->budget_mib * 1048576.0);
	int fit = 0;
	for (int j = 0; j < p->n; j++)
		fit += p->c[j].peak <= budget;
	return fit;
}

/* ---- output ---- */

static int by_ms(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->ms != y->ms)
		return (x->ms > y->ms) - (x->ms < y->ms);
	return (x->order > y->order) - (x->order < y->order);
}

static double mib(size_t b)
{
	return (double)b / 1048576.0;
}

/* The table of the candidates that fit (sorted fastest first); returns
 * how many fit. */
static int print_table(const struct plan *p)
{
	size_t budget = (size_t)(p->budget_mib * 1048576.0);
	double unroll_ms = NAN;
	int fit = 0, over = 0;
	size_t smallest = SIZE_MAX;
	for (int j = 0; j < p->n; j++)
		if (!strcmp(p->c[j].label, "unroll") && !p->c[j].chunk)
			unroll_ms = p->c[j].ms;
	printf("plan: %s, %d layers, budget %.1f MiB of device memory\n",
	       model_kind_name(p->base.model.kind), p->base.method.layers,
	       p->budget_mib);
	printf("%4s  %-22s %6s %10s %9s %8s %8s %10s %8s\n", "rank", "method",
	       "chunk", "peak MiB", "host MiB", "fwd", "vjp", "ms/step",
	       "x unroll");
	for (int j = 0; j < p->n; j++) {
		const struct cand *c = &p->c[j];
		if (c->peak > budget) {
			over++;
			smallest = c->peak < smallest ? c->peak : smallest;
			continue;
		}
		fit++;
		printf("%4d  %-22s %6d %10.2f %9.2f %8.1f %8.1f %10.1f %8.2f\n",
		       fit, c->label, c->cfg.model.head_chunk, mib(c->peak),
		       mib(c->host), c->fwd, c->vjp, c->ms, c->ms / unroll_ms);
	}
	if (over)
		printf("%d candidate(s) need more than the budget (the "
		       "smallest %.2f MiB)\n",
		       over, mib(smallest));
	if (!fit)
		printf("no candidate fits in %.1f MiB\n", p->budget_mib);
	if (p->clamped)
		printf("%d prediction(s) fell below %g ms and show that floor: "
		       "the calibrations' noise is larger than the differences "
		       "they measure; rank them by measuring (--run), or give "
		       "a larger batch_size or seq_len\n",
		       p->clamped, PLAN_MIN_MS);
	return fit;
}

/* The record's "plan" object of candidate c (rank from 1). */
static json_t *plan_json(const struct plan *p, const struct cand *c, int rank)
{
	json_t *o = json_object();
	json_object_set_new(o, "budget_mib", json_real(p->budget_mib));
	json_object_set_new(o, "rank", json_integer(rank));
	json_object_set_new(o, "candidate", json_string(c->label));
	json_object_set_new(o, "predicted_peak_total_bytes",
			    json_integer((json_int_t)c->peak));
	json_object_set_new(o, "predicted_host_bytes",
			    json_integer((json_int_t)c->host));
	json_object_set_new(o, "predicted_step_ms", json_real(c->ms));
	json_object_set_new(o, "predicted_forward_evals", json_real(c->fwd));
	json_object_set_new(o, "predicted_vjp_evals", json_real(c->vjp));
	return o;
}

/* Trains the first n candidates that fit; appends their records as run
 * does (record_save: a record that cannot be appended is kept in the
 * rescue file and on stderr, and no later candidate runs). 1 when a run
 * was not ok or a record was not appended, else 0. */
static int run_top(const struct plan *p, int n)
{
	size_t budget = (size_t)(p->budget_mib * 1048576.0);
	int rank = 0, bad = 0, unsaved = 0;
	char rescue[1024];
	printf("\n%4s  %-22s %6s %12s %12s %10s %10s %7s\n", "rank", "method",
	       "chunk", "peak pred", "peak meas", "ms pred", "ms meas",
	       "err %");
	for (int j = 0; j < p->n && rank < n && !interrupt_signal() && !unsaved;
	     j++) {
		const struct cand *c = &p->c[j];
		struct run_meta meta = {
		    .suite = "plan", .index = rank, .combo = j};
		json_t *rec;
		if (c->peak > budget)
			continue;
		rank++;
		enum run_status st = dispatch_run(&c->cfg, &meta, &rec);
		json_object_set_new(rec, "plan", plan_json(p, c, rank));
		unsaved = record_save(c->cfg.out, rec) != 0;
		double pk = record_num(rec, "memory.peak_total_bytes");
		double ms = record_num(rec, "timing.step_ms.median");
		printf("%4d  %-22s %6d %12.0f %12.0f %10.1f %10.1f %7.1f%s\n",
		       rank, c->label, c->cfg.model.head_chunk, (double)c->peak,
		       pk, c->ms, ms, 100.0 * (c->ms - ms) / ms,
		       st == RUN_OK ? "" : "  (not ok)");
		bad |= st != RUN_OK || unsaved;
		json_decref(rec);
	}
	if (rank && !unsaved)
		printf("records appended to %s\n", p->base.out);
	if (unsaved) {
		fflush(stdout);
		fprintf(stderr,
			"deqbench: plan: the record of rank %d could not be "
			"appended to out=%s; it is on stderr above and, unless "
			"noted there, in %s; the later candidates did not "
			"run\n",
			rank, p->base.out,
			fileio_rescue_path(rescue, sizeof(rescue)));
	}
	return bad ? 1 : 0;
}

/* ---- the command ---- */

static const char plan_usage[] =
    "usage: deqbench plan budget_mib=M [FILE.json] [key=value ...] [--run "
    "N]\n"
    "  lists the methods that train the configured model in M MiB of "
    "device\n"
    "  memory (exact peaks from the allocator's layouts), fastest first "
    "(step\n"
    "  times from short calibration runs); --run N trains the N fastest "
    "with\n"
    "  the config's steps and appends records with predicted beside "
    "measured\n";

/* Takes --run N (or --run=N) out of argv (in place); *n_run = -1 when
 * absent. */
static int take_run_flag(int *argc, char **argv, int *n_run, char *err,
			 size_t errlen)
{
	int o = 0;
	*n_run = -1;
	for (int i = 0; i < *argc; i++) {
		const char *v;
		char *end = NULL;
		long n;
		if (!strncmp(argv[i], "--run=", 6))
			v = argv[i] + 6;
		else if (!strcmp(argv[i], "--run"))
			v = i + 1 < *argc ? argv[++i] : NULL;
		else {
			argv[o++] = argv[i];
			continue;
		}
		n = v && *v ? strtol(v, &end, 10) : -1;
		if (!v || !*v || *end || n < 1 || n > PLAN_MAX_CANDS) {
			snprintf(err, errlen,
				 "--run needs a number of candidates in [1, "
				 "%d], e.g. --run 3",
				 PLAN_MAX_CANDS);
			return -1;
		}
		*n_run = (int)n;
	}
	*argc = o;
	return 0;
}

/* The device can be opened (device=cuda: a CUDA build and a GPU), so that
 * a plan that cannot calibrate is bad input before it starts, as `run`'s
 * setup failure is. 0, or -1 with the backend's one line. */
static int device_check(const struct bench_config *c, char *err, size_t errlen)
{
	struct backend *be;
	if (backend_create(&be, config_device_name(c->device), c->threads, err,
			   errlen) != 0)
		return -1;
	backend_destroy(be);
	return 0;
}

static int plan_setup(struct plan *p, int argc, char **argv, char *err,
		      size_t errlen)
{
	const char *extra[] = {"budget_mib", NULL};
	const char *bv[1] = {NULL};
	char *end;
	if (parse_config_args(&p->base, argc, argv, extra, bv, err, errlen) ||
	    peer_refuse(&p->base, "plan", err, errlen))
		return -1;
	p->budget_mib = bv[0] ? strtod(bv[0], &end) : NAN;
	if (!bv[0] || *end || !(p->budget_mib > 0) ||
	    !(p->budget_mib <= PLAN_MAX_BUDGET_MIB)) {
		snprintf(err, errlen,
			 "budget_mib=%s: give the device memory budget in MiB "
			 "as a number > 0 and at most 1e9 (about 954 TiB), "
			 "e.g. budget_mib=64",
			 bv[0] ? bv[0] : "(missing)");
		return -1;
	}
	if (p->base.pretrain_steps > 0) {
		snprintf(err, errlen,
			 "pretrain_steps=%d: plan does not take pretrain_steps "
			 "(it compares every method over the same steps, and "
			 "only deq pretrains); drop it, and give it to "
			 "deqbench run with the deq candidate chosen",
			 p->base.pretrain_steps);
		return -1;
	}
	if (p->base.method.layers < 3) {
		snprintf(err, errlen,
			 "layers=%d: plan compares depth methods and needs "
			 "layers >= 3",
			 p->base.method.layers);
		return -1;
	}
	if (config_finish(&p->base, err, errlen) != 0 ||
	    corpus_check(corpus_kind_name(p->base.corpus), p->base.data_dir,
			 err, errlen) != 0 ||
	    device_check(&p->base, err, errlen) != 0)
		return -1;
	p->chunk = p->base.model.head_chunk
		       ? p->base.model.head_chunk
		       : p->base.model.batch_size * p->base.model.seq_len / 8;
	if (p->chunk < 1)
		p->chunk = 1;
	return 0;
}

/* Bad input when no candidate fits: the budget and the smallest peak. */
static int none_fits(const struct plan *p)
{
	const struct cand *m = smallest(p);
	char err[512];
	snprintf(err, sizeof(err),
		 "budget_mib=%g: no candidate fits; the smallest, %s%s, needs "
		 "%.2f MiB of device memory: give budget_mib=%.2f or more",
		 p->budget_mib, m->label, m->chunk ? " with head_chunk" : "",
		 mib(m->peak), ceil(mib(m->peak) * 100) / 100);
	return bad_input(err);
}

/* Exit status of a plan that a signal stopped (130 / 143, as `run`'s),
 * after a line saying what it stopped: what, or (NULL) --run. */
static int plan_interrupted(const char *what)
{
	fflush(stdout);
	if (what)
		fprintf(stderr, "deqbench: plan: %s\n", what);
	else
		fprintf(stderr,
			"deqbench: plan --run interrupted by %s: the run in "
			"progress stopped (its record says interrupted) and "
			"the later candidates did not run\n",
			interrupt_name());
	return interrupt_exit_status();
}

int cmd_plan(int argc, char **argv)
{
	struct plan p;
	char err[1024];
	int n_run, rc = 0;
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(plan_usage, stdout);
			return 0;
		}
	memset(&p, 0, sizeof(p));
	if (take_run_flag(&argc, argv, &n_run, err, sizeof(err)) != 0 ||
	    plan_setup(&p, argc, argv, err, sizeof(err)) != 0 ||
	    (n_run > 0 &&
	     (check_distinct_files(&p.base, config_file_arg(argc, argv), NULL,
				   err, sizeof(err)) ||
	      check_params_key(&p.base, 0, err, sizeof(err)) ||
	      record_check_out(p.base.out, err, sizeof(err)))))
		return bad_input(err);
	/* peaks need no calibration: when none fits, say so at once */
	if (enumerate(&p, err, sizeof(err)) != 0 ||
	    run_ctx_resolve_vocab(&p.base, &p.V, err, sizeof(err)) != 0 ||
	    predict_memory(&p, err, sizeof(err)) != 0) {
		free(p.c);
		return bad_input(err);
	}
	if (count_fit(&p) == 0) {
		rc = none_fits(&p);
		free(p.c);
		return rc;
	}
	interrupt_install();
	if (calibrate_units(&p, 5 + p.n_deq, err, sizeof(err)) != 0 ||
	    calibrate_deq(&p, 5 + p.n_deq, err, sizeof(err)) != 0) {
		free(p.c);
		if (interrupt_signal())
			return plan_interrupted(err);
		if (cal_setup_failed)
			return bad_input(err);
		fprintf(stderr, "deqbench: plan: %s\n", err);
		return 1;
	}
	predict(&p);
	qsort(p.c, (size_t)p.n, sizeof(*p.c), by_ms);
	if (print_table(&p) > 0 && n_run > 0)
		rc = run_top(&p, n_run);
	free(p.c);
	if (interrupt_signal() && n_run <= 0) {
		snprintf(err, sizeof(err),
			 "interrupted by %s after the calibration runs",
			 interrupt_name());
		return plan_interrupted(err);
	}
	return interrupt_signal() ? plan_interrupted(NULL) : rc;
}
