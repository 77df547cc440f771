/* plan_price.c — `deqbench plan`'s step times (plan.h): each candidate's
 * work a step × the prices of its units, step_fixed's once a step
 * (plan_cost.h, docs/ARCHITECTURE.md §Plan).
 *
 * Work: run_work_step's closed forms (docs/methods.md §Work) for the
 * layered methods; a deq candidate's from the longest committed run of its
 * configuration (record_find_longest: the config without the keys below
 * that do not change what a deq step computes), its `work` object, else
 * its trace, else its mean iterations (run_work_from_record), or, with no
 * such run, at its caps (f_max_iter forward, b_max_iter backward
 * evaluations, the regulariser at jac_loss_freq): an upper bound, and the
 * notes say so. Prices: --price FILE's records of the base's shape, or
 * `deqbench price`'s measurement here (price_config, at most price_cap_s;
 * Broyden's line up to f_max_iter, Anderson's up to the largest m of the
 * candidates), step_fixed among them. Measured: the mean step time of the
 * longest committed run of the candidate's whole configuration (seed,
 * steps, schedule, evaluation and output keys aside).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../methods/method.h"
#include "../records/record.h"
#include "../records/record_find.h"
#include "../report/report.h"
#include "../run/price.h"
#include "plan.h"
#include "plan_cost.h"

/* Keys a committed run may differ in and still be the candidate's
 * configuration, for its measured step time: replicates, the length of
 * training and its schedule, evaluation, and (config_key_is_output) where
 * results go. */

/* plan.h */
int plan_derive(struct bench_config *out, const struct bench_config *base,
		const char *const *kv, int n, char *err, size_t errlen)
{
	*out = *base;
	out->method.resolved = 0;
	for (int i = 0; i < n; i += 2)
		if (config_set(out, kv[i], kv[i + 1], err, errlen) != 0)
			return -1;
	return config_finish(out, err, errlen);
}

static const char *const time_free[] = {
    "seed",	   "steps",	 "warmup_steps", "lr_warmup", "eval_tokens",
    "eval_warmup", "eval_every", "curve_tokens", "impl",      NULL};
/* and for a deq's iterations also: what does not change the solves' counts
 * (depth keys of other methods, the head's chunks, threads, the device and
 * its arithmetic switches: a GPU's run counts as the same solves). */
static const char *const iters_free[] = {
    "layers",		"k",	"slots",   "head_chunk",  "threads",
    "device",		"tf32", "compile", "cuda_graphs", "device_mem_cap_mib",
    "managed_prefetch", NULL};

static int in(const char *key, const char *const *list)
{
	for (int i = 0; list[i]; i++)
		if (!strcmp(key, list[i]))
			return 1;
	return 0;
}

/* ctx: an int, 1 for a deq candidate, whose step has no depth: layers
 * aside too. */
static int skip_time(const char *key, void *ctx)
{
	return config_key_is_output(key) || in(key, time_free) ||
	       (*(const int *)ctx && !strcmp(key, "layers"));
}

static int skip_iters(const char *key, void *ctx)
{
	return skip_time(key, ctx) || in(key, iters_free);
}

/* The committed runs: --records, or the source root's results/ (none
 * when the build's checkout has none). */
static int load_runs(struct plan *p, int *setup, char *err, size_t errlen)
{
	char dir[4096], e[1024];
	snprintf(dir, sizeof(dir), "%s/results", record_find_source_root());
	p->runs = record_find_load(p->records ? p->records : dir, "local", e,
				   sizeof(e));
	if (!p->runs && p->records) {
		snprintf(err, errlen, "plan --records %s", e);
		*setup = 1;
		return -1;
	}
	if (!p->runs)
		p->runs = json_array();
	return 0;
}

/* The largest anderson_m of the candidates (at least 1). */
static int anderson_max(const struct plan *p)
{
	int m = 1;
	for (int j = 0; j < p->n; j++)
		if (p->c[j].deq && p->c[j].cfg.method.opts.deq.anderson_m > m)
			m = p->c[j].cfg.method.opts.deq.anderson_m;
	return m;
}

/* Whether p has micro-batched candidates (microbatches > 1). */
static int has_micro(const struct plan *p)
{
	for (int j = 0; j < p->n; j++)
		if (p->c[j].cfg.microbatches > 1)
			return 1;
	return 0;
}

/* The prices of the micro-batched candidates' rows (batch_size /
 * PLAN_MICRO), measured here as pc's beside them (their units run on
 * that many rows). 0, or -1 with err. */
static int price_micro(struct plan *p, const struct bench_config *pc,
		       const struct price_opts *o, int *setup, char *err,
		       size_t errlen)
{
	struct bench_config pm;
	char b[16];
	const char *kv[] = {"batch_size", b};
	if (!has_micro(p))
		return 0;
	snprintf(b, sizeof(b), "%d", pc->model.batch_size / PLAN_MICRO);
	if (plan_derive(&pm, pc, kv, 2, err, errlen) != 0)
		return -1;
	fprintf(stderr, "plan: and at batch_size=%s, the micro-batches' ...\n",
		b);
	if (price_config(&pm, p->V, NULL, o, p->prices, err, errlen) != 0) {
		*setup = 1;
		return -1;
	}
	return 0;
}

/* The prices: --price's records, or price_config's here at the base's
 * shape: Broyden's line up to f_max_iter (f_history 0: the cap),
 * Anderson's up to the candidates' largest m. */
static int load_prices(struct plan *p, int *setup, char *err, size_t errlen)
{
	char am[16];
	const char *kv[] = {"method",	  "deq",     "f_solver",   "broyden",
			    "b_solver",	  "broyden", "f_history",  "0",
			    "b_history",  "0",	     "head_chunk", "0",
			    "anderson_m", am};
	struct price_opts o = {.cap_s = p->price_cap_s,
			       .rel = 0.02,
			       .warmup = 3,
			       .max_rounds = 100000,
			       .core = -1,
			       .seed = (unsigned long long)p->base.model.seed};
	struct bench_config pc;
	if (p->price_file) {
		p->prices = report_price_records(p->price_file, "plan --price",
						 err, errlen);
		*setup = 1;
		return p->prices ? 0 : -1;
	}
	snprintf(am, sizeof(am), "%d", anderson_max(p));
	if (plan_derive(&pc, &p->base, kv, 14, err, errlen) != 0)
		return -1;
	fprintf(stderr,
		"plan: pricing the work units at this shape (deqbench price, "
		"at most %g s) ...\n",
		p->price_cap_s);
	p->prices = json_array();
	if (price_config(&pc, p->V, NULL, &o, p->prices, err, errlen) != 0) {
		*setup = 1;
		return -1;
	}
	return price_micro(p, &pc, &o, setup, err, errlen);
}

/* The prices of the micro-batched candidates' shape into p->m2; without
 * them (a --price file of the base's shape alone) those candidates are
 * dropped and p->micro_dropped says so. */
static void match_micro(struct plan *p)
{
	const struct cand *mc = NULL;
	int k = 0;
	for (int j = 0; j < p->n && !mc; j++)
		if (p->c[j].cfg.microbatches > 1)
			mc = &p->c[j];
	if (!mc)
		return;
	json_t *rec =
	    json_pack("{s:o, s:{s:i}}", "config", config_to_json(&mc->cfg),
		      "model", "vocab_size", p->V);
	p->m2 = report_cost_match(p->prices, rec);
	json_decref(rec);
	if (p->m2)
		return;
	for (int j = 0; j < p->n; j++)
		if (p->c[j].cfg.microbatches <= 1)
			p->c[k++] = p->c[j];
	p->n = k;
	p->micro_dropped = 1;
}

/* The prices of the base's shape (report_cost_match); bad input when the
 * --price file has none. */
static int match_prices(struct plan *p, char *err, size_t errlen)
{
	json_t *rec =
	    json_pack("{s:o, s:{s:i}}", "config", config_to_json(&p->base),
		      "model", "vocab_size", p->V);
	const struct model_config *m = &p->base.model;
	p->m = report_cost_match(p->prices, rec);
	json_decref(rec);
	if (p->m) {
		match_micro(p);
		return 0;
	}
	snprintf(err, errlen,
		 "plan --price %.200s: no price record of this shape (%s "
		 "d_model=%d n_heads=%d d_ff=%d seq_len=%d batch_size=%d, "
		 "vocabulary %d, %s); make them with deqbench price and "
		 "plan's model keys out=%.200s, or leave --price out to "
		 "measure them here",
		 p->price_file, model_kind_name(m->kind), m->d_model,
		 m->n_heads, m->d_ff, m->seq_len, m->batch_size, p->V,
		 config_device_name(p->base.device), p->price_file);
	return -1;
}

/* The bytes of one tape (offload's host_bytes), from its host memory. */
static double tape_bytes(const struct cand *c)
{
	int L = c->cfg.method.layers;
	return L > 2 ? (double)c->host / (L - 2) : 0;
}

/* A deq step at its caps: the most a step can compute. */
static void at_caps(const struct cand *c, double w[WORK_UNITS])
{
	json_t *m = config_method_json(&c->cfg.method);
	const char *bm = json_string_value(json_object_get(m, "b_mode"));
	double jw = json_number_value(json_object_get(m, "jac_loss_weight"));
	struct work_solves s = {
	    json_number_value(json_object_get(m, "f_max_iter")),
	    bm && !strcmp(bm, "ift")
		? json_number_value(json_object_get(m, "b_max_iter"))
		: 0,
	    jw > 0 ? json_number_value(json_object_get(m, "jac_loss_freq"))
		   : 0};
	run_work_step(&c->cfg.method, 0, &s, w);
	json_decref(m);
}

/* Candidate c's work, step time and sources. */
static void predict_one(struct plan *p, struct cand *c, const json_t *defaults)
{
	double w[WORK_UNITS];
	json_t *want = config_effective_json(&c->cfg), *unp = json_array();
	json_t *mj = config_method_json(&c->cfg.method);
	int deq = c->deq;
	/* the solvers' prices (NULL: not a deq) */
	const char *fs =
	    deq ? json_string_value(json_object_get(mj, "f_solver")) : NULL;
	const char *bs =
	    deq ? json_string_value(json_object_get(mj, "b_solver")) : NULL;
	c->iters = NULL;
	if (deq)
		c->iters = record_find_longest(p->runs, want, defaults,
					       skip_iters, &deq);
	/* a micro-batched candidate's units run on its micro-batch's rows */
	const json_t *pm = c->cfg.microbatches > 1 ? p->m2 : p->m;
	double fixed;
	if (!c->iters || run_work_from_record(json_object_get(c->iters, "rec"),
					      &c->cfg.method, tape_bytes(c), w,
					      &c->iters_how) != 0) {
		c->iters = NULL;
		if (deq)
			at_caps(c, w);
		else
			run_work_step(&c->cfg.method, tape_bytes(c), NULL, w);
		run_work_micro(w, c->cfg.microbatches);
	}
	c->fwd = w[WORK_BLOCK_FWD_TAPED] + w[WORK_BLOCK_FWD] +
		 w[WORK_BLOCK_FWD_RECOMPUTE];
	c->vjp = w[WORK_BLOCK_VJP] + w[WORK_BLOCK_VJP_INPUT];
	fixed = plan_fixed_ms(w, pm, unp);
	if (pm == p->m)
		p->fixed = fixed;
	c->ms =
	    plan_step_ms(plan_units_ms(w, pm, fs, bs, unp), fixed, &p->clamped);
	for (size_t i = 0; i < json_array_size(unp); i++)
		snprintf(c->unpriced + strlen(c->unpriced),
			 sizeof(c->unpriced) - strlen(c->unpriced), "%s%s",
			 i ? ", " : "",
			 json_string_value(json_array_get(unp, i)));
	c->meas = record_find_longest(p->runs, want, defaults, skip_time, &deq);
	c->meas_ms =
	    record_num(json_object_get(c->meas, "rec"), "timing.step_ms.mean");
	json_decref(want);
	json_decref(mj);
	json_decref(unp);
}

int plan_price(struct plan *p, int *setup, char *err, size_t errlen)
{
	struct bench_config d;
	json_t *defaults;
	*setup = 0;
	p->cited = json_array();
	if (load_runs(p, setup, err, errlen) != 0 ||
	    load_prices(p, setup, err, errlen) != 0)
		return -1;
	if (match_prices(p, err, errlen) != 0) {
		*setup = 1;
		return -1;
	}
	config_defaults(&d);
	if (config_finish(&d, err, errlen) != 0)
		return -1;
	defaults = config_to_json(&d);
	for (int j = 0; j < p->n; j++)
		predict_one(p, &p->c[j], defaults);
	json_decref(defaults);
	return 0;
}

void plan_price_free(struct plan *p)
{
	json_decref(p->runs);
	json_decref(p->prices);
	json_decref(p->m);
	json_decref(p->m2);
	json_decref(p->cited);
	p->runs = p->prices = p->m = p->m2 = p->cited = NULL;
}

int plan_run_index(const struct plan *p, const json_t *r)
{
	size_t i;
	const json_t *x;
	if (!r)
		return 0;
	json_array_foreach(p->cited, i, x) if (x == r) return (int)i + 1;
	json_array_append(p->cited, (json_t *)r);
	return (int)json_array_size(p->cited);
}

/* where without the source root's "ROOT/" in front. */
static const char *short_where(const json_t *r)
{
	const char *w = json_string_value(json_object_get(r, "where"));
	const char *root = record_find_source_root();
	size_t n = strlen(root);
	return w && !strncmp(w, root, n) && w[n] == '/' ? w + n + 1 : w;
}

static void print_runs(const struct plan *p)
{
	size_t i;
	const json_t *r;
	json_array_foreach(p->cited, i, r)
	{
		const json_t *rec = json_object_get(r, "rec");
		const char *cpu = json_string_value(
		    json_object_get(json_object_get(rec, "host"), "cpu_model"));
		printf("  r%zu = %s: %.0f steps, seed %.0f, device %s, %s\n",
		       i + 1, short_where(r), record_num(rec, "evals.steps"),
		       record_num(rec, "config.seed"),
		       json_string_value(json_object_get(
			   json_object_get(rec, "config"), "device")),
		       cpu ? cpu : "host not recorded");
	}
}

/* The deq candidates' iteration sources (once per label: a head_chunk
 * twin has its twin's) and the units left unpriced. */
static void print_deq(const struct plan *p)
{
	for (int j = 0; j < p->n; j++) {
		const struct cand *c = &p->c[j];
		if (c->chunk && c->deq)
			continue;
		if (c->deq && c->iters)
			printf("  %s: iterations from r%d (the mean over its "
			       "steps, from its %s): %.1f forwards, %.1f "
			       "VJPs a step\n",
			       c->label, plan_run_index(p, c->iters),
			       !strcmp(c->iters_how, "work") ? "work object"
			       : !strcmp(c->iters_how, "trace")
				   ? "trace"
				   : "mean iterations",
			       c->fwd, c->vjp);
		else if (c->deq)
			printf("  %s: has no committed run of its "
			       "configuration in %s; priced at its caps "
			       "(%.0f forwards, %.0f VJPs a step), an upper "
			       "bound: measure it with --run\n",
			       c->label, p->records ? p->records : "results/",
			       c->fwd, c->vjp);
		if (c->unpriced[0])
			printf("  %s: %s has no price in these prices: the "
			       "step leaves it out\n",
			       c->label, c->unpriced);
	}
}

void plan_price_notes(const struct plan *p)
{
	printf("ms/step: Σ work × price + step_fixed (docs/methods.md "
	       "§Planning); prices %s%s, step_fixed %.3f ms a step\n",
	       p->price_file ? "from " : "measured here by deqbench price",
	       p->price_file ? p->price_file : "", p->fixed);
	printf("meas: the mean step time (timing.step_ms.mean) of the longest "
	       "committed run of the same configuration, on that run's "
	       "machine; pred/meas their ratio. src: rN that run (a deq's "
	       "iterations too), rM/rN measured and iterations from two, "
	       "caps: a deq without a run; ?: a unit without a price\n");
	if (p->m2)
		printf("mb%d: microbatches=%d (gradient accumulation), its "
		       "units priced at batch_size=%d, the micro-batch's "
		       "rows, and step_fixed once a micro-batch\n",
		       PLAN_MICRO, PLAN_MICRO,
		       p->base.model.batch_size / PLAN_MICRO);
	if (p->micro_dropped)
		printf("microbatches=%d candidates left out: the prices have "
		       "none at batch_size=%d (deqbench price with it, or "
		       "leave --price out)\n",
		       PLAN_MICRO, p->base.model.batch_size / PLAN_MICRO);
	print_deq(p);
	if (json_array_size(p->cited))
		printf("runs:\n");
	print_runs(p);
}
