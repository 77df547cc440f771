/* cmd_price.c — `deqbench price [RECORDS.jsonl | FILE.json] [key=value
 * ...]`: the price of each work unit at the shapes of a config, or of
 * every configuration in a records file (bench/run/price.h measures one;
 * docs/commands.md §price). Writes price records to out= when given and a
 * table on stdout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../methods/method.h"
#include "../io/interrupt.h"
#include "../records/record.h"
#include "../run/price.h"
#include "../run/run_ctx.h"
#include "cmd.h"

/* The keys price reads besides run's (parse_config_args' extra). */
static const char *const own_keys[] = {"out", "price_cap_s", "core", NULL};

static void usage(void)
{
	printf("usage: deqbench price [RECORDS.jsonl | FILE.json] "
	       "[key=value ...] [out=PRICES.jsonl]\n"
	       "  times each work unit (block_fwd_taped, block_fwd, "
	       "block_vjp,\n  block_vjp_input, solver_update of Broyden and "
	       "Anderson at history lengths\n  1, 2, 4, ... h_max, head_fwd, "
	       "head_bwd, head_train, optimizer_step,\n  step_fixed, "
	       "host_bytes, attn_recompute) at the shapes of a config (run's\n "
	       " keys), or "
	       "of every configuration of a records file (the keys given "
	       "then\n  override each record's); round-robin in a random "
	       "order each round until\n  each median's 95%% interval is "
	       "within +-2%% or the time cap passes.\n"
	       "  own keys: price_cap_s=S (default 20: seconds per "
	       "configuration),\n  core=N (pin the process to CPU N, as "
	       "taskset -c N), out=PRICES.jsonl\n  (append the price "
	       "records; default: none, the table only)\n");
}

/* price_cap_s and core from their texts into o. 0, or -1 with err. */
static int parse_own(const char *const *val, struct price_opts *o, char *err,
		     size_t errlen)
{
	char *end;
	if (val[1]) {
		o->cap_s = strtod(val[1], &end);
		if (!*val[1] || *end || !isfinite(o->cap_s) || o->cap_s <= 0 ||
		    o->cap_s > 86400) {
			snprintf(err, errlen,
				 "price_cap_s='%.60s': give seconds above 0 "
				 "(at most 86400), e.g. price_cap_s=20",
				 val[1]);
			return -1;
		}
	}
	if (val[2]) {
		long c = strtol(val[2], &end, 10);
		if (!*val[2] || *end || c < 0 || c > 65535) {
			snprintf(err, errlen,
				 "core='%.60s': give a CPU number from 0, "
				 "e.g. core=0",
				 val[2]);
			return -1;
		}
		o->core = (int)c;
	}
	return 0;
}

/* One configuration to price. */
struct job {
	struct bench_config cfg;
	int V;
	char source[600];
};

struct jobs {
	struct job *j;
	int n, cap;
	json_t *seen; /* price_key -> index into j */
};

/* What the prices of cfg depend on, as report matches them (its shape:
 * every model key, microbatches (its units run on batch_size /
 * microbatches rows), precision, device, the head's width V) and how they
 * are timed (threads, the solver's samples): a new string, NULL when out
 * of memory. Method, depth, seed and training keys are not in it. */
static char *price_key(const struct bench_config *cfg, int V)
{
	json_t *c = config_to_json(cfg), *k = json_object();
	const char *keys[] = {"model",	     "d_model",	    "n_heads",
			      "d_ff",	     "seq_len",	    "batch_size",
			      "precision",   "device",	    "threads",
			      "tf32",	     "head_chunk",  "solver_batching",
			      "cuda_graphs", "microbatches"};
	char *s;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *v = json_object_get(c, keys[i]);
		if (v)
			json_object_set(k, keys[i], v);
	}
	json_object_set_new(k, "vocab", json_integer(V));
	s = json_dumps(k, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(c);
	json_decref(k);
	return s;
}

/* Broyden's and Anderson's longest histories of a and b into a (so that
 * one measurement prices both: report interpolates within them). */
static void widen_histories(struct bench_config *a,
			    const struct bench_config *b)
{
	struct deq_config *d = &a->method.opts.deq;
	const struct deq_config *e = &b->method.opts.deq;
	int ha = d->f_history > 0 ? d->f_history : d->f_max_iter;
	int hb = e->f_history > 0 ? e->f_history : e->f_max_iter;
	if (hb > ha)
		d->f_history = hb;
	if (e->anderson_m > d->anderson_m)
		d->anderson_m = e->anderson_m;
}

/* Adds cfg unless a configuration of the same price key is there already
 * (a suite's methods, depths and seeds share one set of shapes): then
 * that one's solver histories are widened to cover cfg's. -1 when out of
 * memory. */
static int add_job(struct jobs *js, const struct bench_config *cfg, int V,
		   const char *source)
{
	char *key = price_key(cfg, V);
	json_t *at;
	if (!key)
		return -1;
	if ((at = json_object_get(js->seen, key))) {
		widen_histories(&js->j[json_integer_value(at)].cfg, cfg);
		free(key);
		return 0;
	}
	json_object_set_new(js->seen, key, json_integer(js->n));
	free(key);
	if (js->n == js->cap) {
		int cap = js->cap ? 2 * js->cap : 8;
		struct job *n = realloc(js->j, sizeof(*n) * (size_t)cap);
		if (!n)
			return -1;
		js->j = n;
		js->cap = cap;
	}
	js->j[js->n].cfg = *cfg;
	js->j[js->n].V = V;
	snprintf(js->j[js->n].source, sizeof(js->j[js->n].source), "%s",
		 source ? source : "");
	js->n++;
	return 0;
}

/* The configurations of records file path (each record's config with the
 * arguments argv[0..argc) over it; its model.vocab_size as the head's
 * width). Price records are passed over (they price, they are not runs).
 * 0, or -1 with err. */
static int jobs_of_records(struct jobs *js, const char *path, int argc,
			   char **argv, const char **val, char *err,
			   size_t errlen)
{
	json_t *arr = json_array(), *rec;
	size_t i;
	int rc = record_read_jsonl(path, arr, err, errlen), Vr;
	json_array_foreach(arr, i, rec)
	{
		const json_t *cfg = json_object_get(rec, "config");
		const char *kind =
		    json_string_value(json_object_get(rec, "kind"));
		double V = record_num(rec, "model.vocab_size");
		struct bench_config c;
		char src[600], e[800];
		if (rc != 0)
			break;
		if (kind && !strcmp(kind, "price"))
			continue;
		snprintf(src, sizeof(src), "%.500s:%zu", path, i + 1);
		if (!json_is_object(cfg)) {
			snprintf(err, errlen,
				 "%s: no config object; price reads run "
				 "records (deqbench validate %.300s)",
				 src, path);
			rc = -1;
			break;
		}
		Vr = V > 0 ? (int)V : 0;
		if (parse_config_on(&c, cfg, argc, argv, own_keys, val, e,
				    sizeof(e)) != 0 ||
		    (Vr == 0 &&
		     run_ctx_resolve_vocab(&c, &Vr, e, sizeof(e)) != 0)) {
			snprintf(err, errlen, "%s: %s", src, e);
			rc = -1;
			break;
		}
		rc = add_job(js, &c, Vr, src);
	}
	if (rc == 0 && js->n == 0) {
		snprintf(err, errlen,
			 "%s: no run record to price; give a file of "
			 "deqbench run or suite records",
			 path);
		rc = -1;
	}
	json_decref(arr);
	return rc;
}

/* "FILE.jsonl" argument: the first argument, not key=value, ending in
 * .jsonl. */
static const char *records_arg(int argc, char **argv)
{
	size_t l;
	if (argc < 1 || strchr(argv[0], '='))
		return NULL;
	l = strlen(argv[0]);
	return l > 6 && !strcmp(argv[0] + l - 6, ".jsonl") ? argv[0] : NULL;
}

/* The configurations to price from the arguments, and price's own keys
 * into o and *out. 0, or -1 with err. */
static int collect(struct jobs *js, int argc, char **argv, struct price_opts *o,
		   const char **out, char *err, size_t errlen)
{
	const char *val[4] = {NULL, NULL, NULL, NULL};
	const char *recs = records_arg(argc, argv);
	struct bench_config c;
	int V;
	/* the arguments alone first: bad keys are named once, up front */
	if (parse_config_on(&c, NULL, argc - (recs != NULL),
			    argv + (recs != NULL), own_keys, val, err,
			    errlen) != 0 ||
	    parse_own(val, o, err, errlen) != 0)
		return -1;
	*out = val[0];
	if (recs)
		return jobs_of_records(js, recs, argc - 1, argv + 1, val, err,
				       errlen);
	if (run_ctx_resolve_vocab(&c, &V, err, errlen) != 0)
		return -1;
	return add_job(js, &c, V, NULL) == 0 ? 0 : -1;
}

/* After a measurement the cap ended: how many units did not reach their
 * ±2% and what to do (nvbench warns of a timed-out measurement's unmet
 * criteria alike). */
static void print_unmet(const json_t *recs, size_t from)
{
	int unmet = 0, timed = 0;
	const json_t *r0 = json_array_get(recs, from);
	for (size_t i = from; i < json_array_size(recs); i++) {
		const json_t *r = json_array_get(recs, i);
		timed += json_is_true(json_object_get(r, "timed"));
		unmet += json_is_true(json_object_get(r, "timed")) &&
			 !json_is_true(json_object_get(r, "converged"));
	}
	if (unmet)
		printf("warning: %d of %d units did not reach +-%.0f%% in "
		       "price_cap_s=%g s (their intervals above are wider); "
		       "run on a quiet machine, pin with core=N, or raise "
		       "price_cap_s\n",
		       unmet, timed, 100 * record_num(r0, "measure.rel"),
		       record_num(r0, "measure.cap_s"));
}

/* Each solver's solver_update line a + b h among recs[from..). */
static void print_fits(const json_t *recs, size_t from)
{
	static const char *const solvers[] = {"broyden", "anderson"};
	for (int k = 0; k < 2; k++)
		for (size_t i = from; i < json_array_size(recs); i++) {
			const json_t *r = json_array_get(recs, i);
			const json_t *fit = json_object_get(r, "fit");
			const char *sv =
			    json_string_value(json_object_get(r, "solver"));
			if (!json_is_object(fit) || !sv ||
			    strcmp(sv, solvers[k]))
				continue;
			printf("solver_update:%s = %.4g ms + %.4g ms x h "
			       "(least squares through its h rows)\n",
			       sv, record_num(fit, "a_ms"),
			       record_num(fit, "b_ms"));
			break;
		}
}

/* A record's unit as the table names it: solver_update:SOLVER. */
static const char *unit_label(const json_t *r, char *buf, size_t n)
{
	const char *u = json_string_value(json_object_get(r, "unit"));
	const char *sv = json_string_value(json_object_get(r, "solver"));
	if (!sv)
		return u;
	snprintf(buf, n, "%s:%s", u, sv);
	return buf;
}

/* The table of one configuration's records recs[from..): a header line,
 * one row per record, each solver's solver_update line a + b h. */
static void print_table(const json_t *recs, size_t from)
{
	const json_t *r0 = json_array_get(recs, from);
	const char *src = json_string_value(json_object_get(r0, "source"));
	printf("\nprice: model=%s d_model=%.0f n_heads=%.0f d_ff=%.0f "
	       "seq_len=%.0f batch_size=%.0f vocab=%.0f precision=%s "
	       "device=%s threads=%.0f%s%s\n",
	       json_string_value(
		   json_object_get(json_object_get(r0, "shape"), "model")),
	       record_num(r0, "shape.d_model"), record_num(r0, "shape.n_heads"),
	       record_num(r0, "shape.d_ff"), record_num(r0, "shape.seq_len"),
	       record_num(r0, "shape.batch_size"),
	       record_num(r0, "shape.vocab_size"),
	       json_string_value(
		   json_object_get(json_object_get(r0, "shape"), "precision")),
	       json_string_value(
		   json_object_get(json_object_get(r0, "config"), "device")),
	       record_num(r0, "config.threads"), src ? " from " : "",
	       src ? src : "");
	printf("%-22s %4s %12s %25s %6s %6s %4s\n", "unit", "h", "median ms",
	       "95% interval (ms)", "+-%", "rounds", "2%");
	for (size_t i = from; i < json_array_size(recs); i++) {
		const json_t *r = json_array_get(recs, i);
		const json_t *h = json_object_get(r, "h");
		double med = record_num(r, "median_ms"),
		       lo = record_num(r, "lo_ms"), hi = record_num(r, "hi_ms");
		const char *per = json_string_value(json_object_get(r, "per"));
		char hb[16] = "-", iv[64] = "-", pct[16] = "-", ub[64];
		if (json_is_integer(h))
			snprintf(hb, sizeof(hb), "%lld",
				 (long long)json_integer_value(h));
		if (isfinite(lo) && isfinite(hi)) {
			snprintf(iv, sizeof(iv), "[%.4g, %.4g]", lo, hi);
			snprintf(pct, sizeof(pct), "%.1f",
				 100 * fmax(med - lo, hi - med) / med);
		}
		printf("%-22s %4s %12.4g %25s %6s %6.0f %4s%s\n",
		       unit_label(r, ub, sizeof(ub)), hb, med, iv, pct,
		       record_num(r, "rounds"),
		       json_is_true(json_object_get(r, "converged")) ? "yes"
								     : "no",
		       per && !strcmp(per, "byte") ? "  (ms per byte)" : "");
	}
	print_fits(recs, from);
	print_unmet(recs, from);
}

/* Appends recs[from..) to out (record_save: a failed append rescues the
 * record). 0, or -1 when one could only be rescued. */
static int save_all(const char *out, const json_t *recs, size_t from)
{
	int rc = 0;
	for (size_t i = from; i < json_array_size(recs); i++)
		rc |= record_save(out, json_array_get(recs, i));
	return rc;
}

int cmd_price(int argc, char **argv)
{
	struct price_opts o = {.cap_s = 20,
			       .rel = 0.02,
			       .warmup = 3,
			       .max_rounds = 100000,
			       .core = -1,
			       .seed = 1};
	struct jobs js = {NULL, 0, 0, json_object()};
	const char *out = NULL;
	char err[2048];
	json_t *recs = json_array();
	int rc = 0;
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage();
			goto done;
		}
	if (collect(&js, argc, argv, &o, &out, err, sizeof(err)) != 0 ||
	    (out && record_check_out(out, err, sizeof(err)) != 0) ||
	    (o.core >= 0 && price_pin(o.core, err, sizeof(err)) != 0)) {
		rc = bad_input(err);
		goto done;
	}
	for (int i = 0; i < js.n && !interrupt_signal(); i++) {
		size_t from = json_array_size(recs);
		o.seed = js.j[i].cfg.model.seed;
		if (price_config(&js.j[i].cfg, js.j[i].V,
				 js.j[i].source[0] ? js.j[i].source : NULL, &o,
				 recs, err, sizeof(err)) != 0) {
			fprintf(stderr, "deqbench price: %s\n", err);
			rc = 1;
			break;
		}
		print_table(recs, from);
		if (out && save_all(out, recs, from) != 0)
			rc = 1;
	}
	if (out && json_array_size(recs))
		printf("\n%zu price records appended to %s\n",
		       json_array_size(recs), out);
done:
	free(js.j);
	json_decref(js.seen);
	json_decref(recs);
	return rc;
}
