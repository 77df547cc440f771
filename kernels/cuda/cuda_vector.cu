/* cuda_vector.cu — the CUDA backend's ops over whole vectors: softmax
 * cross-entropy (its mean loss reduced to one number), Adam, and the
 * solvers' vector ops (dot, norm, dot_segments, residual_dots, axpy,
 * scale, sub). float32 data, double reductions, per-element formulas from
 * elementwise.h; the contracts are kernels/backend.h's and match
 * kernels/cpu/cpu_backend.c.
 *
 * What runs where: everything on the GPU, on ctx->stream. dot, norm,
 * dot_segments and xent_forward synchronise (they return numbers to the
 * host): an 8-byte device-to-host copy into pinned memory each (nseg
 * doubles for dot_segments); the others are asynchronous.
 *
 * Letters: N rows, V vocabulary, n elements.
 *
 * Determinism: the same bits run to run on one GPU model. dot / norm sum
 * per block in double over a fixed grid-stride assignment, then the last
 * block (ticket) adds the partials in block order; dot_segments sums each
 * segment's blocks in order; cross-entropy keeps per-row losses in double,
 * summed by one block.
 */
#include "cuda_common.cuh"

/* ------------------------------------------------- softmax cross-entropy */

/* One block per row n of logits (V columns): max, Σ exp in double, the
 * probabilities times scale (minus scale at the target when grad: the row
 * of dlogits, xent_train), and loss[n] = log Σ exp + max - logits[target] in double.
 * The target logit is read before the first barrier, i.e. before any
 * thread writes probs (which may alias logits). A target outside [0, V)
 * gives a NaN loss instead of an out-of-bounds read. */
__global__ void __launch_bounds__(256)
    xent_forward_kernel(float *probs, const float *logits,
			const int32_t *targets, int V, double *loss,
			float scale, int grad)
{
	__shared__ float shf[32];
	__shared__ double shd[32];
	const size_t n = blockIdx.x;
	const float *l = logits + n * (size_t)V;
	float *p = probs + n * (size_t)V;
	const int tg = targets[n];
	const float lt = (tg >= 0 && tg < V) ? l[tg] : NAN;
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		mx = fmaxf(mx, l[j]);
	mx = dq_block_max_f(mx, shf);
	double sum = 0.0;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		sum += (double)expf(l[j] - mx);
	sum = dq_block_sum_d(sum, shd);
	const float inv = (float)((double)scale / sum);
	for (int j = threadIdx.x; j < V; j += blockDim.x) {
		float v = expf(l[j] - mx) * inv;
		if (grad && j == tg)
			v -= scale;
		p[j] = v;
	}
	if (threadIdx.x == 0)
		loss[n] = log(sum) + (double)mx - (double)lt;
}

/* *res = Σ x[0..n) in a fixed order: one block of 1024 threads, thread i
 * sums i, i+1024, ..., then the block tree. */
__global__ void __launch_bounds__(1024)
    sum_rows_kernel(double *res, const double *x, int n)
{
	__shared__ double sh[32];
	double s = 0.0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += x[i];
	s = dq_block_sum_d(s, sh);
	if (threadIdx.x == 0)
		*res = s;
}

/* *loss = (first ? 0 : *loss) + *s, then / N when last: xent_rows'
 * total on the device, in the same double operations (no contraction). */
__global__ void loss_acc_kernel(double *loss, const double *s, int first,
				int last, int N)
{
	double t = __dadd_rn(first ? 0.0 : *loss, *s);
	*loss = last ? __ddiv_rn(t, (double)N) : t;
}

/* Mean loss over N rows; per-row losses go through ctx->red in chunks of
 * DQ_CU_RED_CAP rows. out gets the probabilities times scale, minus scale
 * at the target with grad. With loss NULL the chunk sums come to the host
 * (a synchronisation each) and the mean is returned; otherwise they are
 * added on the device, the mean is left in *loss (the same double
 * operations) and nothing synchronises. */
static double xent_rows(void *ctx, void *out, const void *logits,
			const int32_t *targets, int N, int V, float scale,
			int grad, double *loss)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (N <= 0) {
		if (loss)
			cuda_check(cudaMemsetAsync(loss, 0, sizeof(double),
						   c->stream));
		return 0.0;
	}
	double total = 0.0;
	for (int n0 = 0; n0 < N; n0 += (int)DQ_CU_RED_CAP) {
		int cnt =
		    N - n0 < (int)DQ_CU_RED_CAP ? N - n0 : (int)DQ_CU_RED_CAP;
		size_t off = (size_t)n0 * (size_t)V;
		xent_forward_kernel<<<(unsigned int)cnt, 256, 0, c->stream>>>(
		    (float *)out + off, (const float *)logits + off,
		    targets + n0, V, c->red, scale, grad);
		cuda_check_launch();
		sum_rows_kernel<<<1, 1024, 0, c->stream>>>(c->dres, c->red,
							   cnt);
		cuda_check_launch();
		if (loss) {
			loss_acc_kernel<<<1, 1, 0, c->stream>>>(
			    loss, c->dres, n0 == 0, n0 + cnt >= N, N);
			cuda_check_launch();
			continue;
		}
		cuda_check(cudaMemcpyAsync(c->hres, c->dres, sizeof(double),
					   cudaMemcpyDeviceToHost, c->stream));
		cuda_check(cudaStreamSynchronize(c->stream));
		total += *c->hres;
	}
	return total / N;
}

double cu_xent_forward(void *ctx, void *probs, const void *logits,
		       const int32_t *targets, int N, int V)
{
	return xent_rows(ctx, probs, logits, targets, N, V, 1.0f, 0, NULL);
}

/* xent_forward and xent_backward in one kernel per row, the mean loss
 * left in *loss (device); no sync. */
void cu_xent_train(void *ctx, void *dlogits, const void *logits,
		   const int32_t *targets, int N, int V, double scale,
		   double *loss)
{
	(void)xent_rows(ctx, dlogits, logits, targets, N, V, (float)scale, 1,
			loss);
}

/* dlogits = scale (probs - onehot(target)), one block per row; computed as
 * scale*p, then -= scale at the target, the CPU backend's two roundings.
 * Each element is read and written by one thread: dlogits may alias
 * probs. */
__global__ void xent_backward_kernel(float *dl, const float *p,
				     const int32_t *targets, int V, float s)
{
	const size_t n = blockIdx.x;
	const int tg = targets[n];
	const float *pn = p + n * (size_t)V;
	float *dn = dl + n * (size_t)V;
	for (int j = threadIdx.x; j < V; j += blockDim.x) {
		float v = s * pn[j];
		if (j == tg)
			v -= s;
		dn[j] = v;
	}
}

void cu_xent_backward(void *ctx, void *dlogits, const void *probs,
		      const int32_t *targets, int N, int V, double scale)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (N <= 0 || V <= 0)
		return;
	xent_backward_kernel<<<(unsigned int)N, 256, 0, c->stream>>>(
	    (float *)dlogits, (const float *)probs, targets, V, (float)scale);
	cuda_check_launch();
}

/* ------------------------------------------------------------------ adam */

/* Adam with lr and the bias corrections read from hyper (device doubles
 * {lr, 1 - b1^t, 1 - b2^t}, computed on the host in double), rounded to
 * float, as the CPU backend. */
__global__ void adam_kernel(float *p, const float *g, float *m, float *v,
			    size_t n, const double *hyper, float b1, float b2,
			    float eps, float wd)
{
	const float lr = (float)hyper[0], bc1 = (float)hyper[1],
		    bc2 = (float)hyper[2];
	DQ_GRID_STRIDE(i, n)
	dq_adam_f(&p[i], g[i], &m[i], &v[i], lr, b1, b2, eps, wd, bc1, bc2);
}

void cu_adam(void *ctx, void *p, const void *g, void *m, void *v, size_t n,
	     const double *hyper, double beta1, double beta2, double eps,
	     double wd)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	adam_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
		      c->stream>>>((float *)p, (const float *)g, (float *)m,
				   (float *)v, n, hyper, (float)beta1,
				   (float)beta2, (float)eps, (float)wd);
	cuda_check_launch();
}

/* ------------------------------------------------------ solver vector ops */

/* *res = Σ x[i] y[i] in double (float products are exact in double).
 * Block sums over a fixed grid-stride assignment go to part[block]; the
 * last block (ticket) adds them in a fixed order and resets the ticket. */
__global__ void __launch_bounds__(256)
    dot_kernel(const float *x, const float *y, size_t n, double *part,
	       unsigned int *ticket, double *res)
{
	__shared__ double sh[32];
	__shared__ int is_last;
	double s = 0.0;
	DQ_GRID_STRIDE(i, n)
	s += (double)x[i] * (double)y[i];
	s = dq_block_sum_d(s, sh);
	if (gridDim.x == 1) {
		if (threadIdx.x == 0)
			*res = s;
		return;
	}
	if (threadIdx.x == 0) {
		part[blockIdx.x] = s;
		__threadfence();
		is_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!is_last)
		return;
	double t = 0.0;
	for (unsigned int j = threadIdx.x; j < gridDim.x; j += blockDim.x)
		t += __ldcg(&part[j]);
	t = dq_block_sum_d(t, sh);
	if (threadIdx.x == 0) {
		*res = t;
		*ticket = 0;
	}
}

/* Σ x² in double (dot_kernel on x, x) left in *sumsq; no sync. nan and
 * inf propagate. */
void cu_sumsq(void *ctx, double *sumsq, const void *x, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	const float *f = (const float *)x;
	if (!n) {
		cuda_check(
		    cudaMemsetAsync(sumsq, 0, sizeof(double), c->stream));
		return;
	}
	unsigned int g = dq_grid_1d(c, n, 256);
	if (g > 4u * (unsigned int)c->sm_count)
		g = 4u * (unsigned int)c->sm_count;
	dot_kernel<<<g, 256, 0, c->stream>>>(f, f, n, c->red, c->tickets,
					     sumsq);
	cuda_check_launch();
}

/* x *= (float)(clip / gn) with gn = sqrt(*sumsq) when clip > 0 and gn >
 * clip (cu_scale's rounding of the factor computed on the host). */
__global__ void clip_kernel(float *x, size_t n, const double *sumsq,
			    double clip)
{
	const double gn = sqrt(*sumsq);
	if (!(clip > 0 && gn > clip))
		return;
	const float a = (float)__ddiv_rn(clip, gn);
	DQ_GRID_STRIDE(i, n)
	x[i] *= a;
}

void cu_clip(void *ctx, void *x, size_t n, const double *sumsq, double clip)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	clip_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
		      c->stream>>>((float *)x, n, sumsq, clip);
	cuda_check_launch();
}

/* part[s G + g] = Σ over block g's grid-stride share of segment s
 * (blockIdx.y) of x·y, in double. */
__global__ void __launch_bounds__(256)
    dot_segments_kernel(const float *x, const float *y, size_t len,
			double *part)
{
	__shared__ double sh[32];
	const size_t s = blockIdx.y, G = gridDim.x;
	const float *xs = x + s * len, *ys = y + s * len;
	double acc = 0.0;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < len;
	     i += G * blockDim.x)
		acc += (double)xs[i] * (double)ys[i];
	acc = dq_block_sum_d(acc, sh);
	if (threadIdx.x == 0)
		part[s * G + blockIdx.x] = acc;
}

/* res[s] = Σ_g part[s G + g] in order: one thread per segment. */
__global__ void dot_segments_finish_kernel(const double *part, int G,
					   size_t nseg, double *res)
{
	DQ_GRID_STRIDE(s, nseg)
	{
		double t = 0.0;
		for (int g = 0; g < G; g++)
			t += part[s * (size_t)G + g];
		res[s] = t;
	}
}

/* Blocks per segment: enough blocks to fill the device about four times
 * over, none idle on short segments. */
static size_t dot_segments_grid(const struct dq_cuda_ctx *c, size_t nseg,
				size_t len)
{
	size_t G = (4 * (size_t)c->sm_count + nseg - 1) / nseg;
	size_t gmax = (len + 4 * 256 - 1) / (4 * 256);
	if (G > gmax)
		G = gmax;
	if (G > 64)
		G = 64;
	return G < 1 ? 1 : G;
}

/* Segments go in chunks that fit the reduction scratch and gridDim.y.
 * Each chunk is two launches, its results at out + s0 (stream order keeps
 * the next chunk's partials after this one's finish); nothing
 * synchronises. */
static void dot_segments_run(struct dq_cuda_ctx *c, double *out, const void *x,
			     const void *y, size_t nseg, size_t len)
{
	size_t G = dot_segments_grid(c, nseg, len);
	size_t chunk = DQ_CU_RED_CAP / (G + 1);
	if (chunk > 65535)
		chunk = 65535;
	for (size_t s0 = 0; s0 < nseg; s0 += chunk) {
		size_t ns = nseg - s0 < chunk ? nseg - s0 : chunk;
		const float *xs = (const float *)x + s0 * len;
		const float *ys = (const float *)y + s0 * len;
		dot_segments_kernel<<<dim3((unsigned)G, (unsigned)ns), 256, 0,
				      c->stream>>>(xs, ys, len, c->red);
		cuda_check_launch();
		dot_segments_finish_kernel<<<dq_grid_1d(c, ns, DQ_CU_THREADS),
					     DQ_CU_THREADS, 0, c->stream>>>(
		    c->red, (int)G, ns, out + s0);
		cuda_check_launch();
	}
}

void cu_dot_segments(void *ctx, double *out, const void *x, const void *y,
		     size_t nseg, size_t len)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!nseg)
		return;
	if (!len) {
		cuda_check(
		    cudaMemsetAsync(out, 0, nseg * sizeof(double), c->stream));
		return;
	}
	dot_segments_run(c, out, x, y, nseg, len);
}

/* a − b as axpy_kernel computes a + (−1) b: its bits (residual_dots,
 * sub). */
__device__ __forceinline__ float dq_sub_f(float a, float b)
{
	const float m1 = -1.0f;
	a += m1 * b;
	return a;
}

/* residual_dots' pass: g = fx − x (dq_sub_f: axpy's bits) and
 * dot_segments_kernel's partials of fx·fx into pf and of g·g into pg, the
 * same grid-stride assignment and block sums: the same bits. */
__global__ void __launch_bounds__(256)
    residual_dots_kernel(float *g, const float *fx, const float *x, size_t len,
			 double *pf, double *pg)
{
	__shared__ double shf[32], shg[32];
	const size_t s = blockIdx.y, G = gridDim.x;
	double af = 0.0, ag = 0.0;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < len;
	     i += G * blockDim.x) {
		size_t j = s * len + i;
		float f = fx[j], gv = dq_sub_f(f, x[j]);
		g[j] = gv;
		af += (double)f * (double)f;
		ag += (double)gv * (double)gv;
	}
	af = dq_block_sum_d(af, shf);
	ag = dq_block_sum_d(ag, shg);
	if (threadIdx.x == 0) {
		pf[s * G + blockIdx.x] = af;
		pg[s * G + blockIdx.x] = ag;
	}
}

/* dot_segments_finish_kernel over both: res_f[s] from pf, res_g[s] from
 * pg (segment s of the 2 ns sums a thread takes). */
__global__ void residual_finish_kernel(const double *pf, const double *pg,
				       int G, size_t ns, double *res_f,
				       double *res_g)
{
	DQ_GRID_STRIDE(k, 2 * ns)
	{
		const size_t s = k < ns ? k : k - ns;
		const double *part = k < ns ? pf : pg;
		double t = 0.0;
		for (int b = 0; b < G; b++)
			t += part[s * (size_t)G + b];
		(k < ns ? res_f : res_g)[s] = t;
	}
}

/* dot_segments_run's grid (the same G for the same nseg and len, so the
 * same sums), in chunks whose two partial arrays fit the scratch. */
void cu_residual_dots(void *ctx, void *g, const void *fx, const void *x,
		      double *seg_f, double *seg_g, size_t nseg, size_t len)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!nseg)
		return;
	if (!len) {
		cuda_check(cudaMemsetAsync(seg_f, 0, nseg * sizeof(double),
					   c->stream));
		cuda_check(cudaMemsetAsync(seg_g, 0, nseg * sizeof(double),
					   c->stream));
		return;
	}
	size_t G = dot_segments_grid(c, nseg, len);
	size_t chunk = DQ_CU_RED_CAP / (2 * G);
	if (chunk > 65535)
		chunk = 65535;
	for (size_t s0 = 0; s0 < nseg; s0 += chunk) {
		size_t ns = nseg - s0 < chunk ? nseg - s0 : chunk, o = s0 * len;
		double *pf = c->red, *pg = c->red + ns * G;
		residual_dots_kernel<<<dim3((unsigned)G, (unsigned)ns), 256, 0,
				       c->stream>>>(
		    (float *)g + o, (const float *)fx + o, (const float *)x + o,
		    len, pf, pg);
		cuda_check_launch();
		residual_finish_kernel<<<dq_grid_1d(c, 2 * ns, DQ_CU_THREADS),
					 DQ_CU_THREADS, 0, c->stream>>>(
		    pf, pg, (int)G, ns, seg_f + s0, seg_g + s0);
		cuda_check_launch();
	}
}

__global__ void axpy_kernel(float *y, float a, const float *x, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	y[i] += a * x[i];
}

void cu_axpy(void *ctx, void *y, double a, const void *x, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	axpy_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
		      c->stream>>>((float *)y, (float)a, (const float *)x, n);
	cuda_check_launch();
}

/* dq_sub_f, or scale_kernel's x *= −1: their bits. */
__global__ void sub_kernel(float *d, const float *a, const float *b, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	{
		if (a) {
			d[i] = dq_sub_f(a[i], b[i]);
		} else {
			float v = b[i];
			v *= -1.0f; /* scale_kernel's x *= a */
			d[i] = v;
		}
	}
}

void cu_sub(void *ctx, void *dst, const void *a, const void *b, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	sub_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
		     c->stream>>>((float *)dst, (const float *)a,
				  (const float *)b, n);
	cuda_check_launch();
}

__global__ void scale_kernel(float *x, float a, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	x[i] *= a;
}

void cu_scale(void *ctx, void *x, double a, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	scale_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
		       c->stream>>>((float *)x, (float)a, n);
	cuda_check_launch();
}
