/* elementwise.h — per-element formulas shared by the CPU and CUDA backends,
 * so both compute the same math. Reductions and indexing stay per backend.
 *
 * Include after defining DQ_REAL (float or double). Under nvcc every
 * function is __host__ __device__. Function names carry the type suffix
 * DQ_SFX (f or d) so that both instantiations can live in one program.
 */
#ifndef DQ_REAL
#error "define DQ_REAL (float or double) before including elementwise.h"
#endif

#ifdef __CUDACC__
#define DQ_HD __host__ __device__ __forceinline__
#else
#define DQ_HD static inline
#endif

#include <math.h>

#define DQ_CAT2(a, b) a##b
#define DQ_CAT(a, b)  DQ_CAT2(a, b)
#define DQ_FN(name)   DQ_CAT(name, DQ_SFX)

/* LayerNorm epsilon of docs/ARCHITECTURE.md §Model (PyTorch's default). */
#ifndef DQ_LN_EPS
#define DQ_LN_EPS 1e-5
#endif

/* exact GELU, PyTorch nn.GELU(approximate='none'):
 * gelu(x) = x Φ(x), Φ(x) = (1 + erf(x/√2)) / 2; gelu'(x) = Φ(x) + x φ(x). */
DQ_HD DQ_REAL DQ_FN(dq_gelu_)(DQ_REAL x)
{
	return (DQ_REAL)0.5 * x *
	       ((DQ_REAL)1 + erf(x * (DQ_REAL)0.70710678118654752440));
}

DQ_HD DQ_REAL DQ_FN(dq_gelu_grad_)(DQ_REAL x)
{
	DQ_REAL cdf = (DQ_REAL)0.5 *
		      ((DQ_REAL)1 + erf(x * (DQ_REAL)0.70710678118654752440));
	DQ_REAL pdf =
	    (DQ_REAL)0.39894228040143267794 * exp((DQ_REAL)-0.5 * x * x);
	return cdf + x * pdf;
}

DQ_HD DQ_REAL DQ_FN(dq_relu_)(DQ_REAL x)
{
	return x > (DQ_REAL)0 ? x : (DQ_REAL)0;
}

/* relu'(x) from its output y: 1 where y > 0 (the subgradient 0 at 0). */
DQ_HD DQ_REAL DQ_FN(dq_relu_grad_from_y_)(DQ_REAL y)
{
	return y > (DQ_REAL)0 ? (DQ_REAL)1 : (DQ_REAL)0;
}

DQ_HD DQ_REAL DQ_FN(dq_sigmoid_)(DQ_REAL x)
{
	return (DQ_REAL)1 / ((DQ_REAL)1 + exp(-x));
}

/* tanh'(x) = 1 - y², sigmoid'(x) = y (1 - y), from the output y. */
DQ_HD DQ_REAL DQ_FN(dq_tanh_grad_from_y_)(DQ_REAL y)
{
	return (DQ_REAL)1 - y * y;
}

DQ_HD DQ_REAL DQ_FN(dq_sigmoid_grad_from_y_)(DQ_REAL y)
{
	return y * ((DQ_REAL)1 - y);
}

/* One Adam step for one element (Kingma & Ba 2015, Algorithm 1), with
 * decoupled weight decay (Loshchilov & Hutter 2019) when wd > 0.
 * bc1 = 1 - beta1^t, bc2 = 1 - beta2^t are computed once per step. */
DQ_HD void DQ_FN(dq_adam_)(DQ_REAL *p, DQ_REAL g, DQ_REAL *m, DQ_REAL *v,
			   DQ_REAL lr, DQ_REAL beta1, DQ_REAL beta2,
			   DQ_REAL eps, DQ_REAL wd, DQ_REAL bc1, DQ_REAL bc2)
{
	DQ_REAL mi = beta1 * *m + ((DQ_REAL)1 - beta1) * g;
	DQ_REAL vi = beta2 * *v + ((DQ_REAL)1 - beta2) * g * g;
	DQ_REAL mhat = mi / bc1, vhat = vi / bc2;
	*m = mi;
	*v = vi;
	*p -= lr * (mhat / (sqrt(vhat) + eps) + wd * *p);
}

#undef DQ_HD
