/* cmd_bench_block.c — `deqbench bench-block [key=value ...]`: the
 * block's achieved GFLOP/s next to the backend GEMM's GFLOP/s on the
 * block's own GEMM shapes, in one run (how close the block gets to the
 * GEMM roofline of this device).
 *
 * What is counted (model_block_flops, models/): forward FLOPs F_fwd, the
 * kind's GEMMs (multiply-add = 2) and, for the transformer, q kᵀ and
 * att v over the full T×T scores (4BT²d). Forward + vjp with parameter
 * gradients is counted as 3 F_fwd, the usual convention: the backward of
 * every matmul is two matmuls of the same size (input and weight
 * gradients). Bias, LayerNorm, softmax, gates, shifts and copies are not
 * counted but are timed.
 *
 * The GEMM reference asks the model for its shapes: one block forward
 * with tape and one vjp with parameter gradients run once, untimed, with
 * model_gemm's log on (model_gemm_log_start, models/model.h), which
 * lists each distinct (trans, M, N, K) with its count: the transformer's
 * twelve GEMMs (four forward, four dX, four dW; shapes that coincide, as
 * qkv's and ff1's at d_ff = 3 d_model, merge), TrellisNet's three shapes
 * of 8 (its eight gate/tap GEMMs forward, dX and dW), tanh_cell's three.
 * Each shape is timed alone (median) and counted with its count; the
 * reference reports Σ flops / Σ median time: the rate the block would
 * reach if it were only these GEMMs. ratio = block rate / GEMM rate;
 * below 1 by the cost of attention (not a BLAS call on the CPU) and the
 * element-wise ops.
 *
 * vocab=V > 0 adds the LM head's three GEMMs at N = B*T rows and E =
 * d_model (the head's input width):
 *   logits z Whᵀ (N,V,E)   dz = dlogits Wh (N,E,V)   dWh = dlogitsᵀ z (V,E,N)
 * each timed once (median), and a rate for one training step's GEMM
 * shapes: Σ flops / Σ time over layers=L times the block's GEMMs (as
 * above, with their multiplicity) plus the head's three, the rate a
 * whole step's counted FLOPs (timing.gflops, bench/run/run_record.h) could
 * reach if every counted FLOP ran at these GEMMs' speed. The injection's
 * GEMMs (small beside these) are not in it.
 *
 * The transformer's largest non-GEMM ops (attention forward and vjp,
 * LayerNorm forward and vjp, the bf16 rounding of an operand) are timed
 * alone at the block's shapes too, with their share of the block's time.
 *
 * precision=bf16 (docs/precision.md): the block runs in bf16 and each
 * reference GEMM is timed twice: as model_gemm calls it (be_gemm_bf16:
 * both operands rounded, then the bf16 product; the "ms" column) and on
 * operands that are bf16 arrays already (be_gemm_bf16_arrays: the bf16
 * GEMM alone, the "floor ms" column), whose sums are the bf16 GEMM-only
 * floor of the block's and of a training step's shapes.
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../models/model.h"
#include "../config/config.h"
#include "../run/block_units.h"
#include "cmd.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

struct bb_cfg {
	int d, H, F, T, B, threads, iters, warmup;
	int vocab, layers; /* head GEMMs (0: off); block GEMMs per step */
	uint64_t seed;
	const char *device;
	enum model_kind model;	     /* any registered kind */
	enum dq_precision precision; /* of the block and the reference GEMMs */
};

/* The config keys bench-block reads, parsed and checked as `run`'s are
 * (config_set), and their values where they differ from `run`'s defaults:
 * the bench-block preset (docs/commands.md). */
static const char *const run_keys[] = {
    "model",	  "d_model",   "n_heads",  "d_ff",    "seq_len",
    "batch_size", "layers",    "device",   "threads", "seed",
    "precision",  "attention", "epilogue", NULL,
};
static const char *const preset[] = {
    "d_model=128",   "n_heads=4", "d_ff=512", "seq_len=64",
    "batch_size=16", "layers=1",  NULL,
};

/* Its own keys: rows (methods/keys.h) over struct bb_own, parsed by
 * config_set_row. */
struct bb_own {
	int iters, warmup, vocab;
};
#define O struct bb_own
static const struct key_desc own_keys[] = {
    KEY_INT(O, "iters", "bench", iters, 1, 1e9, "timed repetitions", 0),
    KEY_INT(O, "warmup", "bench", warmup, 0, 1e9, "untimed repetitions", 0),
    KEY_INT(O, "vocab", "bench", vocab, 0, 1 << 26,
	    "LM head vocabulary V; 0 = the head is not timed", 0),
};
#undef O
static const struct bb_own own_defaults = {20, 3, 0};

static int in_list(const char *k, size_t kl, const char *const *list)
{
	for (int i = 0; list[i]; i++)
		if (strlen(list[i]) == kl && !strncmp(k, list[i], kl))
			return 1;
	return 0;
}

/* bench-block's key names, ", "-separated, into buf. */
static void key_names(char *buf, size_t n)
{
	size_t l = 0;
	buf[0] = 0;
	for (int i = 0; run_keys[i] && l < n; i++)
		l += (size_t)snprintf(buf + l, n - l, "%s, ", run_keys[i]);
	for (size_t i = 0; i < NELEM(own_keys) && l < n; i++)
		l += (size_t)snprintf(buf + l, n - l, "%s%s", own_keys[i].name,
				      i + 1 < NELEM(own_keys) ? ", " : "");
}

/* Sets "key=value" a (eq: its '=') in *c or *own. 0, or -1 with err. */
static int set_key(struct bench_config *c, struct bb_own *own, const char *a,
		   const char *eq, char *err, size_t errlen)
{
	char key[64], names[256], sug[96] = "";
	size_t kl = (size_t)(eq - a);
	const char *close;
	for (size_t i = 0; i < NELEM(own_keys); i++)
		if (strlen(own_keys[i].name) == kl &&
		    !strncmp(a, own_keys[i].name, kl))
			return config_set_row(&own_keys[i], own, eq + 1, err,
					      errlen);
	snprintf(key, sizeof(key), "%.*s", (int)(kl < 63 ? kl : 63), a);
	if (in_list(a, kl, run_keys))
		return config_set(c, key, eq + 1, err, errlen);
	close = config_closest_key(key);
	if (close && in_list(close, strlen(close), run_keys))
		snprintf(sug, sizeof(sug), "; did you mean '%s'?", close);
	key_names(names, sizeof(names));
	if (config_key_known(key))
		snprintf(err, errlen,
			 "'%s' is a key of deqbench run, not of bench-block; "
			 "bench-block's keys: %s",
			 key, names);
	else
		snprintf(err, errlen,
			 "unknown key '%s'%s; bench-block's keys: %s", key, sug,
			 names);
	return -1;
}

/* Prints the usage with every key's default (the preset). */
static void print_usage(const struct bench_config *c, const struct bb_own *own)
{
	char kinds[256];
	model_kind_list(kinds, sizeof(kinds));
	printf("usage: deqbench bench-block [key=value ...]\n"
	       "  keys and their defaults (the bench-block preset; the config "
	       "keys are\n  parsed and checked as deqbench run's):\n   ");
	for (int i = 0; run_keys[i]; i++) {
		json_t *v = config_key_json(c, run_keys[i]);
		char *t = json_is_string(v) ? strdup(json_string_value(v))
					    : json_dumps(v, JSON_ENCODE_ANY);
		printf(" %s=%s", run_keys[i], t ? t : "?");
		free(t);
		json_decref(v);
	}
	for (size_t i = 0; i < NELEM(own_keys); i++)
		printf(" %s=%d", own_keys[i].name,
		       *(const int *)((const char *)own + own_keys[i].offset));
	printf("\n  model: any kind (%s)\n  vocab=V > 0: also time the LM "
	       "head's three GEMMs and print the rate of\n  one training "
	       "step's GEMM shapes (layers x the block's + the head's)\n",
	       kinds);
}

/* The preset: run's defaults with preset[] over them. */
static void preset_config(struct bench_config *c)
{
	char err[256];
	config_defaults(c);
	for (int i = 0; preset[i]; i++) {
		int rc = config_set_arg(c, preset[i], err, sizeof(err));
		assert(rc == 0 && "the preset holds valid keys");
		(void)rc;
	}
}

/* The bench-block config from c and own. */
static void fill(struct bb_cfg *b, const struct bench_config *c,
		 const struct bb_own *own)
{
	const struct model_config *m = &c->model;
	*b = (struct bb_cfg){.d = m->d_model,
			     .H = m->n_heads,
			     .F = m->d_ff,
			     .T = m->seq_len,
			     .B = m->batch_size,
			     .threads = c->threads,
			     .iters = own->iters,
			     .warmup = own->warmup,
			     .vocab = own->vocab,
			     .layers = c->method.layers,
			     .seed = m->seed,
			     .device = config_device_name(c->device),
			     .model = m->kind,
			     .precision = m->precision};
}

/* argv[1..argc) into *b (the preset for keys not given). 0; 1 after
 * printing the usage for --help; -1 on bad input (its message printed). */
static int parse_args(int argc, char **argv, struct bb_cfg *b)
{
	struct bench_config c;
	struct bb_own own = own_defaults;
	char err[1024];
	preset_config(&c);
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			print_usage(&c, &own);
			return 1;
		}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq = strchr(a, '=');
		if (!eq || eq == a)
			snprintf(err, sizeof(err),
				 "'%s' is not key=value; write e.g. "
				 "d_model=128 (deqbench bench-block --help "
				 "lists the keys)",
				 a);
		if (!eq || eq == a ||
		    set_key(&c, &own, a, eq, err, sizeof(err)))
			goto bad;
	}
	if (config_validate(&c, err, sizeof(err)) != 0)
		goto bad;
	fill(b, &c, &own);
	return 0;
bad:
	fprintf(stderr, "deqbench bench-block: %s\n", err);
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A reference GEMM: its row label, shape and count (its calls in one
 * block forward + vjp, or 1 for a head GEMM). */
struct gemm_shape {
	char what[48];
	int ta, tb, M, N, K;
	long count;
};

/* Device buffers of one bench-block run and the host scratch. */
struct bb_bufs {
	struct block_bufs blk; /* block input/output, cotangents, tape */
	size_t nd;	       /* block state elements (m->n_state) */
	size_t big; /* elements of each GEMM operand: max(N w, w d, N V, V
		     * d) or more, to hold every logged shape's */
	/* model_gemm's log of one block forward with tape, one vjp */
	struct model_gemm_log fwd, vjp;
	void *A, *Bm, *C; /* GEMM operands */
	void *S;	  /* gemm_bf16's scratch (precision=bf16), else NULL */
	uint16_t *A16, *B16; /* A, Bm in bf16 (precision=bf16), else NULL */
	double floor_ms;     /* Σ of the floor's medians (precision=bf16) */
	double *ms, *host;   /* iters timings; max(nd, big) inputs */
};

/* One call of shape s on b's operands (contents irrelevant to the rate):
 * be_gemm; under precision=bf16 be_gemm_bf16 with scratch b->S, as
 * model_gemm calls it (both operands rounded, then the bf16 product), or
 * with floor be_gemm_bf16_arrays on the bf16 arrays b->A16, b->B16 (the
 * bf16 GEMM alone). */
static void gemm_call(struct backend *be, const struct gemm_shape *s,
		      const struct bb_bufs *b, int floor)
{
	int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
	if (floor)
		be_gemm_bf16_arrays(be, s->ta, s->tb, s->M, s->N, s->K, 1.0,
				    b->A16, lda, b->B16, ldb, 1.0, b->C, s->N,
				    b->S);
	else if (b->S)
		be_gemm_bf16(be, s->ta, s->tb, s->M, s->N, s->K, 1.0, b->A, lda,
			     b->Bm, ldb, 1.0, b->C, s->N, b->S);
	else
		be_gemm(be, s->ta, s->tb, s->M, s->N, s->K, 1.0, b->A, lda,
			b->Bm, ldb, 1.0, b->C, s->N);
}

/* Median milliseconds of gemm_call(s, floor) over iters calls after
 * warmup (b->ms holds the timings). */
static double time_gemm(struct backend *be, const struct gemm_shape *s,
			struct bb_bufs *b, int floor, int warmup, int iters)
{
	for (int i = 0; i < warmup + iters; i++) {
		be_timer_mark(be, 0);
		gemm_call(be, s, b, floor);
		be_timer_mark(be, 1);
		if (i >= warmup)
			b->ms[i - warmup] = be_timer_elapsed_ms(be, 0, 1);
	}
	return median(b->ms, iters);
}

/* The block's GEMM shapes, asked of the model: one block forward with
 * tape into b->fwd and one vjp with parameter gradients into b->vjp, run
 * with model_gemm's log on (untimed); b->big raised to hold the largest
 * operand or product among them. */
static void log_block_gemms(struct model *m, struct bb_bufs *b)
{
	model_gemm_log_start(m, &b->fwd);
	block_unit_run(m, &b->blk, BLOCK_FWD_TAPED);
	model_gemm_log_stop(m);
	model_gemm_log_start(m, &b->vjp);
	block_unit_run(m, &b->blk, BLOCK_VJP);
	model_gemm_log_stop(m);
	assert(!b->fwd.dropped && !b->vjp.dropped);
	for (int p = 0; p < 2; p++) {
		const struct model_gemm_log *l = p ? &b->vjp : &b->fwd;
		for (int i = 0; i < l->n; i++) {
			size_t M = (size_t)l->s[i].M, N = (size_t)l->s[i].N;
			size_t K = (size_t)l->s[i].K;
			size_t e[] = {M * K, K * N, M * N};
			for (int j = 0; j < 3; j++)
				b->big = e[j] > b->big ? e[j] : b->big;
		}
	}
}

/* Allocates the buffers of model M (c's sizes) and fills them with
 * deterministic O(1) values; logs the block's GEMM shapes
 * (log_block_gemms). -1 when out of memory (message printed; free with
 * bb_free). */
static int bb_alloc(struct backend *be, struct model *m, const struct bb_cfg *c,
		    struct bb_bufs *b)
{
	size_t N = (size_t)c->B * c->T, d = (size_t)c->d, F = (size_t)c->F;
	size_t w = F > 3 * d ? F : 3 * d, V = (size_t)c->vocab;
	b->nd = m->n_state;
	/* the transformer's GEMM operands and the head's are at most
	 * max(N w, w d, N V, V d) = max(N, d) max(w, V) elements */
	b->big = (N > d ? N : d) * (w > V ? w : V);
	if (block_bufs_alloc(be, m, &b->blk) != 0) {
		fprintf(stderr, "deqbench bench-block: out of memory\n");
		return -1;
	}
	log_block_gemms(m, b);
	b->A = backend_alloc(be, b->big, MEM_WORKSPACE);
	b->Bm = backend_alloc(be, b->big, MEM_WORKSPACE);
	b->C = backend_alloc(be, b->big, MEM_WORKSPACE);
	if (c->precision == DQ_PREC_BF16 &&
	    !(b->S = backend_alloc_bytes(be, 2 * b->big * be->bf16_operand_elem,
					 MEM_WORKSPACE))) {
		fprintf(stderr, "deqbench bench-block: out of memory\n");
		return -1;
	}
	if (c->precision == DQ_PREC_BF16 &&
	    (!(b->A16 = backend_alloc_bytes(be, 2 * b->big, MEM_WORKSPACE)) ||
	     !(b->B16 = backend_alloc_bytes(be, 2 * b->big, MEM_WORKSPACE)))) {
		fprintf(stderr, "deqbench bench-block: out of memory\n");
		return -1;
	}
	b->ms = malloc(sizeof(double) * (size_t)c->iters);
	b->host = malloc(sizeof(double) * (b->nd > b->big ? b->nd : b->big));
	if (!b->A || !b->Bm || !b->C || !b->ms || !b->host) {
		fprintf(stderr, "deqbench bench-block: out of memory\n");
		return -1;
	}
	/* deterministic O(1) GEMM operands (block_units.h's values) */
	block_fill_host(b->host, b->nd > b->big ? b->nd : b->big);
	be_upload(be, b->A, b->host, b->big);
	be_upload(be, b->Bm, b->host, b->big);
	be_fill(be, b->C, 0.0, b->big);
	if (b->A16) {
		be_to_bf16(be, b->A16, b->A, b->big);
		be_to_bf16(be, b->B16, b->Bm, b->big);
	}
	return 0;
}

/* Frees what bb_alloc allocated (NULL pointers included). */
static void bb_free(struct backend *be, struct bb_bufs *b)
{
	free(b->ms);
	free(b->host);
	void *dev[] = {b->A, b->Bm, b->C, b->S, b->A16, b->B16};
	block_bufs_free(be, &b->blk);
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		backend_free(be, dev[i]);
}

/* Median ms of block units ua and ub run back to back, each (*ma, *mb)
 * and, where both is not NULL, the pair (*both, its samples in b->ms).
 * -1 when out of memory (message printed). */
static int time_units(struct backend *be, struct model *m,
		      const struct bb_cfg *c, struct bb_bufs *b,
		      enum block_unit ua, enum block_unit ub, double *ma,
		      double *mb, double *both)
{
	double *am = malloc(sizeof(double) * (size_t)c->iters);
	double *bm = malloc(sizeof(double) * (size_t)c->iters);
	if (!am || !bm) {
		free(am);
		free(bm);
		fprintf(stderr, "deqbench bench-block: out of memory\n");
		return -1;
	}
	for (int i = 0; i < c->warmup + c->iters; i++) {
		be_timer_mark(be, 0);
		block_unit_run(m, &b->blk, ua);
		be_timer_mark(be, 1);
		block_unit_run(m, &b->blk, ub);
		be_timer_mark(be, 2);
		if (i >= c->warmup) {
			am[i - c->warmup] = be_timer_elapsed_ms(be, 0, 1);
			bm[i - c->warmup] = be_timer_elapsed_ms(be, 1, 2);
			if (both)
				b->ms[i - c->warmup] =
				    be_timer_elapsed_ms(be, 0, 2);
		}
	}
	*ma = median(am, c->iters);
	*mb = median(bm, c->iters);
	if (both)
		*both = median(b->ms, c->iters);
	free(am);
	free(bm);
	return 0;
}

/* Median ms of the block's forward with tape (*fwd), its vjp with
 * parameter gradients (*bwd) and both (*blk), as a method's backward
 * runs them. -1 when out of memory (message printed). */
static int time_block(struct backend *be, struct model *m,
		      const struct bb_cfg *c, struct bb_bufs *b, double *fwd,
		      double *bwd, double *blk)
{
	return time_units(be, m, c, b, BLOCK_FWD_TAPED, BLOCK_VJP, fwd, bwd,
			  blk);
}

/* Median ms of the two units a DEQ's solver iteration costs: the block's
 * forward without a tape (*fwd0: a forward solver iteration's evaluation,
 * model_block_forward with tape NULL) and its input-only vjp (*vjp0: an
 * implicit backward iteration, gu NULL and no parameter gradients), on the
 * tape time_block left. -1 when out of memory (message printed). */
static int time_solver_units(struct backend *be, struct model *m,
			     const struct bb_cfg *c, struct bb_bufs *b,
			     double *fwd0, double *vjp0)
{
	return time_units(be, m, c, b, BLOCK_FWD, BLOCK_VJP_INPUT, fwd0, vjp0,
			  NULL);
}

/* Times shapes sh[0..n) once each and prints a row per shape; adds their
 * flops and median ms, each counted sh[k].count times, to *flops and *ms
 * (and, under precision=bf16, the floor's to b->floor_ms, printed in a
 * last column). */
static void time_shapes(struct backend *be, const struct bb_cfg *c,
			const struct gemm_shape *sh, size_t n,
			struct bb_bufs *b, double *flops, double *ms)
{
	for (size_t k = 0; k < n; k++) {
		double t = time_gemm(be, &sh[k], b, 0, c->warmup, c->iters);
		double f = 2.0 * sh[k].M * (double)sh[k].N * sh[k].K;
		double mult = (double)sh[k].count;
		*flops += f * mult;
		*ms += t * mult;
		printf("%-22s %6d %6d %6d %10.4f %10.2f", sh[k].what, sh[k].M,
		       sh[k].N, sh[k].K, t, f / (t * 1e6));
		if (b->A16) {
			double fl =
			    time_gemm(be, &sh[k], b, 1, c->warmup, c->iters);
			b->floor_ms += fl * mult;
			printf(" %10.4f", fl);
		}
		printf("\n");
	}
}

/* The entries of log as reference GEMMs into sh (MODEL_GEMM_LOG_MAX
 * room), labelled by phase ("fwd", "vjp") and product (op(A) op(B): A B,
 * A B^T, A^T B, A^T B^T), with "xC" for a count C > 1. Returns their
 * number. */
static size_t shapes_of_log(const struct model_gemm_log *log, const char *phase,
			    struct gemm_shape *sh)
{
	for (int i = 0; i < log->n; i++) {
		const struct model_gemm_shape *e = &log->s[i];
		char x[24] = "";
		if (e->count > 1)
			snprintf(x, sizeof(x), " x%ld", e->count);
		sh[i] = (struct gemm_shape){"",	  e->ta, e->tb,	  e->M,
					    e->N, e->K,	 e->count};
		snprintf(sh[i].what, sizeof(sh[i].what), "%s  A%s B%s%s", phase,
			 e->ta ? "^T" : "", e->tb ? "^T" : "", x);
	}
	return (size_t)log->n;
}

/* Times and prints the reference GEMMs of the block, the shapes b->fwd
 * and b->vjp logged (see the header): *flops and *ms their counted FLOPs
 * and median times, summed with their counts. */
static void time_gemms(struct backend *be, const struct bb_cfg *c,
		       struct bb_bufs *b, double *flops, double *ms)
{
	struct gemm_shape sh[MODEL_GEMM_LOG_MAX];
	printf("%-22s %6s %6s %6s %10s %10s%s\n", "gemm", "M", "N", "K", "ms",
	       "GFLOP/s", b->A16 ? "   floor ms" : "");
	*flops = *ms = 0;
	time_shapes(be, c, sh, shapes_of_log(&b->fwd, "fwd", sh), b, flops, ms);
	time_shapes(be, c, sh, shapes_of_log(&b->vjp, "vjp", sh), b, flops, ms);
}

/* Times and prints the head's three GEMMs (c->vocab > 0; see the header,
 * E = d_model): *flops and *ms their FLOPs and median times, summed. */
static void time_head_gemms(struct backend *be, const struct bb_cfg *c,
			    struct bb_bufs *b, double *flops, double *ms)
{
	int n = (int)((size_t)c->B * c->T), E = c->d, V = c->vocab;
	const struct gemm_shape head[] = {
	    {"head logits z Wh^T", 0, 1, n, V, E, 1},
	    {"head dz  dlogits Wh", 0, 0, n, E, V, 1},
	    {"head dWh dlogits^T z", 1, 0, V, E, n, 1},
	};
	*flops = *ms = 0;
	time_shapes(be, c, head, NELEM(head), b, flops, ms);
}

/* With vocab > 0: times the head's GEMMs and prints the rate of one
 * training step's GEMM shapes, layers x the block's (block_flops FLOPs in
 * block_ms) + the head's. */
static void print_step_rate(struct backend *be, const struct bb_cfg *c,
			    struct bb_bufs *b, double block_flops,
			    double block_ms)
{
	double hf, hms, block_floor = b->floor_ms;
	b->floor_ms = 0;
	time_head_gemms(be, c, b, &hf, &hms);
	double f = c->layers * block_flops + hf,
	       ms = c->layers * block_ms + hms;
	if (b->A16) /* the bf16 GEMM-only floor of the step's shapes */
		printf("gemm bf16 floor, one training step's shapes %8.4f ms "
		       "for %.4g GFLOP  %.2f GFLOP/s (operands already "
		       "bf16)\n",
		       c->layers * block_floor + b->floor_ms, f * 1e-9,
		       f / ((c->layers * block_floor + b->floor_ms) * 1e6));
	printf("gemm, one training step's shapes %8.4f ms for %.4g GFLOP  "
	       "%.2f GFLOP/s  (layers=%d x block + head, vocab=%d)\n",
	       ms, f * 1e-9, f / (ms * 1e6), c->layers, c->vocab);
}

/* Median ms of op(be, b, k) over iters calls after warmup. */
static double time_op(struct backend *be, const struct bb_cfg *c,
		      struct bb_bufs *b,
		      void (*op)(struct backend *, struct bb_bufs *, int),
		      int k)
{
	for (int i = 0; i < c->warmup + c->iters; i++) {
		be_timer_mark(be, 0);
		op(be, b, k);
		be_timer_mark(be, 1);
		if (i >= c->warmup)
			b->ms[i - c->warmup] = be_timer_elapsed_ms(be, 0, 1);
	}
	return median(b->ms, c->iters);
}

/* The block's non-GEMM ops at its shapes (struct other_bufs), k picks
 * one: 0 attention forward, 1 its backward, 2 LayerNorm forward, 3 its
 * backward (the block fuses a residual add into them), 4 the bf16
 * rounding of one (N, d) operand. Inputs are bb_alloc's O(1) values. */
struct other_bufs {
	int B, T, d, H;
	void *att, *scr, *mean, *rstd; /* (B,H,T,T) twice, (N) twice */
};
static struct other_bufs ob;

static void other_op(struct backend *be, struct bb_bufs *b, int k)
{
	int N = ob.B * ob.T, d = ob.d;
	void *w = b->blk.g, *lb = dq_at(be, b->blk.g, (size_t)d);
	void *dw = b->blk.zo, *db = dq_at(be, b->blk.zo, (size_t)d);
	if (k == 0)
		be_attention_forward(be, b->C, ob.att, b->A, ob.B, ob.T, d,
				     ob.H);
	else if (k == 1)
		be_attention_backward(be, b->Bm, ob.scr, b->C, b->A, ob.att,
				      ob.B, ob.T, d, ob.H);
	else if (k == 2)
		be_layernorm_forward(be, b->C, ob.mean, ob.rstd, b->A, w, lb, N,
				     d);
	else if (k == 3)
		be_layernorm_backward(be, b->Bm, dw, db, b->C, b->A, ob.mean,
				      ob.rstd, w, N, d);
	else
		be_round_bf16(be, b->C, (size_t)N * d);
}

/* Times and prints the transformer block's largest non-GEMM ops, each
 * alone at the block's shapes: attention forward and backward (fp32 in
 * every precision), LayerNorm forward and backward (two of each in the
 * block) and, under bf16, the rounding of one (N, d) GEMM operand (the
 * block rounds each GEMM's operands); with their share of blk_ms. */
static void time_other_ops(struct backend *be, const struct bb_cfg *c,
			   struct bb_bufs *b, double blk_ms)
{
	size_t tt = (size_t)c->B * c->H * c->T * c->T, N = (size_t)c->B * c->T;
	double t[5] = {0};
	ob =
	    (struct other_bufs){c->B, c->T, c->d, c->H, NULL, NULL, NULL, NULL};
	ob.att = backend_alloc(be, tt, MEM_WORKSPACE);
	ob.scr = backend_alloc(be, tt, MEM_WORKSPACE);
	ob.mean = backend_alloc(be, N, MEM_WORKSPACE);
	ob.rstd = backend_alloc(be, N, MEM_WORKSPACE);
	if (!ob.att || !ob.scr || !ob.mean || !ob.rstd) {
		printf("other ops: not timed (out of memory)\n");
	} else {
		for (int k = 0; k < (b->A16 ? 5 : 4); k++)
			t[k] = time_op(be, c, b, other_op, k);
		printf("other ops (median ms): attention fwd %.4f vjp %.4f, "
		       "layernorm fwd %.4f vjp %.4f (x2)",
		       t[0], t[1], t[2], t[3]);
		if (b->A16)
			printf(", bf16 rounding of an (N,d) operand %.4f",
			       t[4]);
		printf("; attention + layernorms %.0f%% of block time\n",
		       100.0 * (t[0] + t[1] + 2 * (t[2] + t[3])) / blk_ms);
	}
	void *p[] = {ob.att, ob.scr, ob.mean, ob.rstd};
	for (size_t i = 0; i < NELEM(p); i++)
		backend_free(be, p[i]);
}

/* Creates the backend and the model of c. 0, or -1 with the message
 * printed (*be destroyed). */
static int bb_setup(const struct bb_cfg *c, struct backend **be,
		    struct model **m)
{
	char err[256] = "";
	struct model_config mc = {
	    .kind = c->model,
	    .d_model = c->d,
	    .n_heads = c->H,
	    .d_ff = c->F,
	    .seq_len = c->T,
	    .batch_size = c->B,
	    .vocab_size = 16, /* the head is not timed */
	    .seed = c->seed,
	    .precision = c->precision,
	};
	if (backend_create(be, c->device, c->threads, err, sizeof(err)) != 0) {
		fprintf(stderr, "deqbench bench-block: %s\n", err);
		return -1;
	}
	if (c->precision == DQ_PREC_TF32)
		be_set_tf32(*be, 1); /* config_validate: device=cuda */
	if (model_create(m, *be, &mc, err, sizeof(err)) != 0) {
		fprintf(stderr, "deqbench bench-block: %s\n", err);
		backend_destroy(*be);
		return -1;
	}
	return 0;
}

int cmd_bench_block(int argc, char **argv)
{
	struct bb_cfg c;
	struct backend *be = NULL;
	struct model *m = NULL;
	struct bb_bufs b = {0};
	struct backend_info info;
	double fwd_ms, bwd_ms, blk_ms, flops, blk_gfs, gflop_sum, gms_sum;
	double fwd0_ms, vjp0_ms;
	int rc = 1, pa = parse_args(argc, argv, &c);

	if (pa != 0)
		return pa > 0 ? 0 : 2;
	if (bb_setup(&c, &be, &m) != 0)
		return 2;
	if (bb_alloc(be, m, &c, &b) != 0 ||
	    time_block(be, m, &c, &b, &fwd_ms, &bwd_ms, &blk_ms) != 0 ||
	    time_solver_units(be, m, &c, &b, &fwd0_ms, &vjp0_ms) != 0)
		goto done;
	flops = model_block_flops(m);
	blk_gfs = 3.0 * flops / (blk_ms * 1e6);
	be_info(be, &info);
	printf("bench-block: model=%s device=%s (%s) precision=%s B=%d T=%d "
	       "d_model=%d n_heads=%d d_ff=%d iters=%d warmup=%d\n",
	       model_kind_name(c.model), c.device, info.name,
	       dq_precision_name(c.precision), c.B, c.T, c.d, c.H, c.F, c.iters,
	       c.warmup);
	time_gemms(be, &c, &b, &gflop_sum, &gms_sum);
	double gemm_gfs = gflop_sum / (gms_sum * 1e6);
	printf("block forward   %10.4f ms (median)\n", fwd_ms);
	printf("block vjp       %10.4f ms (median, parameter gradients on)\n",
	       bwd_ms);
	printf("block forward, no tape %10.4f ms (median; a forward solver "
	       "iteration's evaluation)\n",
	       fwd0_ms);
	printf("block vjp, input only  %10.4f ms (median; an implicit backward "
	       "iteration's VJP)\n",
	       vjp0_ms);
	printf("block fwd+vjp   %10.4f ms  %.4g GFLOP counted (3 x %.4g "
	       "forward)  %.2f GFLOP/s\n",
	       blk_ms, 3.0 * flops * 1e-9, flops * 1e-9, blk_gfs);
	printf("gemm, same shapes %8.4f ms for %.4g GFLOP  %.2f GFLOP/s\n",
	       gms_sum, gflop_sum * 1e-9, gemm_gfs);
	printf("ratio block/gemm %.3f  (gemm share of block time %.0f%%)\n",
	       blk_gfs / gemm_gfs, 100.0 * gms_sum / blk_ms);
	if (c.model == MODEL_TRANSFORMER)
		time_other_ops(be, &c, &b, blk_ms);
	if (b.A16)
		printf("gemm bf16 floor, same shapes %8.4f ms  %.2f GFLOP/s "
		       "(operands already bf16; ratio block/floor %.3f)\n",
		       b.floor_ms, gflop_sum / (b.floor_ms * 1e6),
		       blk_gfs / (gflop_sum / (b.floor_ms * 1e6)));
	if (c.vocab > 0)
		print_step_rate(be, &c, &b, gflop_sum, gms_sum);
	rc = 0;
done:
	bb_free(be, &b);
	model_destroy(m);
	backend_destroy(be);
	return rc;
}
