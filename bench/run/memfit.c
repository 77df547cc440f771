/* memfit.c — see memfit.h. The estimate is the sum of what the run's
 * constructors allocate (model_create, method_create, run_ctx_create's
 * z, the Adam moments), computed by the same layout functions without
 * allocating; the tests compare it with the tracked allocator's counters
 * after a real setup. Host buffers freed before the step loop (the
 * parameter init staging) are counted as if they lived throughout: an
 * upper bound by at most 8 bytes a parameter. */
#include "memfit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../methods/method.h"
#include "../../models/model.h"
#include "step_log.h"

static size_t sat_add(size_t a, size_t b)
{
	return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static size_t sat_mul(size_t a, size_t b)
{
	return b && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

/* Bytes of the parameters of mc's model (vocabulary mc->vocab_size, whose
 * params take dev[MEM_PARAMS] bytes) that grow with the vocabulary: those
 * above a model of vocabulary 1. */
static size_t vocab_param_bytes(const struct model_config *mc,
				struct backend *stub, const size_t *dev)
{
	struct model_config one = *mc;
	struct model m1;
	size_t d1[MEM_NCAT];
	char e[256];
	one.vocab_size = 1;
	if (model_shape(&m1, stub, &one, e, sizeof(e)) != 0)
		return 0;
	model_memory(&m1, d1);
	return dev[MEM_PARAMS] > d1[MEM_PARAMS]
		   ? dev[MEM_PARAMS] - d1[MEM_PARAMS]
		   : 0;
}

/* Whether cfg's device is a GPU, whose memory is not the host's
 * (backend_caps_known: also on a build without that backend). */
static int on_gpu(const struct bench_config *cfg)
{
	const struct backend_caps *k =
	    backend_caps_known(config_device_name(cfg->device));
	return k && k->gpu;
}

int memfit_estimate(const struct bench_config *cfg, int V, size_t elem,
		    int train, struct run_memory *out, char *err, size_t errlen)
{
	struct backend stub; /* model_shape reads elem, bf16_operand_elem */
	struct model_config mc = cfg->model;
	struct model m;
	size_t depth, solver, n, per_step;

	memset(out, 0, sizeof(*out));
	memset(&stub, 0, sizeof(stub));
	stub.elem = elem;
	/* gemm_bf16's operands (precision=bf16): bf16 copies or the rounded
	 * values in the backend type (backend.h), known whether or not this
	 * build has the backend */
	const struct backend_caps *k =
	    backend_caps_known(config_device_name(cfg->device));
	stub.bf16_operand_elem =
	    k && k->bf16_operand_bytes ? (size_t)k->bf16_operand_bytes : elem;
	mc.vocab_size = V;
	mc.batch_size = config_micro_batch(cfg); /* the model's B */
	if (model_shape(&m, &stub, &mc, err, errlen) != 0)
		return -1;
	if (method_memory(&m, &cfg->method, &depth, &solver, err, errlen) != 0)
		return -1;
	if (cfg->pretrain_steps > 0) {
		/* pretrain.c allocates an unroll method beside the deq's */
		struct method_config uc = cfg->method;
		size_t ud, us;
		uc.method = method_kind_parse("unroll");
		uc.layers = cfg->pretrain_layers;
		if (method_memory(&m, &uc, &ud, &us, err, errlen) != 0)
			return -1;
		depth = sat_add(depth, ud);
	}
	model_memory(&m, out->device);
	n = m.n_param_elems;
	out->params_vocab = vocab_param_bytes(&mc, &stub, out->device);
	out->device[MEM_DEPTH] = depth;
	out->device[MEM_SOLVER] = solver;
	out->device[MEM_HOST] = method_host_memory(&m, &cfg->method);
	out->device[MEM_MANAGED] = method_managed_memory(&m, &cfg->method);
	out->device[MEM_HEAD] =
	    sat_add(out->device[MEM_HEAD], sat_mul(elem, m.n_state));
	if (train)
		out->device[MEM_OPTIMIZER] = sat_mul(2 * elem, n);
	for (int c = 0; c < MEM_NCAT; c++)
		if (c != MEM_HOST && c != MEM_MANAGED) /* as the allocator's */
			out->device_total =
			    sat_add(out->device_total, out->device[c]);

	/* float64 staging: model init (8 n); grad / params init also hold
	 * the float32 file and a float64 copy, or the float64 and float32
	 * output buffers (12 n) */
	out->host_extra = sat_mul(train ? 8 : 12, n);
	out->host_extra =
	    sat_add(out->host_extra,
		    sat_mul(3 * sizeof(int32_t),
			    (size_t)cfg->model.batch_size * ((size_t)m.T + 1)));
	if (train) {
		per_step = step_log_step_bytes() + (cfg->trace ? 11 * 64 : 0);
		out->host_steps = sat_mul(per_step, (size_t)cfg->steps);
		out->host_extra = sat_add(out->host_extra, out->host_steps);
	}
	out->host_total = sat_add(out->host_extra, out->device[MEM_HOST]);
	/* managed pages may all be evicted to the host */
	out->host_total = sat_add(out->host_total, out->device[MEM_MANAGED]);
	if (!on_gpu(cfg))
		out->host_total = sat_add(out->host_total, out->device_total);
	return 0;
}

/* A cgroup limit file's value; 0 when absent or "max". */
static size_t cgroup_limit(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned long long v = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return (size_t)v;
}

size_t memfit_host_limit(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	size_t lim = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : 0;
	static const char *const files[] = {
	    "/sys/fs/cgroup/memory.max",
	    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
	};
	for (int i = 0; i < 2; i++) {
		size_t c = cgroup_limit(files[i]);
		if (c > 0 && (lim == 0 || c < lim))
			lim = c;
	}
	return lim;
}

/* "12.3 GiB" */
static void fmt_bytes(char *buf, size_t n, size_t b)
{
	if (b == SIZE_MAX)
		snprintf(buf, n, "more than 16 EiB");
	else if (b >= (1ull << 30))
		snprintf(buf, n, "%.3g GiB", (double)b / (1ull << 30));
	else
		snprintf(buf, n, "%.3g MiB", (double)b / (1ull << 20));
}

/* The keys that shrink the largest part of the estimate. */
static const char *lower_hint(const struct run_memory *e, int host)
{
	static const char *const hint[MEM_NCAT] = {
	    "d_model, d_ff or vocab_size",
	    "d_model, d_ff or vocab_size",
	    "d_model, d_ff or vocab_size",
	    "vocab_size, batch_size or seq_len",
	    "layers, batch_size or seq_len (or use method=checkpoint or deq)",
	    "f_history, b_history or anderson_m",
	    "batch_size, seq_len or d_ff",
	    "layers, batch_size or seq_len (the offloaded tapes)",
	    "layers, batch_size or seq_len (the managed tapes)",
	};
	int big = 0;
	for (int c = 1; c < MEM_NCAT; c++)
		if (e->device[c] > e->device[big])
			big = c;
	if (host && e->host_steps > e->device[big])
		return "steps (the per-step log)";
	/* parameters, their gradients and moments mostly the vocabulary's
	 * rows: vocab_size first */
	if (big <= MEM_OPTIMIZER && e->params_vocab > e->device[MEM_PARAMS] / 2)
		return "vocab_size or d_model (the vocabulary's embedding and "
		       "head rows are most of the parameters)";
	return hint[big];
}

/* One line: "an estimated 20.1 GiB of host memory (params 4 GiB, ...)". */
static void describe(char *buf, size_t n, const struct run_memory *e, int host)
{
	char t[32], c[32];
	size_t off;
	fmt_bytes(t, sizeof(t), host ? e->host_total : e->device_total);
	off = (size_t)snprintf(buf, n, "an estimated %s of %s memory (", t,
			       host ? "host" : "device");
	for (int k = 0; k < MEM_NCAT && off < n; k++) {
		if (!e->device[k] ||
		    (!host && (k == MEM_HOST || k == MEM_MANAGED)) ||
		    (host && e->host_total == e->host_extra))
			continue;
		fmt_bytes(c, sizeof(c), e->device[k]);
		off += (size_t)snprintf(buf + off, n - off, "%s %s, ",
					mem_category_name(k), c);
	}
	if (off < n) {
		fmt_bytes(c, sizeof(c), e->host_extra);
		if (host)
			snprintf(buf + off, n - off, "host buffers %s)", c);
		else if (off >= 2)
			snprintf(buf + off - 2, n - off + 2, ")");
	}
}

/* The refusal of a run whose estimate E is over LIMIT bytes of host (HOST)
 * or device memory: one line in err naming both and the keys to lower. */
static int refuse(const struct run_memory *e, int host, size_t limit, char *err,
		  size_t errlen)
{
	char what[400], lim[32];
	describe(what, sizeof(what), e, host);
	fmt_bytes(lim, sizeof(lim), limit);
	snprintf(err, errlen,
		 "the run needs %s, more than the %s %s has; lower %s", what,
		 lim, host ? "this host" : "device=cuda", lower_hint(e, host));
	return -1;
}

int memfit_check(const struct bench_config *cfg, int V,
		 const struct backend *be, int train, char *err, size_t errlen)
{
	int cuda = on_gpu(cfg);
	/* cpu64 computes in float64, cpu and cuda in float32 (backend.h) */
	size_t elem = be ? be->elem : cfg->device == DEVICE_CPU64 ? 8 : 4;
	size_t host = memfit_host_limit(), dev = 0;
	struct run_memory e;

	if (memfit_estimate(cfg, V, elem, train, &e, err, errlen) != 0)
		return -1;
	if (cuda && be) {
		struct backend_info info;
		memset(&info, 0, sizeof(info));
		be_info(be, &info);
		dev = info.total_mem_bytes;
	}
	if (cuda && cfg->device_mem_cap_mib > 0 &&
	    (!dev || ((size_t)cfg->device_mem_cap_mib << 20) < dev))
		dev = (size_t)cfg->device_mem_cap_mib << 20;
	if (dev && e.device_total > dev)
		return refuse(&e, 0, dev, err, errlen);
	if (host && e.host_total > host)
		return refuse(&e, 1, host, err, errlen);
	return 0;
}
