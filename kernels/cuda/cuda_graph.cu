/* cuda_graph.cu — the CUDA backend's graph ops (backend.h, §CUDA graphs;
 * docs/ARCHITECTURE.md §Graphs): stream capture of the compute stream into
 * an executable graph, and a device-side loop built of conditional nodes.
 *
 * Plain graphs. graph_begin starts capturing the compute stream
 * (cudaStreamBeginCapture, thread-local mode: a call in this thread that
 * may not be captured, such as a synchronisation, fails loudly instead of
 * running); graph_end ends it and instantiates the graph.
 *
 * Loops. The chain of a device-side loop lives in one root graph:
 *
 *   IF_0{segment 0} → S_1 → IF_1{segment 1} → S_2 → IF_2{segment 2} → …
 *
 * Each segment is captured into the body of an IF conditional node
 * (cudaStreamBeginCaptureToGraph, CUDA 12.4+). IF_0's handle defaults to 1
 * at every launch; IF_k's (k ≥ 1) to 0, and S_k, a one-thread kernel node
 * after IF_{k−1}, sets it from the device flag graph_loop_next was given
 * (the solver's DQ_CTL_GO, written by the segment before). Once a segment
 * leaves the flag at 0, every later IF is skipped: its S sees the 0 (a
 * skipped segment never sets the flag again) and its body does not run;
 * what remains costs one tiny kernel and one conditional per segment. The
 * S nodes sit in the root graph beside the IF nodes whose handles they
 * set, as in the CUDA conditional-node examples; the bodies hold only
 * kernels, memsets and copies (the conditional bodies' rule), which is
 * what the solver's iterations issue.
 *
 * While loops. graph_while_begin/end record one body under a conditional
 * WHILE node (the fused Broyden iteration, methods/solvers.c): the
 * recording is as long as one pass, whatever max_iter.
 *
 * Errors abort with the call and line (cuda_common.cuh): a capture that
 * meets an operation it cannot record is a programming error.
 */
#include "cuda_common.cuh"

#include <stdlib.h>
#include <string.h>

/* A graph the caller holds: the graph and its executable. */
struct dq_cu_graph {
	cudaGraph_t g;
	cudaGraphExec_t exec;
};

static const enum cudaStreamCaptureMode capture_mode =
    cudaStreamCaptureModeThreadLocal;

static void *instantiate(cudaGraph_t g)
{
	struct dq_cu_graph *h = (struct dq_cu_graph *)calloc(1, sizeof(*h));
	if (!h) {
		fprintf(stderr, "deqbench: out of host memory for a graph\n");
		abort();
	}
	h->g = g;
	cuda_check(cudaGraphInstantiate(&h->exec, g, 0));
	return h;
}

void cu_graph_begin(void *ctx)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	cuda_check(cudaStreamBeginCapture(c->stream, capture_mode));
}

void *cu_graph_end(void *ctx)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	cudaGraph_t g = NULL;
	cuda_check(cudaStreamEndCapture(c->stream, &g));
	return instantiate(g);
}

/* S_k: the next IF's handle from the device flag. */
__global__ void loop_set_kernel(cudaGraphConditionalHandle h, const double *go)
{
	cudaGraphSetConditional(h, *go != 0.0 ? 1u : 0u);
}

/* Appends an IF node on handle h to the root after its last node (none
 * for the first) and starts capturing the IF's body. */
static void loop_if(struct dq_cuda_ctx *c, cudaGraphConditionalHandle h)
{
	struct dq_cu_loop *L = &c->loop;
	cudaGraphNodeParams np = {};
	cudaGraphNode_t node;
	np.type = cudaGraphNodeTypeConditional;
	np.conditional.handle = h;
	np.conditional.type = cudaGraphCondTypeIf;
	np.conditional.size = 1;
	cuda_check(cudaGraphAddNode(&node, L->root, L->last ? &L->last : NULL,
				    NULL, L->last ? 1 : 0, &np));
	L->last = node;
	cuda_check(cudaStreamBeginCaptureToGraph(c->stream,
						 np.conditional.phGraph_out[0],
						 NULL, NULL, 0, capture_mode));
}

void cu_graph_loop_begin(void *ctx)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	cudaGraphConditionalHandle h;
	memset(&c->loop, 0, sizeof(c->loop));
	cuda_check(cudaGraphCreate(&c->loop.root, 0));
	cuda_check(cudaGraphConditionalHandleCreate(
	    &h, c->loop.root, 1, cudaGraphCondAssignDefault));
	loop_if(c, h);
}

void cu_graph_loop_next(void *ctx, const double *go)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	struct dq_cu_loop *L = &c->loop;
	cudaGraph_t body = NULL;
	cudaGraphConditionalHandle h;
	cudaKernelNodeParams kp = {};
	cuda_check(cudaStreamEndCapture(c->stream, &body));
	/* the next IF's handle, S_k setting it after the last IF, the IF */
	cuda_check(cudaGraphConditionalHandleCreate(
	    &h, L->root, 0, cudaGraphCondAssignDefault));
	void *args[2] = {&h, (void *)&go};
	kp.func = (void *)loop_set_kernel;
	kp.gridDim = dim3(1, 1, 1);
	kp.blockDim = dim3(1, 1, 1);
	kp.kernelParams = args;
	cudaGraphNode_t set;
	cuda_check(cudaGraphAddKernelNode(&set, L->root, &L->last, 1, &kp));
	L->last = set;
	loop_if(c, h);
}

void *cu_graph_loop_end(void *ctx)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	cudaGraph_t body = NULL;
	cuda_check(cudaStreamEndCapture(c->stream, &body));
	void *h = instantiate(c->loop.root);
	memset(&c->loop, 0, sizeof(c->loop));
	return h;
}

/* The WHILE loop: a root graph holding one conditional WHILE node whose
 * handle starts at 1 (the body runs at least once); the body is captured
 * from the stream, and graph_while_end appends loop_set_kernel, which sets
 * the handle from *go for the next pass. */
void cu_graph_while_begin(void *ctx)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	struct dq_cu_loop *L = &c->loop;
	cudaGraphNodeParams np = {};
	cudaGraphNode_t node;
	memset(L, 0, sizeof(*L));
	cuda_check(cudaGraphCreate(&L->root, 0));
	cuda_check(cudaGraphConditionalHandleCreate(
	    &L->handle, L->root, 1, cudaGraphCondAssignDefault));
	np.type = cudaGraphNodeTypeConditional;
	np.conditional.handle = L->handle;
	np.conditional.type = cudaGraphCondTypeWhile;
	np.conditional.size = 1;
	cuda_check(cudaGraphAddNode(&node, L->root, NULL, NULL, 0, &np));
	L->last = node;
	cuda_check(cudaStreamBeginCaptureToGraph(c->stream,
						 np.conditional.phGraph_out[0],
						 NULL, NULL, 0, capture_mode));
}

void *cu_graph_while_end(void *ctx, const double *go)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	cudaGraph_t body = NULL;
	loop_set_kernel<<<1, 1, 0, c->stream>>>(c->loop.handle, go);
	cuda_check_launch();
	cuda_check(cudaStreamEndCapture(c->stream, &body));
	void *h = instantiate(c->loop.root);
	memset(&c->loop, 0, sizeof(c->loop));
	return h;
}

void cu_graph_launch(void *ctx, void *g)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	cuda_check(cudaGraphLaunch(((struct dq_cu_graph *)g)->exec, c->stream));
}

/* Waits for the stream: a graph may still run when its owner lets go. */
void cu_graph_free(void *ctx, void *g)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	struct dq_cu_graph *h = (struct dq_cu_graph *)g;
	if (!h)
		return;
	cuda_check(cudaStreamSynchronize(c->stream));
	cuda_check(cudaGraphExecDestroy(h->exec));
	cuda_check(cudaGraphDestroy(h->g));
	free(h);
}
