/* backend.h — the compute backend interface of deqbench.
 *
 * A backend is a table of function pointers plus a context (ggml style). One
 * instance per device. Compiled-in backends are registered at build time
 * (cuda only when the toolkit was found), the one that runs is chosen at run
 * time by name: "cpu" (float32, OpenBLAS), "cpu64" (float64, the same C code
 * compiled for double: the reference that finite-difference tests use) and
 * "cuda" (float32, cuBLAS).
 *
 * struct backend_ops is what a backend implements: a core table (memory,
 * timers, transfers) and a math table, both required, and optional
 * tables (pinned host memory, pool statistics, unified memory, device
 * switches, CUDA graphs), each NULL where the backend has no such thing.
 * Everything above the kernels (models/, methods/, bench/) calls an op
 * through its wrapper be_<op>(be, ...) in kernels/backend_call.h
 * (included at the end of this file), which asserts the shapes and
 * pointers of the call; a caller asks be_has_<table>(be), never reads the
 * tables. What a backend can do before one exists is backend_caps(name).
 * tests/test_backend.c fails when a wrapper is missing or when code above
 * the kernels reaches a table (be->ops, ->ops-><table>, struct
 * backend_ops).
 *
 * Conventions for every op below:
 *   - Buffers are device pointers returned by backend_alloc(); their element
 *     type is the backend's (be->elem bytes: 4 for float, 8 for double).
 *     Token ids are int32 on every backend.
 *   - Tensors are row-major and contiguous. Letters: N rows, C columns,
 *     B batch, T sequence, H heads, V vocabulary.
 *   - "overwritten" outputs are written; "+=" outputs are accumulated into,
 *     because every application of a weight-tied block adds into the same
 *     parameter gradient (llm.c's rule, written down here once).
 *   - Ops are asynchronous on devices that are; host-returning ops and
 *     wrappers (xent_forward, be_norm, be_*_host) synchronise.
 *   - No op allocates memory: scratch buffers are passed in, so a training
 *     step runs entirely on memory allocated before the timed loop.
 */
#ifndef DQ_BACKEND_H
#define DQ_BACKEND_H

#include <stddef.h>
#include <stdint.h>

struct dq_solve_ctl; /* kernels/solve_ctl.h */

/* docs/ARCHITECTURE.md §Memory categories. The paper reported memory
 * without word embeddings: depth + solver is the comparable figure. */
enum mem_category {
	MEM_PARAMS,
	MEM_GRADS,
	MEM_OPTIMIZER,
	MEM_HEAD,  /* embeddings' activations, injection, logits, their grads */
	MEM_DEPTH, /* method-owned activations: tapes, checkpoints */
	MEM_SOLVER,    /* Broyden / Anderson history */
	MEM_WORKSPACE, /* scratch */
	/* host RAM the method moved activations to (offload; cuda: pinned).
	 * Not device memory: the totals (live_total, peak_total) leave it
	 * out; the cpu backend keeps the same accounting, as a model */
	MEM_HOST,
	/* unified memory the method keeps activations in (method=managed;
	 * cuda: cudaMallocManaged, resident where the driver puts it). Left
	 * out of the device totals like MEM_HOST: which of its pages sit on
	 * the device changes under the run and the allocator cannot see it */
	MEM_MANAGED,
	MEM_NCAT
};

/* Name of a category as used in records ("params", ..., "workspace"). */
const char *mem_category_name(enum mem_category c);

/* Activation functions for act_forward / act_backward. */
enum act_kind {
	ACT_RELU,
	ACT_GELU, /* exact: 0.5 x (1 + erf(x / sqrt 2)), PyTorch nn.GELU() */
	ACT_TANH,
	ACT_SIGMOID,
};

/* Facts about the device a backend runs on. */
struct backend_info {
	char name[128];		/* e.g. "cpu (OpenBLAS 0.3.21)" or GPU name */
	size_t total_mem_bytes; /* device memory; host RAM for cpu */
	int compute_major, compute_minor; /* CUDA compute capability, else 0 */
	int sm_count;			  /* CUDA multiprocessors, else 0 */
	int driver_version, runtime_version; /* CUDA, else 0 */
};

/* Device memory-pool figures (CUDA: the stream-ordered pool of
 * cudaMallocAsync, cudaMemPoolAttr{Used,Reserved}Mem{Current,High}, plus
 * cudaMemGetInfo). Bytes. */
struct backend_pool_stats {
	size_t used_bytes, used_high_bytes; /* held by live allocations */
	size_t reserved_bytes, reserved_high_bytes; /* taken from the driver */
	size_t free_bytes, total_bytes;		    /* cudaMemGetInfo */
};

/* Number of timer slots a backend keeps (timer_mark / timer_elapsed_ms). */
#define BACKEND_TIMER_SLOTS 16
/* Number of copy events (copy_async / copy_wait). */
#define BACKEND_COPY_EVENTS 4

/* The copies of copy_async since the last copy_stats call. */
struct backend_copy_stats {
	long copies;
	size_t bytes;
	double copy_ms;	 /* time the copy stream spent copying */
	double stall_ms; /* time the compute stream stood in copy_wait (cpu:
			    the copies themselves, which run in line) */
};

/* Required of every backend: memory, synchronisation, timers, transfers
 * and the copy stream. */
struct backend_core_ops {
	/* ---- memory, untracked (backend_alloc/free add the accounting) ----
	 */
	void *(*raw_alloc)(void *ctx, size_t bytes); /* NULL on failure */
	void (*raw_free)(void *ctx, void *p);
	void (*destroy)(void *ctx);
	void (*info)(void *ctx, struct backend_info *out);

	/* ---- synchronisation and timing ---- */
	void (*sync)(void *ctx);
	/* Record "now" in slot (0 <= slot < BACKEND_TIMER_SLOTS): a CUDA event
	 * on the GPU, a monotonic clock read on the CPU. */
	void (*timer_mark)(void *ctx, int slot);
	/* Milliseconds from mark `from` to mark `to`; waits for both. */
	double (*timer_elapsed_ms)(void *ctx, int from, int to);

	/* ---- transfers; n in elements of the backend's type ---- */
	void (*upload)(void *ctx, void *dst, const double *src, size_t n);
	void (*download)(void *ctx, double *dst, const void *src, size_t n);
	/* Untyped byte copies host<->device (int32 tokens, raw float32). */
	void (*upload_bytes)(void *ctx, void *dst, const void *src,
			     size_t bytes);
	void (*download_bytes)(void *ctx, void *dst, const void *src,
			       size_t bytes);
	void (*copy)(void *ctx, void *dst, const void *src, size_t n);
	void (*fill)(void *ctx, void *dst, double value, size_t n);
	/* The (rows, cols) block of dst with row stride ld (>= cols) set to
	 * +0, e.g. position t of every sequence of a (B,T,C) tensor: dst at
	 * t C, rows B, ld T C. */
	void (*zero_rows)(void *ctx, void *dst, size_t rows, size_t cols,
			  size_t ld);
	/* dst(C,R) = src(R,C)ᵀ (add = 0; dst is not read) or dst += srcᵀ
	 * (add = 1; one rounding per element); both contiguous, no
	 * aliasing. Moves values exactly: inf and nan stay where they are. */
	void (*transpose)(void *ctx, void *dst, const void *src, int R, int C,
			  int add);

	/* ---- offload (docs/ARCHITECTURE.md §Offload): copies between
	 * device and host memory on a copy stream beside the compute stream
	 * ---- */
	/* Copies `bytes` from src to dst (device or MEM_HOST memory) once
	 * every op issued before the call has finished, on the copy stream,
	 * then marks copy event ev (0 <= ev < BACKEND_COPY_EVENTS). cpu: a
	 * memcpy now (the ops before it have finished). */
	void (*copy_async)(void *ctx, void *dst, const void *src, size_t bytes,
			   int ev);
	/* Ops issued after this call start once copy event ev is reached (the
	 * last copy_async that marked it has finished). cpu: returns. */
	void (*copy_wait)(void *ctx, int ev);
	/* The copies since the last call (then starts counting anew); waits
	 * for both streams. */
	void (*copy_stats)(void *ctx, struct backend_copy_stats *out);
};

/* Required of every backend: the arithmetic of the models, methods,
 * solvers and optimizer. */
struct backend_math_ops {
	/* ---- dense algebra ---- */
	/* C(M,N) = alpha op(A)(M,K) op(B)(K,N) + beta C, row-major, op =
	 * transpose when ta/tb != 0 (A then stored (K,M), B stored (N,K)).
	 * lda/ldb/ldc are row strides in elements. */
	void (*gemm)(void *ctx, int ta, int tb, int M, int N, int K,
		     double alpha, const void *A, int lda, const void *B,
		     int ldb, double beta, void *C, int ldc);
	/* y(N,C) += b(C) broadcast over rows. */
	void (*bias_forward)(void *ctx, void *y, const void *b, int N, int C);
	/* db(C) += sum over rows of dy(N,C). */
	void (*bias_backward)(void *ctx, void *db, const void *dy, int N,
			      int C);
	/* y(N,C) = act(y + b(C) broadcast over rows), in place: bias_forward
	 * and act_forward in one pass. act is RELU, TANH or SIGMOID (their
	 * backward reads y, which this keeps; not GELU, whose reads x). */
	void (*bias_act_forward)(void *ctx, enum act_kind act, void *y,
				 const void *b, int N, int C);
	/* dx(N,C) = dy * act'(y) (overwritten; may alias dy), act as
	 * bias_act_forward; then db(C) += Σ_n dx when db is not NULL: the
	 * act_backward and bias_backward of the layer under it, in one pass
	 * (the same bits as the two ops on the CPU). */
	void (*act_bias_backward)(void *ctx, enum act_kind act, void *dx,
				  const void *dy, const void *y, void *db,
				  int N, int C);
	/* y(n) = act(x(n)); y may alias x. */
	void (*act_forward)(void *ctx, enum act_kind act, void *y,
			    const void *x, size_t n);
	/* dx(n) = dy * act'(.) (overwritten; may alias dy). Uses y for RELU,
	 * TANH and SIGMOID (x may be NULL), x for GELU (y may be NULL). */
	void (*act_backward)(void *ctx, enum act_kind act, void *dx,
			     const void *dy, const void *x, const void *y,
			     size_t n);
	/* dst(n) = a(n) * b(n) elementwise product. */
	void (*mul)(void *ctx, void *dst, const void *a, const void *b,
		    size_t n);

	/* ---- bf16 mixed precision (docs/precision.md) ----
	 * bf16 is the upper half of a float32 (1 sign, 8 exponent, 7 mantissa
	 * bits), stored as uint16_t. Rounding is to nearest, ties to even;
	 * inf stays inf, nan stays nan (quiet); finite values past the
	 * largest bf16 become inf: PyTorch's float32 -> bfloat16 cast. cpu64
	 * rounds through float32 first (a double rounding, which can move a
	 * tie by one bf16 ulp: the float64 backend is the gradient reference,
	 * not a bf16 one). */
	/* dst(n) = bf16(src(n)); no aliasing. */
	void (*to_bf16)(void *ctx, uint16_t *dst, const void *src, size_t n);
	/* dst(n) = src(n) widened to the backend type (exact). */
	void (*from_bf16)(void *ctx, void *dst, const uint16_t *src, size_t n);
	/* x(n) = bf16(x(n)) widened, in place. */
	void (*round_bf16)(void *ctx, void *x, size_t n);
	/* gemm on bf16 operands: C(M,N) = alpha op(bf16(A)) op(bf16(B)) +
	 * beta C, products and sums in the backend type (fp32 accumulation),
	 * C stays in the backend type; arguments as gemm. scratch holds the
	 * rounded op(A) and, dq_bf16_b_offset(M, K) elements on, op(B):
	 * be_gemm_bf16_scratch_bytes (backend_call.h).
	 * cuda: bf16 copies, then cublasGemmEx (CUDA_R_16BF inputs,
	 * CUBLAS_COMPUTE_32F: tensor cores); cpu: the rounded values in the
	 * backend type, then SGEMM. A product of two bf16 numbers is exact in
	 * fp32, so both compute the same sums, up to their order. */
	void (*gemm_bf16)(void *ctx, int ta, int tb, int M, int N, int K,
			  double alpha, const void *A, int lda, const void *B,
			  int ldb, double beta, void *C, int ldc,
			  void *scratch);
	/* gemm_bf16's product on operands that are bf16 arrays already (A,
	 * B uint16_t, row strides lda, ldb in elements), C as gemm_bf16's:
	 * the bf16 GEMM alone, without the rounding passes (bench-block's
	 * floor). cuda: one cublasGemmEx, scratch unused (may be NULL); cpu:
	 * the widened values in scratch (be_gemm_bf16_scratch_bytes), then
	 * SGEMM: bit for bit gemm_bf16 of the widened arrays. */
	void (*gemm_bf16_arrays)(void *ctx, int ta, int tb, int M, int N, int K,
				 double alpha, const uint16_t *A, int lda,
				 const uint16_t *B, int ldb, double beta,
				 void *C, int ldc, void *scratch);

	/* gemm_bf16 with B a bf16 array already (a weight's cast, rounded
	 * once per step: models/model.c's cast cache) and A rounded here:
	 * bit for bit gemm_bf16 of A and the widened B (the same products).
	 * scratch as gemm_bf16's (op(B)'s part unused on cuda). */
	void (*gemm_bf16_mixed)(void *ctx, int ta, int tb, int M, int N, int K,
				double alpha, const void *A, int lda,
				const uint16_t *B, int ldb, double beta,
				void *C, int ldc, void *scratch);

	/* A linear layer with its bias (and ReLU) in the GEMM's epilogue:
	 * C(M,N) = act(A(M,K) W(N,K)ᵀ + beta C + b(N)), act ReLU when relu
	 * else the identity; A, W, C row-major and contiguous. W16: W's bf16
	 * cast (precision bf16: A is rounded into scratch as gemm_bf16_mixed
	 * does) or NULL (fp32, TF32 where allowed). cpu: gemm (or
	 * gemm_bf16_mixed), then bias_forward or bias_act_forward: bit for
	 * bit those ops; cuda: one cuBLASLt matmul with epilogue BIAS or
	 * RELU_BIAS (the two ops where cuBLASLt offers no algorithm for the
	 * shape and the pointers' alignment, or the bias is not 16-byte
	 * aligned). */
	void (*gemm_bias_act)(void *ctx, int relu, int M, int N, int K,
			      double beta, const void *A, const void *W,
			      const uint16_t *W16, const void *b, void *C,
			      void *scratch);

	/* ---- LayerNorm over the last dim, eps 1e-5, biased variance ----
	 * y(N,C) = (x - mean) * rstd * w + b; mean(N), rstd(N) saved.
	 * Residual fused in: when res(N,C) or bias(C) is not NULL, x is first
	 * overwritten with (x + res) + bias (either term skipped when NULL),
	 * the sum the backward reads: a residual connection's add, the bias
	 * of the layer that made x and the LayerNorm over the sum in one
	 * pass. With both NULL, x is only read. y must not alias x. */
	void (*layernorm_forward)(void *ctx, void *y, void *mean, void *rstd,
				  void *x, const void *res, const void *bias,
				  const void *w, const void *b, int N, int C);
	/* dx(N,C) overwritten, dw(C) +=, db(C) +=; dx may alias dy. Residual
	 * fused in: dres(N,C), when not NULL, is overwritten with dx too (the
	 * residual branch's gradient), and dbias(C), when not NULL, gets
	 * += Σ_n dx (the bias of the layer that made x). */
	void (*layernorm_backward)(void *ctx, void *dx, void *dres, void *dbias,
				   void *dw, void *db, const void *dy,
				   const void *x, const void *mean,
				   const void *rstd, const void *w, int N,
				   int C);

	/* ---- causal multi-head self-attention (Vaswani et al. 2017) ----
	 * qkv(B,T,3C) holds q | k | v, each (B,T,C) with heads contiguous
	 * (head h = columns h*C/H .. (h+1)*C/H). att(B,H,T,T) receives the
	 * softmax probabilities of q kᵀ / sqrt(C/H) with the causal mask
	 * (entries above the diagonal are 0). out(B,T,C) = att v per head. */
	void (*attention_forward)(void *ctx, void *out, void *att,
				  const void *qkv, int B, int T, int C, int H);
	/* dqkv(B,T,3C) overwritten. scratch: B*H*T*T elements. */
	void (*attention_backward)(void *ctx, void *dqkv, void *scratch,
				   const void *dout, const void *qkv,
				   const void *att, int B, int T, int C, int H);
	/* The attention of precision=bf16 (docs/precision.md): its six
	 * products on bf16 operands with fp32 accumulation, as
	 * FlashAttention-2 and PyTorch's bf16 SDPA compute them. qkv must
	 * hold bf16 values (the caller rounds it); out, att, dqkv and the
	 * sums stay fp32. Forward: S = scale q kᵀ, att = P = bf16(causal
	 * softmax of S), out = P v: att receives the rounded P. Backward,
	 * with att holding bf16 values (a forward's, or its bf16 tape):
	 * dO = bf16(dout); datt = dO vᵀ; G = bf16(scale att (datt − Σ att
	 * datt)); dq = G k; dk = Gᵀ q; dv = attᵀ dO. ws: the operand copies,
	 * be_attention_bf16_ws_bytes (backend_call_ext.h) bytes. cuda: bf16
	 * copies and batched cublasGemmBatchedEx (CUDA_R_16BF in,
	 * CUBLAS_COMPUTE_32F: tensor cores) where T >= 128 and heads have a
	 * multiple of 8 columns, the tiled kernels on the rounded values
	 * elsewhere; cpu: the rounded values in
	 * float32, SGEMM (exact products of bf16 numbers: the same sums up
	 * to their order). */
	void (*attention_forward_bf16)(void *ctx, void *out, void *att,
				       const void *qkv, void *ws, int B, int T,
				       int C, int H);
	void (*attention_backward_bf16)(void *ctx, void *dqkv, void *scratch,
					const void *dout, const void *qkv,
					const void *att, void *ws, int B, int T,
					int C, int H);
	/* The fused attention of attention=flash (FlashAttention-2, Dao
	 * 2023, Algorithms 1 and 2): the same out as attention_forward
	 * (bf16: as attention_forward_bf16, P rounded for the P v product)
	 * from an online softmax over key blocks, without the B H T²
	 * probabilities. lse (B,H,T,2): per row its log-sum-exp of the
	 * scaled scores as (hi, lo), hi = bf16(lse), lo = lse − hi, so that
	 * a bf16 tape keeps it to ~16 bits. The backward recomputes P =
	 * exp(scale q kᵀ − lse) per block: dO = bf16?(dout), D = rowsum(dO
	 * ∘ out) into scratch (B,H,T), G = bf16?(scale P (dO vᵀ − D)), dq =
	 * G k, dk = Gᵀ q, dv = bf16?(P)ᵀ dO; dqkv overwritten. ws: bf16's
	 * rounded dO, be_attention_bf16_ws_bytes (unused, may be NULL, when
	 * bf16 is 0). Head width C/H at most DQ_FLASH_MAX_DH. cuda: one
	 * forward kernel and three backward kernels (D, dq, then dk and
	 * dv), no atomics; cpu: the same blocking (kernels/cpu/cpu_flash.c). */
	void (*attention_flash_forward)(void *ctx, void *out, void *lse,
					const void *qkv, int B, int T, int C,
					int H, int bf16);
	void (*attention_flash_backward)(void *ctx, void *dqkv, void *scratch,
					 const void *dout, const void *qkv,
					 const void *out, const void *lse,
					 void *ws, int B, int T, int C, int H,
					 int bf16);

	/* ---- embeddings ----
	 * out(B,T,C) = wte[tok[b,t]] + wpe[t]; tok int32 (B,T); wte (V,C);
	 * wpe (Tmax,C) with T <= Tmax. Token ids must be in [0, V). */
	void (*embed_forward)(void *ctx, void *out, const int32_t *tok,
			      const void *wte, const void *wpe, int B, int T,
			      int C);
	/* dwte += scatter of dout by tok; dwpe[t] += sum_b dout[b,t].
	 * Deterministic (no atomics on the CPU). */
	void (*embed_backward)(void *ctx, void *dwte, void *dwpe,
			       const void *dout, const int32_t *tok, int B,
			       int T, int C, int V);

	/* ---- softmax cross-entropy ----
	 * probs(N,V) = softmax(logits) (may alias logits); returns the mean
	 * over the N rows of -log probs[n, targets[n]] in nats. */
	double (*xent_forward)(void *ctx, void *probs, const void *logits,
			       const int32_t *targets, int N, int V);
	/* dlogits(N,V) = scale * (probs - onehot(targets)) (overwritten; may
	 * alias probs). scale is 1/N for the mean loss. */
	void (*xent_backward)(void *ctx, void *dlogits, const void *probs,
			      const int32_t *targets, int N, int V,
			      double scale);
	/* Training: xent_forward then xent_backward in one pass over the
	 * logits (the probabilities are never stored): dlogits(N,V) =
	 * scale * (softmax(logits) - onehot(targets)) (may alias logits); the
	 * mean loss as xent_forward's, written to *loss (a device double;
	 * nothing synchronises). be_xent_train_host returns it instead. */
	void (*xent_train)(void *ctx, void *dlogits, const void *logits,
			   const int32_t *targets, int N, int V, double scale,
			   double *loss);

	/* ---- the optimizer's scalars stay on the device (docs/ARCHITECTURE.md
	 * §Graphs: a recorded step reads nothing back in between); the host
	 * forms be_norm and be_adam_host are wrappers (backend_call.h) ---- */
	/* sumsq[0] (a device double) = Σ x², in double: its square root is
	 * be_norm(x). nan/inf propagate. */
	void (*sumsq)(void *ctx, double *sumsq, const void *x, size_t n);
	/* Global-norm clipping: with gn the square root of sumsq[0], x *=
	 * clip / gn (the factor rounded once to the backend type, as scale
	 * does) when clip > 0 and gn > clip; x untouched otherwise. */
	void (*clip)(void *ctx, void *x, size_t n, const double *sumsq,
		     double clip);
	/* Adam (Kingma & Ba 2015), bias-corrected, decoupled weight decay
	 * (AdamW) when wd > 0, with hyper (3 device doubles) = {lr, 1 -
	 * beta1^t, 1 - beta2^t} at the 1-based step t (be_adam_host computes
	 * them on the host and writes them). */
	void (*adam)(void *ctx, void *p, const void *g, void *m, void *v,
		     size_t n, const double *hyper, double beta1, double beta2,
		     double eps, double wd);

	/* ---- vector ops for solvers; reductions accumulate in double ---- */
	void (*axpy)(void *ctx, void *y, double a, const void *x, size_t n);
	void (*scale)(void *ctx, void *x, double a, size_t n);
	/* dst(n) = a − b, or −b when a is NULL: bit for bit copy of a then
	 * axpy −1 of b (copy of b then scale −1); dst may alias a or b. */
	void (*sub)(void *ctx, void *dst, const void *a, const void *b,
		    size_t n);

	/* ---- batched ops for per-sample solvers ----
	 * C_i(M,N) = alpha op(A_i) op(B_i) + beta C_i for i < batch, where
	 * X_i = X + i * sX (strides in elements); otherwise as gemm. One
	 * launch (cublasSgemmStridedBatched) on the GPU. */
	void (*gemm_batched)(void *ctx, int ta, int tb, int M, int N, int K,
			     double alpha, const void *A, int lda, size_t sA,
			     const void *B, int ldb, size_t sB, double beta,
			     void *C, int ldc, size_t sC, int batch);
	/* out[i] = Σ_j x[i len + j] y[i len + j] for i < nseg: the dots of
	 * nseg contiguous segments of len elements, in double, written to
	 * out (nseg device doubles).
	 * Same fixed-order reduction for any thread count. nan/inf
	 * propagate. */
	void (*dot_segments)(void *ctx, double *out, const void *x,
			     const void *y, size_t nseg, size_t len);

	/* ---- device-resident solver control (kernels/solve_ctl.h): the
	 * solvers of methods/solvers.c decide on the device; none of these
	 * returns a number to the host or synchronises ---- */
	/* A solver's residual after an evaluation, in one pass: g = fx − x
	 * (nseg len elements; g may alias fx, x aliases neither), seg_f[s]
	 * = Σ fx² over segment s with fx as it was, seg_g[s] = Σ g² (device
	 * doubles). Bit for bit copy, axpy −1 and dot_segments of fx and
	 * of g; on a GPU two launches instead of six. */
	void (*residual_dots)(void *ctx, void *g, const void *fx, const void *x,
			      double *seg_f, double *seg_g, size_t nseg,
			      size_t len);
	/* dq_ctl_check on c->st (one thread on a GPU). */
	void (*solve_check)(void *ctx, const struct dq_solve_ctl *c);
	/* For every sample k of S (P segments of len elements each, segment
	 * p of sample k at (p S + k) len) whose flag[k] (device doubles) is
	 * not 0: dst_k = src_k, or 0 when src is NULL. Others untouched. */
	void (*copy_masked)(void *ctx, void *dst, const void *src,
			    const double *flag, int S, int P, size_t len);
	/* dst_k = src_k / d_k for every sample (layout as copy_masked), with
	 * d_k = Σ_p seg[p S + k] (device doubles); dst_k = 0 where d_k is 0
	 * or 1/d_k is not finite. Broyden's u = (Δx − B Δg) / (vᵀ Δg). dst
	 * may alias src. */
	void (*scale_recip)(void *ctx, void *dst, const void *src,
			    const double *seg, int S, int P, size_t len);
	/* Anderson weights of every sample k < c->S: row (S, nact) holds the
	 * new G's products with the nact G's in use (backend type); they go
	 * into row and column `slot` of sample k's Gram matrix in c->st, and
	 * dq_ctl_anderson's α (nact) into alpha's row k (backend type; may
	 * alias row). */
	void (*anderson_weights)(void *ctx, const struct dq_solve_ctl *c,
				 const void *row, void *alpha, int slot,
				 int nact, double lambda);
	/* The fused Broyden iteration's two passes (kernels/solve_fused.h,
	 * which gives the arithmetic; c->hb > 0; every vector S P len
	 * elements, U and V rings of c->hb such vectors). fused_measure:
	 * g ← fx − x and dg ← g_new − g_old (g holds g_old on entry), the
	 * chunk partials and their sums, then dq_ctl_check and dq_fu_decide
	 * on c->st (a GPU: one launch whose last block decides).
	 * fused_apply: best_k ← x_k for the improved samples; then, while
	 * the solve goes on, the new pair into its slot and the step:
	 * dx ← Δx' (0 for a frozen sample), x ← x + dx. Neither reads
	 * anything back to the host. */
	void (*fused_measure)(void *ctx, const struct dq_solve_ctl *c,
			      const void *fx, const void *x, void *g,
			      const void *dx, void *dg, const void *U,
			      const void *V, size_t len);
	void (*fused_apply)(void *ctx, const struct dq_solve_ctl *c, void *x,
			    void *dx, const void *g, const void *dg, void *U,
			    void *V, void *best, size_t len);
	/* The fused Anderson iteration's two passes (solve_fused.h; c->ma >
	 * 0; xn and every row of the rings X and G S P len elements).
	 * fused_anderson_measure: X_slot ← xn, G_slot ← fx − xn, the chunk
	 * partials and their sums, then dq_ctl_check and dq_fa_decide (the
	 * Gram row, the weights α). fused_anderson_apply: best_k ← xn_k for
	 * the improved samples; then, while the solve goes on, xn ← Σ α_j
	 * (X_j + β G_j) (a frozen sample's unchanged). */
	void (*fused_anderson_measure)(void *ctx, const struct dq_solve_ctl *c,
				       const void *fx, const void *xn, void *X,
				       void *G, size_t len);
	void (*fused_anderson_apply)(void *ctx, const struct dq_solve_ctl *c,
				     void *xn, const void *X, const void *G,
				     void *best, size_t len);
};

/* Optional: pinned host memory for offload (cuda). */
struct backend_host_ops {
	/* Memory of category MEM_HOST (cuda: page-locked, cudaMallocHost, so
	 * that copies are asynchronous). NULL on failure. Without this
	 * table (cpu), MEM_HOST memory comes from raw_alloc / raw_free
	 * (be_host_alloc, be_host_free). */
	void *(*host_alloc)(void *ctx, size_t bytes);
	void (*host_free)(void *ctx, void *p);
};

/* Optional: the device memory pool's statistics (cuda). */
struct backend_pool_ops {
	/* Pool high-water marks and device free/total. */
	void (*pool_stats)(void *ctx, struct backend_pool_stats *out);
	/* Resets the pool's high-water marks to the current use. */
	void (*pool_reset_peak)(void *ctx);
};

/* Optional: unified memory (method=managed, docs/ARCHITECTURE.md
 * §Managed; cuda: on cpu the method is refused). */
struct backend_managed_ops {
	/* MEM_MANAGED memory (cuda: cudaMallocManaged, attached globally):
	 * pages live where the driver puts them (first touch, migration on
	 * fault, eviction to the host when the device is full). NULL on
	 * failure. */
	void *(*managed_alloc)(void *ctx, size_t bytes);
	void (*managed_free)(void *ctx, void *p);
	/* Migrates `bytes` of MEM_MANAGED memory at p to the device
	 * (to_device 1) or to the host (0) on the copy stream once every op
	 * issued before the call has finished, then marks copy event ev
	 * (0 <= ev < BACKEND_COPY_EVENTS), which copy_wait orders later ops
	 * after (cuda: cudaMemPrefetchAsync). A hint: results never depend
	 * on it, only where the pages are when a kernel reads them. */
	void (*prefetch)(void *ctx, const void *p, size_t bytes, int to_device,
			 int ev);
};

/* Optional: the device's switches (cuda; the cpu backends are always
 * exact FP32/FP64 and have no memory to cap). */
struct backend_device_ops {
	/* Allows (1) or forbids (0, the default) TF32 tensor-core math in
	 * GEMMs. */
	void (*set_tf32)(void *ctx, int allow);
	/* Caps the device memory left to the run at `bytes`
	 * by holding the rest of what is free now in a reserve outside the
	 * pool and outside every category (cudaMalloc), so that allocations
	 * past the cap fail and managed pages past it are evicted
	 * (oversubscription on a large card). Once per backend, before the
	 * run allocates. 0, or -1 with one line in err (the cap is above the
	 * free memory, or the reserve could not be made). */
	int (*cap_device)(void *ctx, size_t bytes, char *err, size_t errlen);
};

/* Optional: CUDA graphs (docs/ARCHITECTURE.md §Graphs; cuda). */
struct backend_graph_ops {
	/* Starts recording the ops issued on the compute stream (stream
	 * capture) instead of running them. Nothing may read the device or
	 * allocate until the recording ends. */
	void (*graph_begin)(void *ctx);
	/* Ends the recording: its ops as one executable graph (opaque), which
	 * graph_launch runs; they have not run yet. */
	void *(*graph_end)(void *ctx);
	/* A device-side loop: like graph_begin, but the recording is the
	 * first of a chain of segments. graph_loop_next ends the current
	 * segment and starts the next, which runs only if the device double
	 * *go is non-zero when the current one has finished (a kernel sets a
	 * conditional IF node's handle from it); a skipped segment's
	 * successors are skipped too. graph_loop_end ends the last segment
	 * and returns the chain as graph_end does. */
	void (*graph_loop_begin)(void *ctx);
	void (*graph_loop_next)(void *ctx, const double *go);
	void *(*graph_loop_end)(void *ctx);
	/* A device-side loop of one body (a conditional WHILE node, CUDA
	 * 12.4+): graph_while_begin starts recording the body;
	 * graph_while_end(go) ends it and returns the graph, which runs the
	 * body once and again while the device double *go is non-zero after
	 * it (a kernel at the body's end sets the node's handle). The body
	 * must issue the same ops at every pass: its arguments are fixed. */
	void (*graph_while_begin)(void *ctx);
	void *(*graph_while_end)(void *ctx, const double *go);
	/* Runs graph g on the compute stream (asynchronous, as an op). */
	void (*graph_launch)(void *ctx, void *g);
	void (*graph_free)(void *ctx, void *g);
};

/* What a backend implements: its name, the two required tables and the
 * optional ones, each NULL where the backend has no such thing, so that
 * "all or none" is a type (be_has_graphs(be) is be->ops->graph != NULL). */
struct backend_ops {
	const char *name;
	const struct backend_core_ops *core;
	const struct backend_math_ops *math;
	const struct backend_host_ops *host;
	const struct backend_pool_ops *pool;
	const struct backend_managed_ops *managed;
	const struct backend_device_ops *device;
	const struct backend_graph_ops *graph;
};

/* Per-category live and peak bytes. peak_depth_solver is the high-water mark
 * of (depth + solver) live bytes together, the paper-comparable figure; it
 * is not the sum of the two separate peaks. */
struct backend_mem_stats {
	size_t live[MEM_NCAT];
	size_t peak[MEM_NCAT];
	size_t live_total, peak_total;
	size_t peak_depth_solver;
	size_t n_allocs; /* live allocations */
};

/* One backend instance. backend_create() allocates it together with the
 * allocator's pointer table (private to kernels/backend.c); a stack struct
 * with only elem set serves shape-only callers (model_shape). */
struct backend {
	const struct backend_ops *ops;
	void *ctx;
	size_t elem; /* bytes per element: 4 (float) or 8 (double) */
	/* bytes per element of gemm_bf16's scratch: 2 where the backend
	 * multiplies bf16 arrays (cuda), elem where it multiplies the rounded
	 * values in its own type (cpu, cpu64) */
	size_t bf16_operand_elem;
	struct backend_mem_stats mem;
	/* BACKEND_SCALARS device doubles, untracked (raw_alloc) as a
	 * library's own workspace is: see BACKEND_WRAP_SCALARS */
	double *scal;
};

/* Device doubles in struct backend's scal. The first BACKEND_WRAP_SCALARS
 * are the host-returning wrappers' (be_norm, be_xent_train_host,
 * be_adam_host: each uses them within its call only); the rest, from
 * scal + BACKEND_WRAP_SCALARS, are one caller's to keep across calls (the
 * training step's scalars, bench/run/step_graphs.h). */
#define BACKEND_WRAP_SCALARS 4
#define BACKEND_SCALARS	     16

/* Numeric precision of a run's matrix products (docs/precision.md):
 *   FP32  exact float32 products (the backend type);
 *   TF32  float32 storage, GEMMs on TF32 tensor cores (cuda's set_tf32;
 *         the cpu backends have no TF32 and refuse it);
 *   BF16  mixed precision: GEMM operands rounded to bf16, fp32
 *         accumulation, tapes stored in bf16, everything else fp32. */
enum dq_precision { DQ_PREC_FP32, DQ_PREC_TF32, DQ_PREC_BF16 };
/* "fp32", "tf32", "bf16"; "?" for another value. */
const char *dq_precision_name(enum dq_precision p);
/* The precision named s; -1 when s names none. */
int dq_precision_parse(const char *s);

/* The widest head (C / H) attention_flash_forward and _backward take:
 * their CUDA kernels keep a query row's output in registers, 32 columns a
 * chunk. */
#define DQ_FLASH_MAX_DH 128

/* The machine epsilon (the spacing of the numbers just above 1) of the
 * arithmetic a block runs in under precision p on a backend of elem-byte
 * elements: bf16's 2^-7 (its GEMM operands, and so each block's output,
 * carry 8 significant bits), else the backend type's, 2^-23 for float32
 * (elem 4) and 2^-52 for float64 (elem 8). TF32 storage is float32's;
 * its GEMMs round at 2^-10, which the caller knows from the backend's
 * set_tf32, not from p. Defaults that balance a truncation against
 * rounding (deq.c's finite-difference step) start from it. */
double dq_precision_eps(enum dq_precision p, size_t elem);

/* Names of the backends compiled into this binary, NULL-terminated. */
extern const char *const backend_names[];

/* What a backend can do, known before one exists (a config's checks, the
 * records, plan's memory estimates): a static record per backend name,
 * compiled into this binary or not. */
struct backend_caps {
	const char *name;
	int compiled;	     /* in this binary (backend_names) */
	int gpu;	     /* runs on a GPU (device facts, no BLAS core) */
	int tf32;	     /* has the TF32 GEMM switch (set_tf32) */
	int bf16_min_major;  /* bf16 needs compute capability >= this.0
				(0: emulated, any machine) */
	int graphs, managed; /* CUDA graphs; unified memory */
	/* bytes of a rounded bf16 GEMM operand (struct backend's
	 * bf16_operand_elem): 2 for bf16 copies, 0 for the rounded values
	 * in the backend's own type */
	int bf16_operand_bytes;
};

/* The capabilities of backend `name` compiled into this binary, or NULL
 * (an unknown name, or one this build lacks: "cuda" without -Dcuda). */
const struct backend_caps *backend_caps(const char *name);
/* The capabilities of any backend deqbench knows, compiled in or not (its
 * `compiled` says which), or NULL for an unknown name: what plan needs to
 * size a GPU run on a CPU-only build. */
const struct backend_caps *backend_caps_known(const char *name);

/* Create backend `name` ("cpu", "cpu64", "cuda"). threads <= 0 keeps the
 * library default (OpenMP / OpenBLAS). Returns 0, or -1 with a one-line
 * message in err: unknown name (lists the compiled ones), or "no CUDA device
 * was found". */
int backend_create(struct backend **out, const char *name, int threads,
		   char *err, size_t errlen);
/* Frees the backend; live tracked allocations are released first. */
void backend_destroy(struct backend *be);

/* Tracked allocation of n elements of the backend's type (or bytes), tagged
 * with a category. Returns NULL when the device is out of memory. Zero-sized
 * requests return a valid unique pointer. */
void *backend_alloc(struct backend *be, size_t n, enum mem_category cat);
void *backend_alloc_bytes(struct backend *be, size_t bytes,
			  enum mem_category cat);
/* Frees a pointer from backend_alloc*(); NULL is ignored. */
void backend_free(struct backend *be, void *p);
/* Sets every peak to the current live value. */
void backend_mem_reset_peak(struct backend *be);

/* Pointer to element i of buffer p (element type of the backend). */
static inline void *dq_at(const struct backend *be, const void *p, size_t i)
{
	return (char *)p + i * be->elem;
}

/* The be_* call wrappers of the ops above. */
#include "backend_call.h"

#endif
