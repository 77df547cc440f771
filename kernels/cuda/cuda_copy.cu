/* cuda_copy.cu — offload and unified-memory support of the CUDA backend
 * (backend.h, §offload and §unified memory; docs/ARCHITECTURE.md §Offload,
 * §Managed): page-locked host memory for MEM_HOST, managed memory for
 * MEM_MANAGED, a second non-blocking stream for the copies and prefetches,
 * BACKEND_COPY_EVENTS events that order the compute stream after one, the
 * device-memory cap, and timing.
 *
 * Ordering. copy_async records order_ev on the compute stream and makes the
 * copy stream wait for it, so a copy starts after every op issued before it
 * (the tape it moves is written); its copy event cev[ev] is recorded after
 * the copy. copy_wait makes the compute stream wait for cev[ev] (a buffer
 * about to be overwritten, or a prefetched tape about to be read).
 * cudaStreamWaitEvent takes the event's state at the call, so reusing
 * order_ev and cev[] is safe once they are waited for.
 *
 * A prefetch (cudaMemPrefetchAsync) is ordered, timed and counted as a
 * copy: copy_stats' copies and bytes include the bytes asked to move,
 * whether or not their pages had to move.
 *
 * Timing. Each copy gets a pair of timing events around it on the copy
 * stream (copy_ms); each copy_wait a pair on the compute stream around the
 * wait (stall_ms: nothing else is queued between them, so their distance
 * is the time the compute stream stood still). The pairs are created on
 * first use and reused after every copy_stats (no allocation in the timed
 * steps after the first); copy_stats synchronises both streams and sums
 * them.
 */
#include "cuda_common.cuh"

#include <string.h>

void *cu_host_alloc(void *ctx, size_t bytes)
{
	void *p = NULL;
	(void)ctx;
	if (cudaMallocHost(&p, bytes) != cudaSuccess) {
		(void)cudaGetLastError(); /* out of pinned memory: not sticky */
		return NULL;
	}
	return p;
}

void cu_host_free(void *ctx, void *p)
{
	(void)ctx;
	if (p)
		cuda_check(cudaFreeHost(p));
}

/* The next timing pair (created on first use), or NULL when no more can be
 * made: the copy then runs untimed and copy_stats under-counts. */
static struct dq_cu_timing *timing_next(struct dq_cuda_ctx *c, int stall)
{
	if (c->n_timing == c->cap_timing) {
		int cap = c->cap_timing ? 2 * c->cap_timing : 64;
		struct dq_cu_timing *t = (struct dq_cu_timing *)realloc(
		    c->timing, (size_t)cap * sizeof(*t));
		if (!t)
			return NULL;
		for (int i = c->cap_timing; i < cap; i++) {
			cudaError_t e = cudaEventCreate(&t[i].a);
			if (e == cudaSuccess &&
			    (e = cudaEventCreate(&t[i].b)) != cudaSuccess)
				(void)cudaEventDestroy(t[i].a);
			if (e != cudaSuccess) {
				(void)cudaGetLastError();
				c->timing = t;
				c->cap_timing = i;
				return NULL;
			}
		}
		c->timing = t;
		c->cap_timing = cap;
	}
	struct dq_cu_timing *p = &c->timing[c->n_timing++];
	p->stall = stall;
	return p;
}

/* A copy (dst != NULL) or a prefetch of src to loc (dst NULL) on the copy
 * stream after every op issued so far, timed, then copy event ev. */
static void copy_or_prefetch(struct dq_cuda_ctx *c, void *dst, const void *src,
			     size_t bytes, const cudaMemLocation *loc, int ev)
{
	cuda_check(cudaEventRecord(c->order_ev, c->stream));
	cuda_check(cudaStreamWaitEvent(c->copy_stream, c->order_ev, 0));
	struct dq_cu_timing *t = timing_next(c, 0);
	if (t)
		cuda_check(cudaEventRecord(t->a, c->copy_stream));
	if (dst)
		cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
					   c->copy_stream));
	else
		cuda_check(
		    cudaMemPrefetchAsync(src, bytes, *loc, 0, c->copy_stream));
	if (t)
		cuda_check(cudaEventRecord(t->b, c->copy_stream));
	cuda_check(cudaEventRecord(c->cev[ev], c->copy_stream));
	c->copies.copies++;
	c->copies.bytes += bytes;
}

void cu_copy_async(void *ctx, void *dst, const void *src, size_t bytes, int ev)
{
	if (bytes)
		copy_or_prefetch(dq_cu(ctx), dst, src, bytes, NULL, ev);
}

/* ------------------------------------------------------ unified memory */

void *cu_managed_alloc(void *ctx, size_t bytes)
{
	void *p = NULL;
	(void)ctx;
	if (cudaMallocManaged(&p, bytes, cudaMemAttachGlobal) != cudaSuccess) {
		(void)cudaGetLastError(); /* out of memory: not sticky */
		return NULL;
	}
	return p;
}

/* cudaFree waits for the device: managed memory is freed outside the
 * timed steps (method_destroy). */
void cu_managed_free(void *ctx, void *p)
{
	(void)ctx;
	if (p)
		cuda_check(cudaFree(p));
}

void cu_prefetch(void *ctx, const void *p, size_t bytes, int to_device, int ev)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	cudaMemLocation loc;
	memset(&loc, 0, sizeof(loc));
	loc.type =
	    to_device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
	loc.id = to_device ? c->device : 0;
	if (bytes)
		copy_or_prefetch(c, NULL, p, bytes, &loc, ev);
}

/* The reserve: what is free beyond `bytes`, in 2 MiB units (the driver's
 * granularity), held by one cudaMalloc until cu_destroy. The pool is
 * trimmed first so that memory it holds unused counts as free. */
int cu_cap_device(void *ctx, size_t bytes, char *err, size_t errlen)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	const size_t unit = (size_t)2 << 20;
	size_t fr = 0, tot = 0;
	if (c->reserve) {
		snprintf(err, errlen, "the device memory is capped already");
		return -1;
	}
	cuda_check(cudaStreamSynchronize(c->stream));
	cuda_check(cudaMemPoolTrimTo(c->pool, 0));
	cuda_check(cudaMemGetInfo(&fr, &tot));
	if (bytes >= fr) {
		snprintf(err, errlen,
			 "device_mem_cap_mib=%zu is not below the %zu MiB free "
			 "on the GPU; lower it, or drop it to use the whole "
			 "card",
			 bytes >> 20, fr >> 20);
		return -1;
	}
	size_t hold = (fr - bytes) / unit * unit;
	if (hold && cudaMalloc(&c->reserve, hold) != cudaSuccess) {
		(void)cudaGetLastError();
		c->reserve = NULL;
		snprintf(err, errlen,
			 "device_mem_cap_mib=%zu: could not reserve the %zu "
			 "MiB above the cap; raise the cap",
			 bytes >> 20, hold >> 20);
		return -1;
	}
	return 0;
}

void cu_copy_wait(void *ctx, int ev)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	struct dq_cu_timing *t = timing_next(c, 1);
	if (t)
		cuda_check(cudaEventRecord(t->a, c->stream));
	cuda_check(cudaStreamWaitEvent(c->stream, c->cev[ev], 0));
	if (t)
		cuda_check(cudaEventRecord(t->b, c->stream));
}

void cu_copy_stats(void *ctx, struct backend_copy_stats *out)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	cuda_check(cudaStreamSynchronize(c->copy_stream));
	cuda_check(cudaStreamSynchronize(c->stream));
	for (int i = 0; i < c->n_timing; i++) {
		float ms = 0.0f;
		cuda_check(
		    cudaEventElapsedTime(&ms, c->timing[i].a, c->timing[i].b));
		if (c->timing[i].stall)
			c->copies.stall_ms += ms;
		else
			c->copies.copy_ms += ms;
	}
	*out = c->copies;
	memset(&c->copies, 0, sizeof(c->copies));
	c->n_timing = 0;
}

cudaError_t cu_copy_init(struct dq_cuda_ctx *c)
{
	cudaError_t e =
	    cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking);
	for (; e == cudaSuccess && c->n_cev < BACKEND_COPY_EVENTS; c->n_cev++)
		e = cudaEventCreateWithFlags(&c->cev[c->n_cev],
					     cudaEventDisableTiming);
	if (e == cudaSuccess)
		e = cudaEventCreateWithFlags(&c->order_ev,
					     cudaEventDisableTiming);
	if (e == cudaSuccess)
		c->n_cev++; /* order_ev */
	return e;
}

/* Teardown: reports and goes on. */
void cu_copy_destroy(struct dq_cuda_ctx *c)
{
	if (c->copy_stream)
		(void)cudaStreamSynchronize(c->copy_stream);
	for (int i = 0; i < c->n_cev && i < BACKEND_COPY_EVENTS; i++)
		(void)cudaEventDestroy(c->cev[i]);
	if (c->n_cev > BACKEND_COPY_EVENTS)
		(void)cudaEventDestroy(c->order_ev);
	for (int i = 0; i < c->cap_timing; i++) {
		(void)cudaEventDestroy(c->timing[i].a);
		(void)cudaEventDestroy(c->timing[i].b);
	}
	free(c->timing);
	if (c->copy_stream)
		(void)cudaStreamDestroy(c->copy_stream);
	if (c->reserve)
		(void)cudaFree(c->reserve);
	(void)cudaGetLastError();
}
