/* cmd_plan.c — `deqbench plan budget_mib=M [FILE.json] [key=value ...]
 * [--run N]`: the fastest way to train the configured model in M MiB of
 * device memory (docs/ARCHITECTURE.md §Plan).
 *
 * Candidates: what each registered method's descriptor lists
 * (method_candidate, methods/method.h), in registry order: unroll;
 * checkpoint for every k in 1..L; deq with Broyden history h (forward and
 * backward) in {4, 8, 16, full} and with Anderson m in {3, 5, 8};
 * revolve for every slots in 1..L−2; offload; selective (model=transformer:
 * unroll's work plus L attn_recompute); and unroll and every checkpoint k
 * again with microbatches = 2 (label "... mb2": gradient accumulation over
 * two micro-batches of batch_size/2 rows, where batch_size is even and the
 * config sets no microbatches); each without and with head_chunk = N/8
 * (N = batch_size·seq_len; the config's own head_chunk when it sets one).
 *
 * Peak memory: memfit_estimate, the same layout functions the allocator's
 * buffers come from (the device total; offload's host bytes beside it).
 *
 * Step time as work × price (plan_price.c, plan_cost.h): the
 * candidate's work units a step (docs/methods.md §Work: the closed forms
 * of run_work_step; a deq's solver iterations from the longest committed
 * run of its configuration, or its caps when there is none) × the unit
 * prices at the model's shape (--price FILE, or `deqbench price` here),
 * step_fixed's price once a step among them; beside it, the
 * measured mean step of the longest committed run of the candidate's
 * configuration where there is one. No prediction is below PLAN_MIN_MS;
 * the table says how many met that floor.
 *
 * --run N trains the N fastest candidates that fit with the config's steps
 * and appends their records (out=) with a `plan` object: the budget, the
 * rank, predicted peak, host bytes and step time beside the measured ones.
 *
 * Bad input (exit 2, before any run): budget_mib not in (0, 1e9],
 * price_cap_s not in (0, 86400], --price / --records without a path or
 * that cannot be read, pretrain_steps, a device that cannot be opened, no
 * candidate that fits (naming the smallest peak), a --price file without
 * prices of this shape, a shape price cannot set up. SIGINT / SIGTERM
 * (interrupt.h) stop plan after the pricing (before the table) or --run's
 * training after the current step: exit 130 / 143 with a line saying
 * what stopped.
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
#include "plan.h"
#include "plan_cost.h"

/* The largest N of --run N (the candidate list itself is sized to the
 * layers: enumerate). */
#define PLAN_MAX_CANDS 512
/* The largest budget_mib (the message says 1e9): the budget in bytes is a
 * size_t, and 1e9 MiB (about 954 TiB) is far above any device. */
#define PLAN_MAX_BUDGET_MIB 1e9

/* ---- candidates ---- */

/* Appends base + kv as a candidate (label), without and with head_chunk;
 * deq when its evaluation counts depend on the solves
 * (method_evals_per_step refuses it). */
static int add(struct plan *p, const char *label, const char *const *kv, int n,
	       char *err, size_t errlen)
{
	int deq = 0;
	for (int chunk = 0; chunk < 2; chunk++) {
		struct cand *c = &p->c[p->n];
		char v[32];
		const char *all[2 * METHOD_CAND_KEYS + 6];
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
		if (plan_derive(&c->cfg, &p->base, all, n + 2, err, errlen) !=
		    0)
			return -1;
		deq = method_evals_per_step(&c->cfg.method, &f, &vj) != 0;
		snprintf(c->label, sizeof(c->label), "%s", label);
		c->chunk = chunk;
		c->order = p->n;
		c->deq = deq;
		p->n++;
	}
	return 0;
}

/* Method k is tried unless it keeps tapes in unified memory
 * (method=managed): where its pages live is the driver's decision under
 * the run, which neither memfit's estimate nor the cost model above can
 * see; measure it with run or suite. method=selective is tried where the
 * model has selective tapes (model=transformer). */
static int plan_tries(const struct plan *p, int k)
{
	return !method_kind_needs_managed(k) &&
	       (!method_kind_needs_selective(k) ||
		model_kind_has_selective(p->base.model.kind));
}

/* Whether method k's candidates are tried micro-batched too (PLAN_MICRO):
 * unroll's and checkpoint's, whose depth memory falls by M, where the
 * batch splits and the config allows it (no cuda_graphs, deqbench). */
static int micro_tries(const struct plan *p, int k)
{
	const struct bench_config *b = &p->base;
	return (k == method_kind_parse("unroll") ||
		k == method_kind_parse("checkpoint")) &&
	       b->microbatches == 1 && b->model.batch_size % PLAN_MICRO == 0 &&
	       !b->cuda_graphs && b->impl == IMPL_DEQBENCH;
}

/* Candidate (label, kv) and, where micro_tries, its micro-batched twin. */
static int add_both(struct plan *p, int k, const char *label, const char **kv,
		    int n, char *err, size_t errlen)
{
	char l2[64], mv[16];
	if (add(p, label, kv, n, err, errlen) != 0)
		return -1;
	if (!micro_tries(p, k))
		return 0;
	snprintf(l2, sizeof(l2), "%.56s mb%d", label, PLAN_MICRO);
	snprintf(mv, sizeof(mv), "%d", PLAN_MICRO);
	kv[n] = "microbatches", kv[n + 1] = mv;
	return add(p, l2, kv, n + 2, err, errlen);
}

/* Every candidate of the method registry (method_candidate: each method
 * says which of its settings plan tries) into p->c, each without and with
 * head_chunk, allocated here (free it). 0, or -1 with err. */
static int enumerate(struct plan *p, char *err, size_t errlen)
{
	struct method_candidate mc;
	const char *kv[2 * METHOD_CAND_KEYS + 4];
	p->cap = 0;
	for (int k = 0; k < method_kind_count(); k++)
		for (int i = 0; plan_tries(p, k) &&
				method_candidate(k, &p->base.method, i, &mc);
		     i++)
			p->cap += 2 * (1 + micro_tries(p, k));
	p->c = calloc((size_t)p->cap, sizeof(*p->c));
	if (!p->c) {
		snprintf(err, errlen,
			 "out of host memory for the plan's %d candidates "
			 "(layers=%d); lower layers",
			 p->cap, p->base.method.layers);
		return -1;
	}
	for (int k = 0; k < method_kind_count(); k++)
		for (int i = 0; plan_tries(p, k) &&
				method_candidate(k, &p->base.method, i, &mc);
		     i++) {
			int n = 2;
			kv[0] = "method", kv[1] = method_kind_name(k);
			for (int j = 0; j < mc.n_keys; j++) {
				kv[n++] = mc.key[j];
				kv[n++] = mc.value[j];
			}
			if (add_both(p, k, mc.label, kv, n, err, errlen) != 0)
				return -1;
		}
	return 0;
}

/* ---- memory ---- */

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

/* src of c: r<i> of the run measured, "r<i>/r<j>" when a deq's
 * iterations come from another run, "caps" for a deq with none, "-". */
static void src_text(const struct plan *p, const struct cand *c, char *buf,
		     size_t n)
{
	int m = plan_run_index(p, c->meas), it = plan_run_index(p, c->iters);
	if (c->deq && !it)
		snprintf(buf, n, m ? "r%d/caps" : "caps", m);
	else if (c->deq && m != it)
		snprintf(buf, n, m ? "r%d/r%d" : "-/r%d", m ? m : it, it);
	else if (m)
		snprintf(buf, n, "r%d", m);
	else
		snprintf(buf, n, "-");
}

/* One row of the table: rank, the candidate, predicted beside measured. */
static void print_row(const struct plan *p, const struct cand *c, int rank,
		      double unroll_ms)
{
	char src[32];
	src_text(p, c, src, sizeof(src));
	printf("%4d  %-20s %5d %9.2f %8.2f %7.1f %7.1f %9.2f %7.2f", rank,
	       c->label, c->cfg.model.head_chunk, mib(c->peak), mib(c->host),
	       c->fwd, c->vjp, c->ms, c->ms / unroll_ms);
	if (isfinite(c->meas_ms))
		printf(" %9.2f %9.2f", c->meas_ms, c->ms / c->meas_ms);
	else
		printf(" %9s %9s", "-", "-");
	printf("  %s%s\n", src, c->unpriced[0] ? " ?" : "");
}

/* The table of the candidates that fit (sorted fastest first) and its
 * notes; returns how many fit. */
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
	printf("%4s  %-20s %5s %9s %8s %7s %7s %9s %7s %9s %9s  %s\n", "rank",
	       "method", "chunk", "peak MiB", "host MiB", "fwd", "vjp",
	       "ms/step", "x unrl", "meas ms", "pred/meas", "src");
	for (int j = 0; j < p->n; j++) {
		const struct cand *c = &p->c[j];
		if (c->peak > budget) {
			over++;
			smallest = c->peak < smallest ? c->peak : smallest;
			continue;
		}
		print_row(p, c, ++fit, unroll_ms);
	}
	if (over)
		printf("%d candidate(s) need more than the budget (the "
		       "smallest %.2f MiB)\n",
		       over, mib(smallest));
	if (!fit)
		printf("no candidate fits in %.1f MiB\n", p->budget_mib);
	if (p->clamped)
		printf("%d prediction(s) fell below %g ms and show that floor: "
		       "the prices are below the clock's resolution; rank "
		       "them by measuring (--run), or give a larger "
		       "batch_size or seq_len\n",
		       p->clamped, PLAN_MIN_MS);
	plan_price_notes(p);
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
	printf("\n%4s  %-22s %6s %12s %12s %10s %10s %9s\n", "rank", "method",
	       "chunk", "peak pred", "peak meas", "ms pred", "ms meas",
	       "pred/meas");
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
		double ms = record_num(rec, "timing.step_ms.mean");
		printf("%4d  %-22s %6d %12.0f %12.0f %10.2f %10.2f %9.2f%s\n",
		       rank, c->label, c->cfg.model.head_chunk, (double)c->peak,
		       pk, c->ms, ms, c->ms / ms,
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
    "usage: deqbench plan budget_mib=M [FILE.json] [key=value ...] "
    "[price_cap_s=S]\n"
    "                     [stages=P [link_gbps=G]]\n"
    "                     [--price PRICES.jsonl] [--records PATH] [--run "
    "N]\n"
    "  lists the methods that train the configured model in M MiB of "
    "device\n"
    "  memory (exact peaks from the allocator's layouts), fastest first: "
    "step\n"
    "  times as work x price (prices measured here, at most S s, or from\n"
    "  --price; a deq's iterations from the longest committed run of its\n"
    "  configuration under results/ or --records), beside the measured "
    "time\n"
    "  of such a run; --run N trains the N fastest with the config's "
    "steps\n"
    "  and appends records with predicted beside measured; stages=P adds "
    "the\n  pipeline model of the unrolled net on P devices "
    "(microbatches=M of\n  them, a link of G GB/s, default 25): GPipe and "
    "1F1B from these prices\n";

/* Takes every --NAME V (or --NAME=V) out of argv (in place), the last
 * value in *val (left as it was when absent); -1 with err when one has no
 * value. */
static int take_flag(int *argc, char **argv, const char *name, const char **val,
		     char *err, size_t errlen)
{
	size_t k = strlen(name);
	int o = 0;
	for (int i = 0; i < *argc; i++) {
		const char *v;
		if (!strncmp(argv[i], name, k) && argv[i][k] == '=')
			v = argv[i] + k + 1;
		else if (!strcmp(argv[i], name))
			v = i + 1 < *argc ? argv[++i] : NULL;
		else {
			argv[o++] = argv[i];
			continue;
		}
		if (!v || !*v) {
			snprintf(err, errlen, "%s needs a value, e.g. %s", name,
				 !strcmp(name, "--run")	    ? "--run 3"
				 : !strcmp(name, "--price") ? "--price "
							      "prices.jsonl"
							    : "--records "
							      "results/");
			return -1;
		}
		*val = v;
	}
	*argc = o;
	return 0;
}

/* --run N, --price FILE and --records PATH out of argv; *n_run = -1
 * without --run. */
static int take_flags(int *argc, char **argv, int *n_run, struct plan *p,
		      char *err, size_t errlen)
{
	const char *run = NULL;
	char *end = NULL;
	long n;
	*n_run = -1;
	if (take_flag(argc, argv, "--run", &run, err, errlen) ||
	    take_flag(argc, argv, "--price", &p->price_file, err, errlen) ||
	    take_flag(argc, argv, "--records", &p->records, err, errlen))
		return -1;
	if (!run)
		return 0;
	n = strtol(run, &end, 10);
	if (*end || n < 1 || n > PLAN_MAX_CANDS) {
		snprintf(err, errlen,
			 "--run needs a number of candidates in [1, %d], e.g. "
			 "--run 3",
			 PLAN_MAX_CANDS);
		return -1;
	}
	*n_run = (int)n;
	return 0;
}

/* The device can be opened (device=cuda: a CUDA build and a GPU), so that
 * a plan that cannot run is bad input before it starts, as `run`'s
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

/* stages=P (an integer in [2, layers]; absent: no pipeline model) and
 * link_gbps=G (GB/s above 0, at most 1e6; default 25) into p. 0, or -1
 * with err. */
static int pipe_keys(struct plan *p, const char *sv, const char *lv, char *err,
		     size_t errlen)
{
	char *se = NULL, *le = NULL;
	long s = sv ? strtol(sv, &se, 10) : 0;
	p->link_gbps = lv ? strtod(lv, &le) : 25;
	if (sv && (!*sv || *se || s < 2 || s > p->base.method.layers)) {
		snprintf(err, errlen,
			 "stages=%.60s: give the pipeline's devices as an "
			 "integer from 2 to layers=%d, e.g. stages=4",
			 sv, p->base.method.layers);
		return -1;
	}
	if (lv &&
	    (!*lv || *le || !(p->link_gbps > 0) || !(p->link_gbps <= 1e6))) {
		snprintf(err, errlen,
			 "link_gbps=%.60s: give the link's bandwidth in GB/s, "
			 "above 0 and at most 1e6, e.g. link_gbps=25",
			 lv);
		return -1;
	}
	p->stages = (int)s;
	return 0;
}

static int plan_setup(struct plan *p, int argc, char **argv, char *err,
		      size_t errlen)
{
	const char *extra[] = {"budget_mib", "price_cap_s", "stages",
			       "link_gbps", NULL};
	const char *bv[4] = {NULL, NULL, NULL, NULL};
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
	p->price_cap_s = bv[1] ? strtod(bv[1], &end) : 20;
	if (bv[1] &&
	    (*end || !(p->price_cap_s > 0) || !(p->price_cap_s <= 86400))) {
		snprintf(err, errlen,
			 "price_cap_s=%.60s: give the seconds plan may spend "
			 "pricing the work units, above 0 and at most 86400, "
			 "e.g. price_cap_s=20",
			 bv[1]);
		return -1;
	}
	if (pipe_keys(p, bv[2], bv[3], err, errlen) != 0)
		return -1;
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
	int n_run, rc = 0, setup = 0;
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(plan_usage, stdout);
			return 0;
		}
	memset(&p, 0, sizeof(p));
	if (take_flags(&argc, argv, &n_run, &p, err, sizeof(err)) != 0 ||
	    plan_setup(&p, argc, argv, err, sizeof(err)) != 0 ||
	    (n_run > 0 &&
	     (check_distinct_files(&p.base, config_file_arg(argc, argv), NULL,
				   err, sizeof(err)) ||
	      check_params_key(&p.base, 0, err, sizeof(err)) ||
	      record_check_out(p.base.out, err, sizeof(err)))))
		return bad_input(err);
	/* peaks need no run: when none fits, say so at once */
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
	if (plan_price(&p, &setup, err, sizeof(err)) != 0) {
		free(p.c);
		plan_price_free(&p);
		if (interrupt_signal())
			return plan_interrupted(err);
		if (setup)
			return bad_input(err);
		fprintf(stderr, "deqbench: plan: %s\n", err);
		return 1;
	}
	if (interrupt_signal()) {
		free(p.c);
		plan_price_free(&p);
		snprintf(err, sizeof(err),
			 "interrupted by %s while pricing; no plan was made",
			 interrupt_name());
		return plan_interrupted(err);
	}
	qsort(p.c, (size_t)p.n, sizeof(*p.c), by_ms);
	if (print_table(&p) > 0 && n_run > 0)
		rc = run_top(&p, n_run);
	if (rc == 0 && p.stages &&
	    plan_pipe_print(&p, p.stages, p.link_gbps, err, sizeof(err)) != 0) {
		fprintf(stderr, "deqbench: plan: %s\n", err);
		rc = 1;
	}
	free(p.c);
	plan_price_free(&p);
	return interrupt_signal() ? plan_interrupted(NULL) : rc;
}
