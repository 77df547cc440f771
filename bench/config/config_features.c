/* config_features.c — see config_features.h: which devices,
 * implementations and precisions each feature needs, and what it cannot go
 * with, declared once as rows; one checker writes every refusal from them,
 * and --help-json exports them (deqtorch's refusals are tested against
 * them: tests/peer/test_features.py). */
#include "config_features.h"

#include <stdio.h>
#include <string.h>

#include "../../kernels/backend.h"
#include "config.h"
#include "config_keys.h"

#define DEV(d)	(1u << (d))
#define IMPL(i) (1u << (i))
#define PREC(p) (1u << (p))

/* In the order they are checked (the first row missed is the message). */
static const struct feature rows[] = {
    {"tf32", NULL, 0, 0, 0, "precision=bf16",
     "tf32=true is an alias of precision=tf32", "drop tf32"},
    /* tf32=true resolves to precision=tf32 (config_finish) */
    {"precision", "tf32", DEV(DEVICE_CUDA), 0, 0, NULL,
     "(tf32=true) uses TF32 tensor cores, which exist only on the GPU",
     "use precision=fp32 or bf16, or device=cuda"},
    {"precision", "bf16", DEV(DEVICE_CPU) | DEV(DEVICE_CUDA), 0, 0, NULL,
     "is mixed precision, and cpu64 is the float64 reference (torch.autocast "
     "leaves float64 alone)",
     "use device=cpu or cuda"},
    {"method", "managed", DEV(DEVICE_CUDA), IMPL(IMPL_DEQBENCH), 0, NULL,
     "keeps tapes in CUDA unified memory (cudaMallocManaged)",
     "on the CPU or in PyTorch use method=offload"},
    {"cuda_graphs", NULL, DEV(DEVICE_CUDA), IMPL(IMPL_DEQBENCH), 0, NULL,
     "records CUDA graphs", "for PyTorch use compile=true; drop it"},
    {"sync_every", NULL, 0, 0, 0, "cuda_graphs=true",
     "with cuda_graphs=true a solve loops on the device and reads the host "
     "once",
     "drop sync_every"},
    {"device_mem_cap_mib", NULL, DEV(DEVICE_CUDA), IMPL(IMPL_DEQBENCH), 0, NULL,
     "caps a GPU's memory", "drop it"},
    {"compile", NULL, 0, IMPL(IMPL_PYTORCH), 0, NULL,
     "is torch.compile (deqbench's C core compiles ahead of time)",
     "drop compile or use impl=pytorch"},
    {"eval_every", NULL, 0, IMPL(IMPL_DEQBENCH), 0, NULL,
     "records the valid curve during training, which is deqbench's",
     "use eval_every=0 or impl=deqbench"},
    {"microbatches", NULL, 0, IMPL(IMPL_DEQBENCH), 0, NULL,
     "is gradient accumulation over micro-batches, which is deqbench's",
     "use microbatches=1 or impl=deqbench"},
    {"microbatches", NULL, 0, 0, 0, "cuda_graphs=true",
     "cuda_graphs=true records one whole batch's step",
     "use microbatches=1 or drop cuda_graphs"},
    {"attention", "flash", 0, IMPL(IMPL_DEQBENCH), 0, NULL,
     "is deqbench's fused attention kernel (FlashAttention-2 in C and CUDA)",
     "use attention=unfused or impl=deqbench"},
    {"epilogue", "fused", 0, IMPL(IMPL_DEQBENCH), 0, NULL,
     "is deqbench's GEMM epilogue (cuBLASLt)",
     "use epilogue=separate or impl=deqbench"},
    {"solver_kernels", "fused", 0, IMPL(IMPL_DEQBENCH), 0, NULL,
     "is deqbench's fused Broyden/Anderson iterations "
     "(kernels/solve_fused.h)",
     "use solver_kernels=ops or impl=deqbench"},
    {"selective", NULL, 0, IMPL(IMPL_DEQBENCH), 0, NULL,
     "keeps selective tapes in checkpoint segments, which is deqbench's",
     "use selective=false or impl=deqbench"},
};

const struct feature *config_feature(size_t i)
{
	return i < sizeof(rows) / sizeof(rows[0]) ? &rows[i] : NULL;
}

/* Key name's value in c as text (enums by name, bools true/false) into
 * buf; "" for a key there is none of. */
static void value_text(const struct bench_config *c, const char *name,
		       char *buf, size_t n)
{
	struct key_ref r = key_find(name);
	json_t *v = r.d ? key_json(c, r) : NULL;
	if (json_is_string(v))
		snprintf(buf, n, "%s", json_string_value(v));
	else if (json_is_boolean(v))
		snprintf(buf, n, "%s", json_is_true(v) ? "true" : "false");
	else if (json_is_integer(v))
		snprintf(buf, n, "%lld", (long long)json_integer_value(v));
	else if (json_is_number(v))
		snprintf(buf, n, "%.17g", json_number_value(v));
	else
		snprintf(buf, n, "%s", "");
	json_decref(v);
}

/* Whether "key=value" (or "key": any value but its default) holds in c;
 * the value c has into val. */
static int holds(const struct bench_config *c, const struct bench_config *dflt,
		 const char *key, const char *value, char *val, size_t n)
{
	char d[128];
	value_text(c, key, val, n);
	if (value)
		return !strcmp(val, value);
	value_text(dflt, key, d, sizeof(d));
	return strcmp(val, d) != 0;
}

/* "device=cuda", "device=cpu or cuda": the names of mask's bits. */
static void allowed(char *buf, size_t n, const char *key, unsigned mask,
		    const char *(*name)(int), int count)
{
	size_t l = (size_t)snprintf(buf, n, "%s=", key);
	int k = 0;
	for (int i = 0; i < count && l < n; i++) {
		if (!(mask & (1u << i)))
			continue;
		l += (size_t)snprintf(buf + l, n - l, "%s%s", k++ ? " or " : "",
				      name(i));
	}
}

static const char *prec_name(int p)
{
	return dq_precision_name((enum dq_precision)p);
}

/* The needs of row f that c misses, "device=cuda and impl=deqbench",
 * into buf; 0 when c meets them all. */
static int missing(const struct feature *f, const struct bench_config *c,
		   char *buf, size_t n)
{
	char part[3][96];
	int k = 0;
	if (!(f->devices && !(f->devices & DEV(c->device))) &&
	    !(f->impls && !(f->impls & IMPL(c->impl))) &&
	    !(f->precisions && !(f->precisions & PREC(c->model.precision))))
		return 0;
	/* the whole need, as the row declares it: what a fix must reach */
	if (f->devices)
		allowed(part[k++], sizeof(part[0]), "device", f->devices,
			config_device_name, 3);
	if (f->impls)
		allowed(part[k++], sizeof(part[0]), "impl", f->impls,
			config_impl_name, 2);
	if (f->precisions)
		allowed(part[k++], sizeof(part[0]), "precision", f->precisions,
			prec_name, 3);
	snprintf(buf, n, "%s%s%s%s%s", part[0], k > 1 ? " and " : "",
		 k > 1 ? part[1] : "", k > 2 ? " and " : "",
		 k > 2 ? part[2] : "");
	return 1;
}

int config_check_features(const struct bench_config *c, char *err,
			  size_t errlen)
{
	struct bench_config dflt;
	char val[128], other[128], need[320];
	config_defaults(&dflt);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct feature *f = &rows[i];
		if (!holds(c, &dflt, f->key, f->value, val, sizeof(val)))
			continue;
		if (missing(f, c, need, sizeof(need))) {
			snprintf(err, errlen, "%s=%s %s: it needs %s; %s",
				 f->key, val, f->why, need, f->fix);
			return -1;
		}
		if (f->conflicts) {
			char key[64];
			const char *eq = strchr(f->conflicts, '=');
			size_t kl = eq ? (size_t)(eq - f->conflicts)
				       : strlen(f->conflicts);
			snprintf(key, sizeof(key), "%.*s", (int)kl,
				 f->conflicts);
			if (holds(c, &dflt, key, eq ? eq + 1 : NULL, other,
				  sizeof(other))) {
				snprintf(err, errlen,
					 "%s=%s contradicts %s=%s (%s); %s",
					 f->key, val, key, other, f->why,
					 f->fix);
				return -1;
			}
		}
	}
	return 0;
}

/* The names of mask's bits as a JSON array. */
static json_t *names(unsigned mask, const char *(*name)(int), int count)
{
	json_t *a = json_array();
	for (int i = 0; i < count; i++)
		if (mask & (1u << i))
			json_array_append_new(a, json_string(name(i)));
	return a;
}

json_t *config_features_json(const char *key)
{
	json_t *a = json_array();
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct feature *f = &rows[i];
		if (strcmp(f->key, key))
			continue;
		json_array_append_new(
		    a,
		    json_pack(
			"{s:o, s:o, s:o, s:o, s:o, s:s, s:s}", "value",
			f->value ? json_string(f->value) : json_null(),
			"devices", names(f->devices, config_device_name, 3),
			"impls", names(f->impls, config_impl_name, 2),
			"precisions", names(f->precisions, prec_name, 3),
			"conflicts",
			f->conflicts ? json_string(f->conflicts) : json_null(),
			"why", f->why, "fix", f->fix));
	}
	return a;
}
