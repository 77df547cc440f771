/* cuda_copy.cu — offload support of the CUDA backend (backend.h, §offload;
 * docs/ARCHITECTURE.md §Offload): page-locked host memory for MEM_HOST, a
 * second non-blocking stream for the copies, BACKEND_COPY_EVENTS events
 * that order the compute stream after a copy, and timing.
 *
 * Ordering. copy_async records order_ev on the compute stream and makes the
 * copy stream wait for it, so a copy starts after every op issued before it
 * (the tape it moves is written); its copy event cev[ev] is recorded after
 * the copy. copy_wait makes the compute stream wait for cev[ev] (a buffer
 * about to be overwritten, or a prefetched tape about to be read).
 * cudaStreamWaitEvent takes the event's state at the call, so reusing
 * order_ev and cev[] is safe once they are waited for.
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

void cu_copy_async(void *ctx, void *dst, const void *src, size_t bytes, int ev)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!bytes)
		return;
	cuda_check(cudaEventRecord(c->order_ev, c->stream));
	cuda_check(cudaStreamWaitEvent(c->copy_stream, c->order_ev, 0));
	struct dq_cu_timing *t = timing_next(c, 0);
	if (t)
		cuda_check(cudaEventRecord(t->a, c->copy_stream));
	cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
				   c->copy_stream));
	if (t)
		cuda_check(cudaEventRecord(t->b, c->copy_stream));
	cuda_check(cudaEventRecord(c->cev[ev], c->copy_stream));
	c->copies.copies++;
	c->copies.bytes += bytes;
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
	(void)cudaGetLastError();
}
