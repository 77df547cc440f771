/* cpu_backend.c — the CPU backend: OpenBLAS for GEMM, plain C + OpenMP for
 * everything else.
 *
 * Compiled twice (kernels/meson.build): -DDQ_REAL=float -DDQ_SFX=f gives
 * dq_cpu_ops_f ("cpu"), -DDQ_REAL=double -DDQ_SFX=d gives dq_cpu_ops_d
 * ("cpu64", the reference for finite-difference tests). Every non-static
 * symbol carries the suffix.
 *
 * Determinism: every parallel loop writes disjoint outputs, and every
 * reduction runs in a fixed order that does not depend on the thread count
 * (column reductions loop over rows sequentially inside a parallel loop over
 * columns; long sums use fixed-size blocks combined sequentially). So two
 * runs, with any OMP_NUM_THREADS, give bitwise-equal results (OpenBLAS GEMM
 * aside, which is deterministic for a fixed thread count).
 *
 * Letters: N rows, C columns, B batch, T sequence, H heads, dh = C/H head
 * width, V vocabulary.
 */
#ifndef DQ_REAL
#error "compile with -DDQ_REAL=float|double -DDQ_SFX=f|d"
#endif

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../backend.h"
#include "../bf16.h"
#include "../elementwise.h"
#include "cpu_ctx.h"

typedef DQ_REAL real;

/* Per-element math of elementwise.h for this instantiation's type. */
#define adam_step DQ_FN(dq_adam_)

/* Pick the BLAS routine and the type name from the suffix. */
#define DQ_GEMM_f     cblas_sgemm
#define DQ_GEMM_d     cblas_dgemm
#define DQ_GEMM	      DQ_CAT(DQ_GEMM_, DQ_SFX)
#define DQ_TYPENAME_f "float32"
#define DQ_TYPENAME_d "float64"
#define DQ_TYPENAME   DQ_CAT(DQ_TYPENAME_, DQ_SFX)
#define DQ_BACKNAME_f "cpu"
#define DQ_BACKNAME_d "cpu64"
#define DQ_BACKNAME   DQ_CAT(DQ_BACKNAME_, DQ_SFX)

/* Block length of the fixed-order reductions (dot, norm). */
#define RED_BLOCK 4096
#define RED_GROUP 256

/* ---------------------------------------------------------------- memory */

static void *cpu_raw_alloc(void *ctx, size_t bytes)
{
	(void)ctx;
	if (bytes > SIZE_MAX - 63)
		return NULL;
	/* aligned_alloc wants a size that is a multiple of the alignment. */
	return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}

static void cpu_raw_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static void cpu_destroy(void *ctx)
{
	free(ctx);
}

static void cpu_info(void *ctx, struct backend_info *out)
{
	(void)ctx;
	char ver[32] = "?";
	const char *cfg = openblas_get_config();
	memset(out, 0, sizeof(*out));
	/* openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." */
	if (cfg)
		sscanf(cfg, "%*s %31s", ver);
	snprintf(out->name, sizeof(out->name), "cpu %s (OpenBLAS %s)",
		 DQ_TYPENAME, ver);
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	if (pages > 0 && psz > 0)
		out->total_mem_bytes = (size_t)pages * (size_t)psz;
}

/* ------------------------------------------------------ sync and timing */

static void cpu_sync(void *ctx)
{
	(void)ctx; /* every op has returned when its call returns */
}

static void cpu_timer_mark(void *ctx, int slot)
{
	struct dq_cpu_ctx *c = ctx;
	if (slot >= 0 && slot < BACKEND_TIMER_SLOTS)
		clock_gettime(CLOCK_MONOTONIC, &c->marks[slot]);
}

static double cpu_timer_elapsed_ms(void *ctx, int from, int to)
{
	struct dq_cpu_ctx *c = ctx;
	if (from < 0 || from >= BACKEND_TIMER_SLOTS || to < 0 ||
	    to >= BACKEND_TIMER_SLOTS)
		return NAN;
	const struct timespec *a = &c->marks[from], *b = &c->marks[to];
	return (double)(b->tv_sec - a->tv_sec) * 1e3 +
	       (double)(b->tv_nsec - a->tv_nsec) * 1e-6;
}

/* ------------------------------------------------------------- transfers */

static void cpu_upload(void *ctx, void *dst, const double *src, size_t n)
{
	(void)ctx;
	real *d = dst;
	for (size_t i = 0; i < n; i++)
		d[i] = (real)src[i];
}

static void cpu_download(void *ctx, double *dst, const void *src, size_t n)
{
	(void)ctx;
	const real *s = src;
	for (size_t i = 0; i < n; i++)
		dst[i] = (double)s[i];
}

static void cpu_bytes(void *ctx, void *dst, const void *src, size_t bytes)
{
	(void)ctx;
	if (bytes)
		memmove(dst, src, bytes);
}

static void cpu_copy(void *ctx, void *dst, const void *src, size_t n)
{
	(void)ctx;
	if (n)
		memmove(dst, src, n * sizeof(real));
}

static void cpu_fill(void *ctx, void *dst, double value, size_t n)
{
	(void)ctx;
	real *d = dst, v = (real)value;
	PAR_EACH(n, d[i] = v);
}

/* Row by row: each row of the block is cols contiguous elements. memset
 * writes +0 for float and double (IEEE 754: all bits zero). */
static void cpu_zero_rows(void *ctx, void *dst, size_t rows, size_t cols,
			  size_t ld)
{
	(void)ctx;
	real *d = dst;
	if (!cols)
		return;
	for (size_t r = 0; r < rows; r++)
		memset(d + r * ld, 0, cols * sizeof(real));
}

/* d (R) = column c of src (R,C), read with stride C, or d += it. */
static void transpose_column(real *d, const real *src, int R, int C, int add)
{
	if (add)
		for (int r = 0; r < R; r++)
			d[r] += src[(size_t)r * C];
	else
		for (int r = 0; r < R; r++)
			d[r] = src[(size_t)r * C];
}

/* dst(C,R) = src(R,C)ᵀ, or +=: parallel over the rows of dst, each
 * thread writing its own. O(R C). */
static void cpu_transpose(void *ctx, void *dst, const void *src, int R, int C,
			  int add)
{
	(void)ctx;
#pragma omp parallel for if ((long long)R * C >= PAR_MIN_N)
	for (int c = 0; c < C; c++)
		transpose_column((real *)dst + (size_t)c * R,
				 (const real *)src + c, R, C, add);
}

/* ---------------------------------------------------------- dense algebra */

static void cpu_gemm(void *ctx, int ta, int tb, int M, int N, int K,
		     double alpha, const void *A, int lda, const void *B,
		     int ldb, double beta, void *C, int ldc)
{
	(void)ctx;
	if (M <= 0 || N <= 0)
		return;
	DQ_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
		tb ? CblasTrans : CblasNoTrans, M, N, K, (real)alpha,
		(const real *)A, lda, (const real *)B, ldb, (real)beta,
		(real *)C, ldc);
}

/* One BLAS call per batch entry: the per-sample solver products are a few
 * rows each, so the loop costs little next to the block. */
static void cpu_gemm_batched(void *ctx, int ta, int tb, int M, int N, int K,
			     double alpha, const void *A, int lda, size_t sA,
			     const void *B, int ldb, size_t sB, double beta,
			     void *C, int ldc, size_t sC, int batch)
{
	const real *a = A, *b = B;
	real *c = C;
	for (int i = 0; i < batch; i++)
		cpu_gemm(ctx, ta, tb, M, N, K, alpha, a + (size_t)i * sA, lda,
			 b + (size_t)i * sB, ldb, beta, c + (size_t)i * sC,
			 ldc);
}

/* -------------------------------------------------------------- attention */

/* Per (b, h), with Q, K, V the head's (T, dh) slices of qkv (row stride
 * 3C) and scale = 1/√dh:
 *   forward   S = scale Q Kᵀ (GEMM), att = causal softmax of S per row
 *             (max-subtracted, sums in double, zeros above the diagonal),
 *             out = att V (GEMM; the zeros cost T²dh/2 wasted MACs, which
 *             a GEMM still does faster than a triangular loop).
 *   backward  datt = dout Vᵀ, dV = attᵀ dout,
 *             dS[t,s] = att[t,s] (datt[t,s] − Σ_u att[t,u] datt[t,u]),
 *             dQ = scale dS K, dK = scale dSᵀ Q.
 * O(B H T² dh) in GEMMs. One (b, h) per iteration of the parallel loop;
 * each writes only its own rows of att / scratch and its own columns of
 * out / dqkv, and each GEMM runs on one thread inside it (OpenBLAS's
 * OpenMP build does not nest), so results do not depend on the thread
 * count. */
/* Row t of A (T columns) in place: the causal softmax of its scores s <=
 * t (max-subtracted, sums in double), zeros above the diagonal; bf16:
 * each probability rounded to bf16 (attention_forward_bf16's P). */
static void softmax_row(real *row, int t, int T, int bf16)
{
	double mx = -INFINITY, sum = 0;
	for (int s = 0; s <= t; s++)
		mx = row[s] > mx ? row[s] : mx;
	for (int s = 0; s <= t; s++) {
		double e = exp((double)row[s] - mx);
		row[s] = (real)e;
		sum += e;
	}
	double inv = 1.0 / sum;
	for (int s = 0; s <= t; s++) {
		row[s] = (real)(row[s] * inv);
		if (bf16)
			row[s] = (real)dq_bf16_round((float)row[s]);
	}
	for (int s = t + 1; s < T; s++)
		row[s] = 0;
}

/* Row t of D (holding datt) in place: att (datt − Σ att datt), the sum in
 * double, 0 above the diagonal; bf16: times scale, rounded to bf16
 * (attention_backward_bf16's G, which carries the scale). */
static void softmax_backward_row(real *drow, const real *arow, int t, int T,
				 int bf16, double scale)
{
	double dsum = 0;
	for (int s = 0; s <= t; s++)
		dsum += (double)arow[s] * drow[s];
	for (int s = 0; s <= t; s++) {
		double g = (double)arow[s] * ((double)drow[s] - dsum);
		drow[s] =
		    bf16 ? (real)dq_bf16_round((float)(g * scale)) : (real)g;
	}
	for (int s = t + 1; s < T; s++)
		drow[s] = 0;
}

static void attention_forward(real *out, real *att, const real *qkv, int B,
			      int T, int C, int H, int bf16)
{
	int dh = C / H, ld = 3 * C;
	double scale = 1.0 / sqrt((double)dh);
#pragma omp parallel for if (B * H > 1)
	for (int bh = 0; bh < B * H; bh++) {
		int b = bh / H, h = bh % H;
		const real *Q = qkv + (size_t)b * T * ld + (size_t)h * dh;
		const real *K = Q + C, *V = Q + 2 * (size_t)C;
		real *A = att + (size_t)bh * T * T;
		real *O = out + (size_t)b * T * C + (size_t)h * dh;
		DQ_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, dh,
			(real)scale, Q, ld, K, ld, (real)0, A, T);
		for (int t = 0; t < T; t++)
			softmax_row(A + (size_t)t * T, t, T, bf16);
		DQ_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dh, T,
			(real)1, A, T, V, ld, (real)0, O, C);
	}
}

/* dout is read through dO (bf16: its rounded copy). The scale is the dQ
 * and dK GEMMs' alpha in fp32, inside G under bf16. */
static void attention_backward(real *dqkv, real *scratch, const real *dout,
			       const real *qkv, const real *att, int B, int T,
			       int C, int H, int bf16)
{
	int dh = C / H, ld = 3 * C;
	double scale = 1.0 / sqrt((double)dh);
	real alpha = bf16 ? (real)1 : (real)scale;
#pragma omp parallel for if (B * H > 1)
	for (int bh = 0; bh < B * H; bh++) {
		int b = bh / H, h = bh % H;
		size_t off = (size_t)b * T * ld + (size_t)h * dh;
		const real *Q = qkv + off, *K = Q + C, *V = Q + 2 * (size_t)C;
		real *dQ = dqkv + off, *dK = dQ + C, *dV = dQ + 2 * (size_t)C;
		const real *A = att + (size_t)bh * T * T;
		const real *dO = dout + (size_t)b * T * C + (size_t)h * dh;
		real *D = scratch + (size_t)bh * T * T;
		DQ_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, dh,
			(real)1, dO, C, V, ld, (real)0, D, T);
		DQ_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, T, dh, T,
			(real)1, A, T, dO, C, (real)0, dV, ld);
		for (int t = 0; t < T; t++)
			softmax_backward_row(D + (size_t)t * T,
					     A + (size_t)t * T, t, T, bf16,
					     scale);
		DQ_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dh, T,
			alpha, D, T, K, ld, (real)0, dQ, ld);
		DQ_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, T, dh, T,
			alpha, D, T, Q, ld, (real)0, dK, ld);
	}
}

static void cpu_attention_forward(void *ctx, void *out, void *att,
				  const void *qkv, int B, int T, int C, int H)
{
	(void)ctx;
	attention_forward(out, att, qkv, B, T, C, H, 0);
}

static void cpu_attention_backward(void *ctx, void *dqkv, void *scratch,
				   const void *dout, const void *qkv,
				   const void *att, int B, int T, int C, int H)
{
	(void)ctx;
	attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, H, 0);
}

/* bf16 (backend.h): q, k, v arrive rounded; P is rounded in the softmax;
 * ws is unused in the forward. */
static void cpu_attention_forward_bf16(void *ctx, void *out, void *att,
				       const void *qkv, void *ws, int B, int T,
				       int C, int H)
{
	(void)ctx, (void)ws;
	attention_forward(out, att, qkv, B, T, C, H, 1);
}

/* bf16 (backend.h): dO = bf16(dout) into ws's first B T C elements. */
static void cpu_attention_backward_bf16(void *ctx, void *dqkv, void *scratch,
					const void *dout_, const void *qkv,
					const void *att, void *ws, int B, int T,
					int C, int H)
{
	real *dO = ws;
	const real *dout = dout_;
	size_t n = (size_t)B * T * C;
	(void)ctx;
	PAR_EACH(n, dO[i] = (real)dq_bf16_round((float)dout[i]));
	attention_backward(dqkv, scratch, dO, qkv, att, B, T, C, H, 1);
}

/* ------------------------------------------------------------- embeddings */

static void cpu_embed_forward(void *ctx, void *out_, const int32_t *tok,
			      const void *wte_, const void *wpe_, int B, int T,
			      int C)
{
	(void)ctx;
	real *out = out_;
	const real *wte = wte_, *wpe = wpe_;
#pragma omp parallel for if ((long long)B * T * C >= PAR_MIN_N)
	for (int bt = 0; bt < B * T; bt++) {
		int t = bt % T;
		const real *e = wte + (size_t)tok[bt] * C;
		const real *p = wpe + (size_t)t * C;
		real *o = out + (size_t)bt * C;
		for (int c = 0; c < C; c++)
			o[c] = e[c] + p[c];
	}
}

/* Parallel over blocks of columns; inside a block the (b, t) positions are
 * visited in order, so repeated tokens add in a fixed order. */
static void cpu_embed_backward(void *ctx, void *dwte_, void *dwpe_,
			       const void *dout_, const int32_t *tok, int B,
			       int T, int C, int V)
{
	(void)ctx;
	(void)V;
	real *dwte = dwte_, *dwpe = dwpe_;
	const real *dout = dout_;
	enum { CB = 16 };
	int nblk = (C + CB - 1) / CB;
#pragma omp parallel for if ((long long)B * T * C >= PAR_MIN_N)
	for (int blk = 0; blk < nblk; blk++) {
		int c0 = blk * CB, c1 = (int)min_ll(C, (long long)c0 + CB);
		for (int bt = 0; bt < B * T; bt++) {
			const real *g = dout + (size_t)bt * C;
			real *e = dwte + (size_t)tok[bt] * C;
			real *p = dwpe + (size_t)(bt % T) * C;
			for (int c = c0; c < c1; c++) {
				e[c] += g[c];
				p[c] += g[c];
			}
		}
	}
}

static void cpu_xent_backward(void *ctx, void *dlogits_, const void *probs_,
			      const int32_t *targets, int N, int V,
			      double scale)
{
	(void)ctx;
	real *dl = dlogits_;
	const real *p = probs_;
	real s = (real)scale;
#pragma omp parallel for if ((long long)N * V >= PAR_MIN_N)
	for (int n = 0; n < N; n++) {
		const real *pn = p + (size_t)n * V;
		real *dn = dl + (size_t)n * V;
		for (int j = 0; j < V; j++)
			dn[j] = s * pn[j];
		dn[targets[n]] -= s;
	}
}

/* ------------------------------------------------------------------- adam */

static double block_dot(const real *x, const real *y, size_t n)
{
	size_t nb = (n + RED_BLOCK - 1) / RED_BLOCK;
	double acc = 0;
	for (size_t g0 = 0; g0 < nb; g0 += RED_GROUP) {
		int gn = (int)min_ll(RED_GROUP, (long long)(nb - g0));
		double part[RED_GROUP];
#pragma omp parallel for if (gn > 1)
		for (int k = 0; k < gn; k++) {
			size_t i0 = (g0 + (size_t)k) * RED_BLOCK;
			size_t i1 = i0 + RED_BLOCK < n ? i0 + RED_BLOCK : n;
			double s = 0;
			for (size_t i = i0; i < i1; i++)
				s += (double)x[i] * y[i];
			part[k] = s;
		}
		for (int k = 0; k < gn; k++)
			acc += part[k];
	}
	return acc;
}

/* block_dot's sum on one thread: the same blocks added in the same order,
 * so the same bits. */
static double serial_block_dot(const real *x, const real *y, size_t n)
{
	double acc = 0;
	for (size_t i0 = 0; i0 < n; i0 += RED_BLOCK) {
		size_t i1 = i0 + RED_BLOCK < n ? i0 + RED_BLOCK : n;
		double s = 0;
		for (size_t i = i0; i < i1; i++)
			s += (double)x[i] * y[i];
		acc += s;
	}
	return acc;
}

/* Segments in parallel when there are several, each summed serially:
 * O(nseg·len), the bits of block_dot on each segment. */
static void cpu_dot_segments(void *ctx, double *out, const void *x_,
			     const void *y_, size_t nseg, size_t len)
{
	(void)ctx;
	const real *x = x_, *y = y_;
	long long ns = (long long)nseg;
	if (nseg == 1) {
		out[0] = block_dot(x, y, len);
		return;
	}
#pragma omp parallel for if (ns * (long long)len >= PAR_MIN_N)
	for (long long i = 0; i < ns; i++)
		out[i] = serial_block_dot(x + (size_t)i * len,
					  y + (size_t)i * len, len);
}

static void cpu_axpy(void *ctx, void *y_, double a, const void *x_, size_t n)
{
	(void)ctx;
	real *y = y_, ra = (real)a;
	const real *x = x_;
	PAR_EACH(n, y[i] += ra * x[i]);
}

static void cpu_scale(void *ctx, void *x_, double a, size_t n)
{
	(void)ctx;
	real *x = x_, ra = (real)a;
	PAR_EACH(n, x[i] *= ra);
}

/* axpy's and scale's formulas, so their bits. */
static void cpu_sub(void *ctx, void *dst_, const void *a_, const void *b_,
		    size_t n)
{
	(void)ctx;
	real *d = dst_, m1 = (real)-1.0;
	const real *a = a_, *b = b_;
	if (a)
		PAR_EACH(n, d[i] = a[i] + m1 * b[i]);
	else
		PAR_EACH(n, d[i] = b[i] * m1);
}

/* ------------------------------ the step's scalars "on the device" (RAM) */

/* Each is its host-returning op with the number stored, not returned, so
 * the bits are the same (kernels/backend.h). */
static void cpu_xent_train(void *ctx, void *dlogits, const void *logits,
			   const int32_t *targets, int N, int V, double scale,
			   double *loss)
{
	*loss = DQ_FN(dq_cpu_xent_train_)(ctx, dlogits, logits, targets, N, V,
					  scale);
}

static void cpu_sumsq(void *ctx, double *sumsq, const void *x, size_t n)
{
	(void)ctx;
	*sumsq = block_dot(x, x, n);
}

static void cpu_clip(void *ctx, void *x, size_t n, const double *sumsq,
		     double clip)
{
	double gn = sqrt(*sumsq);
	if (clip > 0 && gn > clip)
		cpu_scale(ctx, x, clip / gn, n);
}

static void cpu_adam(void *ctx, void *p_, const void *g_, void *m_, void *v_,
		     size_t n, const double *hyper, double beta1, double beta2,
		     double eps, double wd)
{
	(void)ctx;
	real *p = p_, *m = m_, *v = v_;
	const real *g = g_;
	real bc1 = (real)hyper[1], bc2 = (real)hyper[2];
	PAR_EACH(n, adam_step(&p[i], g[i], &m[i], &v[i], (real)hyper[0],
			      (real)beta1, (real)beta2, (real)eps, (real)wd,
			      bc1, bc2));
}

/* ------------------------------------------- solver control (solve_ctl.h) */

/* The three ops it stands for, in their order: the same bits. */
static void cpu_residual_dots(void *ctx, void *g, const void *fx, const void *x,
			      double *seg_f, double *seg_g, size_t nseg,
			      size_t len)
{
	cpu_dot_segments(ctx, seg_f, fx, fx, nseg, len);
	cpu_sub(ctx, g, fx, x, nseg * len);
	cpu_dot_segments(ctx, seg_g, g, g, nseg, len);
}

static void cpu_gemm_bias_act(void *ctx, int relu, int M, int N, int K,
			      double beta, const void *A, const void *W,
			      const uint16_t *W16, const void *b, void *C,
			      void *scratch)
{
	if (W16)
		DQ_FN(dq_cpu_gemm_bf16_mixed_)
	(ctx, 0, 1, M, N, K, 1.0, A, K, W16, K, beta, C, N, scratch);
	else cpu_gemm(ctx, 0, 1, M, N, K, 1.0, A, K, W, K, beta, C, N);
	if (relu)
		DQ_FN(dq_cpu_bias_act_forward_)(ctx, ACT_RELU, C, b, M, N);
	else
		DQ_FN(dq_cpu_bias_forward_)(ctx, C, b, M, N);
}

static const struct backend_core_ops cpu_core = {
    .raw_alloc = cpu_raw_alloc,
    .raw_free = cpu_raw_free,
    .destroy = cpu_destroy,
    .info = cpu_info,
    .sync = cpu_sync,
    .timer_mark = cpu_timer_mark,
    .timer_elapsed_ms = cpu_timer_elapsed_ms,
    .upload = cpu_upload,
    .download = cpu_download,
    .upload_bytes = cpu_bytes,
    .download_bytes = cpu_bytes,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .zero_rows = cpu_zero_rows,
    .transpose = cpu_transpose,
    .copy_async = dq_cpu_copy_async,
    .copy_wait = dq_cpu_copy_wait,
    .copy_stats = dq_cpu_copy_stats,
};

static const struct backend_math_ops cpu_math = {
    .gemm = cpu_gemm,
    .bias_forward = DQ_FN(dq_cpu_bias_forward_),
    .bias_backward = DQ_FN(dq_cpu_bias_backward_),
    .act_forward = DQ_FN(dq_cpu_act_forward_),
    .act_backward = DQ_FN(dq_cpu_act_backward_),
    .bias_act_forward = DQ_FN(dq_cpu_bias_act_forward_),
    .act_bias_backward = DQ_FN(dq_cpu_act_bias_backward_),
    .mul = DQ_FN(dq_cpu_mul_),
    .to_bf16 = DQ_FN(dq_cpu_to_bf16_),
    .from_bf16 = DQ_FN(dq_cpu_from_bf16_),
    .round_bf16 = DQ_FN(dq_cpu_round_bf16_),
    .gemm_bf16 = DQ_FN(dq_cpu_gemm_bf16_),
    .gemm_bf16_arrays = DQ_FN(dq_cpu_gemm_bf16_arrays_),
    .gemm_bf16_mixed = DQ_FN(dq_cpu_gemm_bf16_mixed_),
    .gemm_bias_act = cpu_gemm_bias_act,
    .layernorm_forward = DQ_FN(dq_cpu_layernorm_forward_),
    .layernorm_backward = DQ_FN(dq_cpu_layernorm_backward_),
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .attention_forward_bf16 = cpu_attention_forward_bf16,
    .attention_backward_bf16 = cpu_attention_backward_bf16,
    .attention_flash_forward = DQ_FN(dq_cpu_attention_flash_forward_),
    .attention_flash_backward = DQ_FN(dq_cpu_attention_flash_backward_),
    .embed_forward = cpu_embed_forward,
    .embed_backward = cpu_embed_backward,
    .xent_forward = DQ_FN(dq_cpu_xent_forward_),
    .xent_backward = cpu_xent_backward,
    .xent_train = cpu_xent_train,
    .sumsq = cpu_sumsq,
    .clip = cpu_clip,
    .adam = cpu_adam,
    .axpy = cpu_axpy,
    .scale = cpu_scale,
    .sub = cpu_sub,
    .gemm_batched = cpu_gemm_batched,
    .dot_segments = cpu_dot_segments,
    .residual_dots = cpu_residual_dots,
    .solve_check = DQ_FN(dq_cpu_solve_check_),
    .copy_masked = DQ_FN(dq_cpu_copy_masked_),
    .scale_recip = DQ_FN(dq_cpu_scale_recip_),
    .anderson_weights = DQ_FN(dq_cpu_anderson_weights_),
    .fused_measure = DQ_FN(dq_cpu_fused_measure_),
    .fused_apply = DQ_FN(dq_cpu_fused_apply_),
    .fused_anderson_measure = DQ_FN(dq_cpu_fused_anderson_measure_),
    .fused_anderson_apply = DQ_FN(dq_cpu_fused_anderson_apply_),
};

/* No optional table: no pinned memory (MEM_HOST is malloc'd), no pool, no
 * unified memory, no TF32 or memory cap, no graphs. */
const struct backend_ops DQ_FN(dq_cpu_ops_) = {
    .name = DQ_BACKNAME,
    .core = &cpu_core,
    .math = &cpu_math,
};
