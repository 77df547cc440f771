/* memfit.h — does a run fit in memory? The bytes a run will allocate,
 * estimated before it allocates anything from the same layout functions
 * that size its buffers (model_memory, method_memory), and the check that
 * refuses a run whose estimate exceeds the memory it would run in: sizes
 * inside every key's range can still need terabytes together (d_model=16384
 * or vocab_size=67108864 grew to 12 GiB before the kernel killed them).
 */
#ifndef DQ_BENCH_MEMFIT_H
#define DQ_BENCH_MEMFIT_H

#include <stddef.h>

#include "../../kernels/backend.h"
#include "../config/config.h"

/* A run's memory, bytes. */
struct run_memory {
	/* tracked allocations per category, as the record's memory.peak_bytes
	 * reports them: model_memory, method_memory, the depth output z
	 * (head), with training Adam's two moments (optimizer), and
	 * method_host_memory (host: offloaded tapes, in host RAM, outside
	 * device_total) and method_managed_memory (managed: unified-memory
	 * tapes, outside device_total, counted in host_total since the driver
	 * may evict them all) */
	size_t device[MEM_NCAT];
	size_t device_total;
	/* the part of device[MEM_PARAMS] that grows with the vocabulary
	 * (embedding and head rows): the refusal's advice names vocab_size
	 * first when it is most of the parameters */
	size_t params_vocab;
	/* host memory outside the tracked allocator: the float64 staging of
	 * the parameters (model init; params/grad files), the int32 token
	 * batches, the per-step log (13 doubles and 2 ints a step) and with
	 * trace=true the record's per-step arrays (about 11 x 64 bytes a
	 * step) */
	size_t host_extra;
	size_t host_steps; /* the per-step part of host_extra */
	/* host total: host_extra, device[MEM_HOST] and device[MEM_MANAGED],
	 * plus device_total
	 * when the device is the host (cpu, cpu64) */
	size_t host_total;
};

/* Estimates cfg's run with vocabulary V on a backend with elem-byte
 * elements (4 float32, 8 float64). train: a training run (optimizer
 * state, step log) rather than params init / grad. Sums saturate at
 * SIZE_MAX. -1 with one line for dimensions the model or method refuse. */
int memfit_estimate(const struct bench_config *cfg, int V, size_t elem,
		    int train, struct run_memory *out, char *err,
		    size_t errlen);

/* Memory this process may use: physical RAM, or the cgroup's limit
 * (memory.max, v2; memory.limit_in_bytes, v1) where lower. 0 when unknown. */
size_t memfit_host_limit(void);

/* Refuses (-1, one line naming the estimate, what it is compared with and
 * the keys to lower) a run whose estimate exceeds the host's memory or,
 * for device=cuda, the device's. be: the run's backend (its element size
 * and device memory), or NULL before one exists (the parent of a suite's
 * runs creates none): the element size then comes from the device name
 * and a GPU's memory is left to the check the run makes itself. */
int memfit_check(const struct bench_config *cfg, int V,
		 const struct backend *be, int train, char *err, size_t errlen);

#endif
