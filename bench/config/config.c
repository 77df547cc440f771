/* config.c — the key table behind struct bench_config: one descriptor per
 * key (type, field offset, range, default, meaning) drives parsing, range
 * checks, JSON output and --help, so adding a key is one table row. */
#include "config.h"
#include "config_keys.h"
#include "../io/jsontext.h"
#include "../io/errmsg.h"

#include "../../methods/deq.h"
#include "../../methods/method.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *model_name_i(int k)
{
	return model_kind_name((enum model_kind)k);
}
static const char *init_name_i(int k)
{
	return model_init_name((enum model_init)k);
}

static const char *attention_name_i(int k)
{
	return model_attention_name((enum model_attention)k);
}

static const char *epilogue_name_i(int k)
{
	return model_epilogue_name((enum model_epilogue)k);
}

static const char *precision_name_i(int k)
{
	return dq_precision_name((enum dq_precision)k);
}

static const char *const device_names[] = {"cpu", "cpu64", "cuda"};
static const char *const impl_names[] = {"deqbench", "pytorch"};
KEY_NAME_FUNCS(config_device_parse, config_device_name, device_names)
KEY_NAME_FUNCS(config_impl_parse, config_impl_name, impl_names)

/* Rows of struct bench_config's own keys (keys.h); r: role flags. */
#define S			     struct bench_config
#define INT(n, g, f, lo, hi, h)	     KEY_INT(S, n, g, f, lo, hi, h, 0)
#define INT_R(n, g, f, lo, hi, h, r) KEY_INT(S, n, g, f, lo, hi, h, r)
#define DBL(n, g, f, lo, hi, h)	     KEY_DBL(S, n, g, f, lo, hi, h, 0)
#define DBL_GT(n, g, f, lo, hi, h)   KEY_DBL_GT(S, n, g, f, lo, hi, h, 0)
#define ENUM(n, g, f, p, nm, h, r)   KEY_ENUM(S, n, g, f, p, nm, h, r)
#define STR(n, g, f, ch, h, r)	     KEY_STR(S, n, g, f, ch, h, r)
#define BOOL(n, g, f, h, r)	     KEY_BOOL(S, n, g, f, h, r)

/* The model keys and the method keys every method shares; the registered
 * methods' own rows (method_kind_keys) follow them, then tail_keys. */
static const struct key_desc head_keys[] = {
    ENUM("model", "model", model.kind, model_kind_parse, model_name_i,
	 "weight-tied block", 0),
    INT("d_model", "model", model.d_model, 1, 65536, "model width d"),
    INT("n_heads", "model", model.n_heads, 1, 4096,
	"attention heads H (d_model % n_heads == 0)"),
    INT("d_ff", "model", model.d_ff, 1, 1 << 20, "feed-forward width F"),
    INT("seq_len", "model", model.seq_len, 1, 1 << 20, "sequence length T"),
    INT("batch_size", "model", model.batch_size, 1, 1 << 20, "batch B"),
    INT("vocab_size", "model", model.vocab_size, 0, 1 << 26,
	"vocabulary V; 0 = the corpus's (synthetic: 256); for a file "
	"corpus 0 or at least its vocabulary"),
    {"seed", "model", KT_U64, KEY_OFF(S, model.seed), 0, 0, NULL, NULL, NULL, 0,
     "seed of parameter init and synthetic tokens (batches are in "
     "corpus order)",
     0, 0},
    ENUM("init", "model", model.init, model_init_parse, init_name_i,
	 "parameter init preset (docs/models.md: Initialisation)", 0),
    DBL("init_std", "model", model.init_std, 0, 1e3,
	"std of every linear/conv weight, N(0, init_std^2); 0 = the "
	"preset's"),
    DBL("embed_std", "model", model.embed_std, 0, 1e3,
	"std of token and position embeddings, N(0, embed_std^2); 0 = the "
	"preset's"),
    ENUM("attention", "model", model.attention, model_attention_parse,
	 attention_name_i,
	 "transformer attention: unfused (the B H T^2 probabilities on the "
	 "tape) or flash (fused, FlashAttention-2: per row its log-sum-exp "
	 "instead; head width d_model/n_heads <= 128)",
	 0),
    ENUM("epilogue", "model", model.epilogue, model_epilogue_parse,
	 epilogue_name_i,
	 "linear layers' bias (and the transformer's ReLU): separate (a pass "
	 "after the GEMM) or fused (in the GEMM's epilogue: cuBLASLt on cuda; "
	 "the same bits on the CPU)",
	 0),
    INT("head_chunk", "model", model.head_chunk, 0, 1 << 30,
	"positions per chunk of the LM head's softmax-cross-entropy: "
	"head_chunk*V logits live instead of batch_size*seq_len*V, one host "
	"read per chunk; 0 = off (all at once)"),

    ENUM("method", "method", method.method, method_kind_parse, method_kind_name,
	 "how depth is trained", KEY_METHOD),
    INT("layers", "method", method.layers, 1, 100000,
	"L for unroll / checkpoint / revolve"),
};

static const struct key_desc tail_keys[] = {
    ENUM("corpus", "data", corpus, corpus_kind_parse, corpus_kind_name,
	 "training corpus (synthetic = seeded random tokens)", 0),
    STR("data_dir", "data", data_dir, NULL, "directory holding corpora",
	KEY_OUTPUT),

    INT("steps", "training", steps, 1, 1e9, "optimizer steps"),
    INT_R("microbatches", "training", microbatches, 1, 1 << 20,
	  "gradient accumulation: each step runs M micro-batches of "
	  "batch_size/M rows (M divides batch_size) and one optimizer step; "
	  "the depth memory falls by M (docs/methods.md)",
	  KEY_METHOD),
    INT_R("pretrain_steps", "training", pretrain_steps, 0, 1e9,
	  "method=deq: first steps train the block unrolled pretrain_layers "
	  "deep, then the solver takes over; 0 = off; < steps",
	  KEY_METHOD),
    INT_R("pretrain_layers", "training", pretrain_layers, 1, 100000,
	  "depth of the unrolled pretraining steps", KEY_METHOD),
    INT("warmup_steps", "training", warmup_steps, -1, 1e9,
	"first steps excluded from timing; -1 = min(10, steps/5)"),
    DBL_GT("lr", "training", lr, 0, 1e3, "peak learning rate (Adam)"),
    INT("lr_warmup", "training", lr_warmup, 0, 1e9,
	"linear lr warmup steps, then cosine decay to 0"),
    DBL("clip", "training", clip, 0, 1e30, "grad-norm clip; 0 = off"),
    {"eval_tokens", "training", KT_LONG, KEY_OFF(S, eval_tokens), 0, 1e15, NULL,
     NULL, NULL, 0, "tokens evaluated per split (valid, test); 0 = none", 0, 0},
    INT("eval_warmup", "training", eval_warmup, 0, 1000000,
	"first valid batches left out of the inference timing"),
    INT("eval_every", "training", eval_every, 0, 1e9,
	"evaluate the valid split (eval_tokens) every N training steps, "
	"untimed, into quality.valid_curve; 0 = off"),
    {"curve_tokens", "training", KT_LONG, KEY_OFF(S, curve_tokens), 0, 1e15,
     NULL, NULL, NULL, 0,
     "valid tokens each eval_every evaluation averages over (the first of "
     "the split, whole batches); 0 = eval_tokens",
     0, 0},
    STR("params", "training", params, NULL,
	"safetensors parameters to start from (run) or to evaluate (eval), "
	"as params init or save_params write them; empty = init from seed",
	KEY_EMPTY_OK),

    ENUM("device", "device", device, config_device_parse, config_device_name,
	 "backend", 0),
    INT("threads", "device", threads, 0, 4096,
	"CPU threads; 0 = library default"),
    ENUM("precision", "device", model.precision, dq_precision_parse,
	 precision_name_i,
	 "matrix products: fp32, tf32 (TF32 tensor cores, device=cuda) or "
	 "bf16 (mixed precision: bf16 GEMM operands and tapes, fp32 "
	 "weights, Adam and statistics; docs/precision.md)",
	 0),
    BOOL("tf32", "device", tf32,
	 "alias of precision=tf32 (device=cuda only; an error elsewhere)", 0),
    BOOL("compile", "device", compile,
	 "impl=pytorch: torch.compile the model (torch >= 2); an error with "
	 "impl=deqbench",
	 0),
    BOOL("cuda_graphs", "device", cuda_graphs,
	 "device=cuda: run unroll/checkpoint/revolve passes, the head and "
	 "clipping+Adam as recorded CUDA graphs and deq's solves as "
	 "device-side loops (one host read a solve, one a step for the "
	 "loss and norm; docs/gpu.md)",
	 0),
    INT("device_mem_cap_mib", "device", device_mem_cap_mib, 0, 1e8,
	"device=cuda: MiB of GPU memory the run may use, the rest held "
	"back, so that method=managed oversubscribes a large card; 0 = the "
	"whole card"),
    ENUM("impl", "device", impl, config_impl_parse, config_impl_name,
	 "implementation: deqbench (this C core) or pytorch (bench/pytorch "
	 "on Debian's python3-torch, run as a child process; "
	 "docs/pytorch.md)",
	 0),

    STR("out", "output", out, NULL, "JSONL file records are appended to",
	KEY_OUTPUT),
    BOOL("trace", "output", trace, "per-step traces in the record", KEY_OUTPUT),
    STR("save_params", "output", save_params, NULL,
	"write the trained parameters here (safetensors, PyTorch names, the "
	"resolved config in its metadata); empty = not saved",
	KEY_OUTPUT | KEY_EMPTY_OK),
};
#undef S

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Key i of the whole table, in its order (head, methods', tail); d NULL
 * past the end. */
struct key_ref key_at(size_t i)
{
	struct key_ref r = {NULL, -1};
	size_t n;
	if (i < NELEM(head_keys)) {
		r.d = &head_keys[i];
		return r;
	}
	i -= NELEM(head_keys);
	for (int k = 0; k < method_kind_count(); k++) {
		const struct key_desc *mk = method_kind_keys(k, &n);
		if (i < n) {
			r.d = &mk[i];
			r.owner = k;
			return r;
		}
		i -= n;
	}
	if (i < NELEM(tail_keys))
		r.d = &tail_keys[i];
	return r;
}

/* The field of key r in c. */
void *key_field(const struct bench_config *c, struct key_ref r)
{
	const void *base = r.owner < 0 ? (const void *)c
				       : method_opts_slot(&c->method, r.owner);
	return (char *)base + r.d->offset;
}

void config_defaults(struct bench_config *c)
{
	memset(c, 0, sizeof(*c));
	c->model.kind = MODEL_TRANSFORMER;
	c->model.d_model = 64;
	c->model.n_heads = 2;
	c->model.d_ff = 256;
	c->model.seq_len = 32;
	c->model.batch_size = 16;
	c->microbatches = 1;
	c->model.vocab_size = 0;
	c->model.seed = 1;
	/* the recipe under which the DEQ converges (docs/models.md
	 * Initialisation); older records' default was gpt2 */
	c->model.init = MODEL_INIT_PYTORCH;
	method_config_defaults(&c->method);
	c->corpus = CORPUS_BROWN;
	snprintf(c->data_dir, sizeof(c->data_dir), "data");
	c->steps = 200;
	c->pretrain_steps = 0;
	c->pretrain_layers = 12;
	c->warmup_steps = -1; /* min(10, steps/5): config_finish */
	c->lr = 1e-3;
	c->lr_warmup = 20;
	c->clip = 1.0;
	c->eval_tokens = 16384;
	c->eval_warmup = 2;
	c->eval_every = 0;
	c->curve_tokens = 0;
	c->device = DEVICE_CPU;
	c->threads = 0;
	c->tf32 = 0;
	c->impl = IMPL_DEQBENCH;
	snprintf(c->out, sizeof(c->out), "results/runs.jsonl");
	c->trace = 0;
}

struct key_ref key_find(const char *name)
{
	struct key_ref r;
	for (size_t i = 0; (r = key_at(i)).d; i++)
		if (strcmp(r.d->name, name) == 0)
			return r;
	return r;
}

int config_key_known(const char *key)
{
	return key_find(key).d != NULL;
}

int config_key_is_method(const char *key)
{
	struct key_ref r = key_find(key);
	return r.d && (r.owner >= 0 || (r.d->role & KEY_METHOD));
}

int config_key_is_output(const char *key)
{
	struct key_ref r = key_find(key);
	return r.d && (r.d->role & KEY_OUTPUT);
}

/* Levenshtein distance, O(|a| |b|); key names are short. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];
	if (lb >= 63)
		lb = 63;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
			size_t best = diag + cost;
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

const char *config_closest_key(const char *s)
{
	const char *best = NULL;
	size_t bd = (size_t)-1;
	struct key_ref r;
	for (size_t i = 0; (r = key_at(i)).d; i++) {
		size_t d = edit_distance(s, r.d->name);
		if (d < bd) {
			bd = d;
			best = r.d->name;
		}
	}
	/* A suggestion helps when it is a typo of the word: at most one
	 * edit per three letters of the longer name (lyers -> layers,
	 * batchsize -> batch_size), so foo does not become k. */
	if (!best ||
	    3 * bd > (strlen(s) > strlen(best) ? strlen(s) : strlen(best)))
		return NULL;
	return best;
}

void config_suggest(const char *s, char *buf, size_t n)
{
	const char *k = config_closest_key(s);
	if (k)
		snprintf(buf, n, "; did you mean '%s'?", k);
	else if (n)
		buf[0] = 0;
}

static const char *type_word(const struct key_desc *d)
{
	switch (d->type) {
	case KT_INT:
	case KT_LONG:
	case KT_U64:
		return "an integer";
	case KT_DOUBLE:
		return "a number";
	case KT_BOOL:
		return "true or false";
	default:
		return "a string";
	}
}

static int range_error(const struct key_desc *d, const char *value, char *err,
		       size_t errlen)
{
	char r[96];
	key_range_text(d, r, sizeof(r));
	snprintf(err, errlen, "%s=%s is out of range; use a value in %s",
		 d->name, value, r);
	return -1;
}

enum num_parse { NUM_OK, NUM_SYNTAX, NUM_RANGE };

/* Decimal or exponent notation only: no spaces, hex, inf or nan. */
static int numeric_text(const char *s)
{
	return *s && strspn(s, "0123456789+-.eE") == strlen(s);
}

/* An integer: decimal digits, or a number in decimal or exponent notation
 * whose value is whole (3.0, 1e6) — the rule JSON numbers follow in a
 * config file, so a value means the same in a file and on the command
 * line. Whole numbers written that way are exact only up to 2^53; beyond
 * they are out of range (no key allows more, seed's digits aside). */
static enum num_parse parse_number(const char *s, double *out);

static enum num_parse parse_integer(const char *s, long long *out)
{
	char *end;
	long long v;
	double x;
	enum num_parse r;
	if (!numeric_text(s))
		return NUM_SYNTAX;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (!*end) {
		if (errno == ERANGE)
			return NUM_RANGE;
		*out = v;
		return NUM_OK;
	}
	r = parse_number(s, &x); /* leaves strtod's errno */
	if (r != NUM_OK)
		return r;
	if (errno == ERANGE || x != floor(x))
		return NUM_SYNTAX; /* 3.5, or 1e-400 (no integer) */
	if (fabs(x) > 9007199254740992.0)
		return NUM_RANGE;
	*out = (long long)x;
	return NUM_OK;
}

/* A finite number. Underflow (1e-400) gives 0 or a subnormal, which the
 * key's range then judges; overflow is out of range. */
static enum num_parse parse_number(const char *s, double *out)
{
	char *end;
	double x;
	if (!numeric_text(s))
		return NUM_SYNTAX;
	errno = 0;
	x = strtod(s, &end);
	if (*end)
		return NUM_SYNTAX;
	if (errno == ERANGE && fabs(x) > 1)
		return NUM_RANGE;
	*out = x;
	return NUM_OK;
}

/* Sets an integer or floating-point key from text. */
static int set_numeric(void *field, const struct key_desc *d, const char *value,
		       const char *shown, char *err, size_t errlen)
{
	enum num_parse r;
	long long iv = 0;
	double v = 0;

	if (d->type == KT_DOUBLE) {
		r = parse_number(value, &v);
	} else {
		r = parse_integer(value, &iv);
		v = (double)iv;
		if (r == NUM_OK && d->type == KT_U64 && iv < 0)
			r = NUM_RANGE;
	}
	if (r == NUM_SYNTAX) {
		snprintf(err, errlen, "%s=%s: expected %s, e.g. %s=%s", d->name,
			 shown, type_word(d), d->name,
			 d->type == KT_DOUBLE		  ? "0.001"
			 : strcmp(d->name, "layers") == 0 ? "12"
							  : "1");
		return -1;
	}
	if (r == NUM_RANGE || (d->type != KT_U64 && !key_in_range(d, v)))
		return range_error(d, shown, err, errlen);
	switch (d->type) {
	case KT_INT:
		*(int *)field = (int)iv;
		break;
	case KT_LONG:
		*(long *)field = (long)iv;
		break;
	case KT_U64: /* records hold JSON integers: int64 */
		*(uint64_t *)field = (uint64_t)iv;
		break;
	default:
		*(double *)field = v;
	}
	return 0;
}

int config_set(struct bench_config *c, const char *key, const char *value,
	       char *err, size_t errlen)
{
	struct key_ref r = key_find(key);
	char kb[64], sug[96];

	if (!r.d) {
		config_suggest(key, sug, sizeof(sug));
		snprintf(err, errlen,
			 "unknown key '%s'%s (deqbench run --help lists the "
			 "keys)",
			 errmsg_brief(key, kb, sizeof(kb)), sug);
		return -1;
	}
	return config_set_row(r.d, (char *)key_field(c, r) - r.d->offset, value,
			      err, errlen);
}

int config_set_row(const struct key_desc *d, void *base, const char *value,
		   char *err, size_t errlen)
{
	const char *key = d->name;
	char vb[96], ch[256];
	const char *shown = errmsg_brief(value, vb, sizeof(vb));
	void *field = (char *)base + d->offset;

	key_choices(d, ch, sizeof(ch));
	switch (d->type) {
	case KT_INT:
	case KT_LONG:
	case KT_U64:
	case KT_DOUBLE:
		return set_numeric(field, d, value, shown, err, errlen);
	case KT_BOOL:
		if (!strcasecmp(value, "true") || !strcmp(value, "1") ||
		    !strcasecmp(value, "yes") || !strcasecmp(value, "on"))
			*(int *)field = 1;
		else if (!strcasecmp(value, "false") || !strcmp(value, "0") ||
			 !strcasecmp(value, "no") || !strcasecmp(value, "off"))
			*(int *)field = 0;
		else {
			snprintf(err, errlen, "%s=%s: expected true or false",
				 key, shown);
			return -1;
		}
		return 0;
	case KT_ENUM: {
		int v = d->parse(value);
		if (v < 0) {
			snprintf(err, errlen,
				 "%s=%s is not a known value; use one of: %s",
				 key, shown, ch);
			return -1;
		}
		*(int *)field = v;
		return 0;
	}
	case KT_STR:
		if (!*value && !(d->role & KEY_EMPTY_OK)) {
			snprintf(err, errlen, "%s is empty; give a value", key);
			return -1;
		}
		if (strlen(value) >= d->size) {
			snprintf(err, errlen,
				 "%s: value is longer than %zu characters", key,
				 d->size - 1);
			return -1;
		}
		memcpy(field, value, strlen(value) + 1);
		return 0;
	}
	return -1;
}

int config_set_json(struct bench_config *c, const char *key,
		    const json_t *value, char *err, size_t errlen)
{
	const struct key_desc *d = key_find(key).d;
	char buf[CONFIG_PATH + 64], ch[256];

	if (!d)
		return config_set(c, key, "", err, errlen);
	switch (json_typeof(value)) {
	case JSON_STRING:
		if (d->type != KT_STR && d->type != KT_ENUM) {
			snprintf(err, errlen,
				 "%s=\"%s\": expected %s, not a string", key,
				 json_string_value(value), type_word(d));
			return -1;
		}
		return config_set(c, key, json_string_value(value), err,
				  errlen);
	case JSON_INTEGER:
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(value));
		break;
	case JSON_REAL:
		/* keep the value a real in text (3.0, not 3): the command-line
		 * rules then apply to it unchanged (a whole number is an
		 * integer, 1.0 is not a boolean) */
		snprintf(buf, sizeof(buf), "%.17g", json_real_value(value));
		if (!strpbrk(buf, ".eEni"))
			strcat(buf, ".0");
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		if (d->type != KT_BOOL) {
			snprintf(err, errlen, "%s=%s: expected %s", key,
				 json_is_true(value) ? "true" : "false",
				 type_word(d));
			return -1;
		}
		return config_set(c, key,
				  json_is_true(value) ? "true" : "false", err,
				  errlen);
	default:
		snprintf(err, errlen,
			 "%s: expected %s, not an object, array or null", key,
			 type_word(d));
		return -1;
	}
	if (d->type == KT_STR || d->type == KT_ENUM || d->type == KT_BOOL) {
		if (d->type == KT_BOOL &&
		    (!strcmp(buf, "0") || !strcmp(buf, "1")))
			return config_set(c, key, buf, err, errlen);
		key_choices(d, ch, sizeof(ch));
		snprintf(err, errlen, "%s=%s: expected %s%s%s", key, buf,
			 type_word(d), *ch ? ": " : "", ch);
		return -1;
	}
	return config_set(c, key, buf, err, errlen);
}

int config_set_arg(struct bench_config *c, const char *arg, char *err,
		   size_t errlen)
{
	const char *eq = strchr(arg, '=');
	char key[128];
	size_t n;

	if (!eq || eq == arg) {
		snprintf(err, errlen,
			 "argument '%s' is not key=value; write e.g. "
			 "layers=12 (deqbench run --help lists the keys)",
			 arg);
		return -1;
	}
	n = (size_t)(eq - arg);
	if (n >= sizeof(key))
		n = sizeof(key) - 1;
	memcpy(key, arg, n);
	key[n] = 0;
	return config_set(c, key, eq + 1, err, errlen);
}

int config_apply_object(struct bench_config *c, const json_t *obj,
			const char *source, char *err, size_t errlen)
{
	const char *key;
	json_t *v;
	char e[512];

	if (!json_is_object(obj)) {
		snprintf(err, errlen,
			 "%s: expected a JSON object of key: value pairs",
			 source);
		return -1;
	}
	json_object_foreach((json_t *)obj, key, v)
	{
		if (config_set_json(c, key, v, e, sizeof(e)) != 0) {
			snprintf(err, errlen, "%s: %s", source, e);
			return -1;
		}
	}
	return 0;
}

json_t *key_json(const struct bench_config *c, struct key_ref r)
{
	const struct key_desc *d = r.d;
	const void *field = key_field(c, r);
	switch (d->type) {
	case KT_INT:
		return json_integer(*(const int *)field);
	case KT_LONG:
		return json_integer(*(const long *)field);
	case KT_U64:
		return json_integer((json_int_t) * (const uint64_t *)field);
	case KT_DOUBLE:
		return json_real(*(const double *)field);
	case KT_BOOL:
		return json_boolean(*(const int *)field);
	case KT_ENUM: {
		const char *s = d->enum_name(*(const int *)field);
		return json_string(s ? s : "?");
	}
	case KT_STR:
		return jsontext_string((const char *)field);
	}
	return json_null();
}
