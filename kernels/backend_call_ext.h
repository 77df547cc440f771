/* backend_call_ext.h — the rest of backend_call.h's wrappers: the solver
 * control ops (device-side solves, kernels/solve_ctl.h) and the optional
 * ops (be_has_<op>, then the wrapper). backend_call.h includes this file
 * at its end; include backend.h. */
#ifndef DQ_BACKEND_CALL_EXT_H
#define DQ_BACKEND_CALL_EXT_H

/* ---- bf16 (the rest of backend_call.h's group) */

static inline void be_gemm_bf16_mixed(const struct backend *be, int ta, int tb,
				      int M, int N, int K, double alpha,
				      const void *A, int lda, const uint16_t *B,
				      int ldb, double beta, void *C, int ldc,
				      void *scratch)
{
	dq_gemm_shape(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
	assert(be->bf16_operand_elem > 0);
	DQ_NEED((size_t)M * K + (size_t)K * N, scratch);
	be->ops->math->gemm_bf16_mixed(be->ctx, ta, tb, M, N, K, alpha, A, lda,
				       B, ldb, beta, C, ldc, scratch);
}

/* W16 NULL, or W's bf16 cast with scratch as gemm_bf16_mixed's. */
static inline void be_gemm_bias_act(const struct backend *be, int relu, int M,
				    int N, int K, double beta, const void *A,
				    const void *W, const uint16_t *W16,
				    const void *b, void *C, void *scratch)
{
	assert(M >= 0 && N >= 0 && K >= 0 && A && W && b && C);
	assert(!W16 || (be->bf16_operand_elem > 0 && scratch));
	be->ops->math->gemm_bias_act(be->ctx, relu, M, N, K, beta, A, W, W16, b,
				     C, scratch);
}

/* Bytes of the ws of attention_forward_bf16 and attention_backward_bf16:
 * room for bf16 (or, on a backend whose operands are the rounded values
 * in its own type, bf16_operand_elem-byte) copies of qkv (3 B T C), dout
 * (B T C), P and G (B H T T each), each of the last three starting at
 * a multiple of 8 elements. */
static inline size_t be_attention_bf16_ws_bytes(const struct backend *be, int B,
						int T, int C, int H)
{
	size_t bt = (size_t)B * T, att = bt * (size_t)H * T;
	return be->bf16_operand_elem * (4 * bt * (size_t)C + 2 * att + 24);
}

static inline void be_attention_forward_bf16(const struct backend *be,
					     void *out, void *att,
					     const void *qkv, void *ws, int B,
					     int T, int C, int H)
{
	dq_attention_shape(B, T, C, H);
	DQ_NEED(B && T && C, out), DQ_NEED(B && T, att);
	DQ_NEED(B && T && C, qkv), DQ_NEED(B && T, ws);
	be->ops->math->attention_forward_bf16(be->ctx, out, att, qkv, ws, B, T,
					      C, H);
}

static inline void be_attention_backward_bf16(const struct backend *be,
					      void *dqkv, void *scratch,
					      const void *dout, const void *qkv,
					      const void *att, void *ws, int B,
					      int T, int C, int H)
{
	dq_attention_shape(B, T, C, H);
	DQ_NEED(B && T && C, dqkv), DQ_NEED(B && T, scratch);
	DQ_NEED(B && T && C, dout), DQ_NEED(B && T && C, qkv);
	DQ_NEED(B && T, att), DQ_NEED(B && T, ws);
	be->ops->math->attention_backward_bf16(be->ctx, dqkv, scratch, dout,
					       qkv, att, ws, B, T, C, H);
}

static inline void be_attention_flash_forward(const struct backend *be,
					      void *out, void *lse,
					      const void *qkv, int B, int T,
					      int C, int H, int bf16)
{
	dq_attention_shape(B, T, C, H);
	assert(C / H <= DQ_FLASH_MAX_DH);
	DQ_NEED(B && T && C, out), DQ_NEED(B && T, lse);
	DQ_NEED(B && T && C, qkv);
	be->ops->math->attention_flash_forward(be->ctx, out, lse, qkv, B, T, C,
					       H, bf16);
}

static inline void be_attention_flash_backward(const struct backend *be,
					       void *dqkv, void *scratch,
					       const void *dout,
					       const void *qkv, const void *out,
					       const void *lse, void *ws, int B,
					       int T, int C, int H, int bf16)
{
	dq_attention_shape(B, T, C, H);
	assert(C / H <= DQ_FLASH_MAX_DH);
	DQ_NEED(B && T && C, dqkv), DQ_NEED(B && T, scratch);
	DQ_NEED(B && T && C, dout), DQ_NEED(B && T && C, qkv);
	DQ_NEED(B && T && C, out), DQ_NEED(B && T, lse);
	DQ_NEED(bf16 && B && T, ws);
	be->ops->math->attention_flash_backward(
	    be->ctx, dqkv, scratch, dout, qkv, out, lse, ws, B, T, C, H, bf16);
}

/* ---- solver control (kernels/solve_ctl.h): nothing returns to the host.
 * The per-sample ops take S samples of P segments of len elements
 * (segment p of sample k at (p S + k) len), flag and seg in device
 * doubles. */

static inline void be_dot_segments(const struct backend *be, double *out,
				   const void *x, const void *y, size_t nseg,
				   size_t len)
{
	DQ_NEED(nseg, out), DQ_NEED(nseg * len, x), DQ_NEED(nseg * len, y);
	be->ops->math->dot_segments(be->ctx, out, x, y, nseg, len);
}

static inline void be_residual_dots(const struct backend *be, void *g,
				    const void *fx, const void *x,
				    double *seg_f, double *seg_g, size_t nseg,
				    size_t len)
{
	DQ_NEED(nseg * len, g), DQ_NEED(nseg * len, fx), DQ_NEED(nseg, seg_f);
	DQ_NEED(nseg * len, x), DQ_NEED(nseg, seg_g);
	assert(x != g && x != fx && seg_f != seg_g);
	be->ops->math->residual_dots(be->ctx, g, fx, x, seg_f, seg_g, nseg,
				     len);
}

/* The block's shape: st set, S and P at least 1. */
static inline void dq_ctl_shape(const struct dq_solve_ctl *c)
{
	assert(c != NULL && c->st != NULL && c->S >= 1 && c->P >= 1);
}

static inline void be_solve_check(const struct backend *be,
				  const struct dq_solve_ctl *c)
{
	dq_ctl_shape(c);
	be->ops->math->solve_check(be->ctx, c);
}

/* src may be NULL (the flagged samples of dst are zeroed). */
static inline void be_copy_masked(const struct backend *be, void *dst,
				  const void *src, const double *flag, int S,
				  int P, size_t len)
{
	assert(S >= 0 && P >= 0);
	DQ_NEED((size_t)S * (size_t)P * len, dst), DQ_NEED(S, flag);
	be->ops->math->copy_masked(be->ctx, dst, src, flag, S, P, len);
}

static inline void be_scale_recip(const struct backend *be, void *dst,
				  const void *src, const double *seg, int S,
				  int P, size_t len)
{
	assert(S >= 0 && P >= 0);
	DQ_NEED((size_t)S * (size_t)P * len, dst);
	DQ_NEED((size_t)S * (size_t)P * len, src);
	DQ_NEED((size_t)S * (size_t)P, seg);
	be->ops->math->scale_recip(be->ctx, dst, src, seg, S, P, len);
}

/* row and alpha (c->S, nact); the new G's slot is one of the nact in use,
 * which fit the block's Gram matrices (m). */
static inline void be_anderson_weights(const struct backend *be,
				       const struct dq_solve_ctl *c,
				       const void *row, void *alpha, int slot,
				       int nact, double lambda)
{
	dq_ctl_shape(c);
	assert(nact >= 1 && nact <= c->m && slot >= 0 && slot < nact);
	assert(lambda >= 0);
	assert(row != NULL && alpha != NULL);
	be->ops->math->anderson_weights(be->ctx, c, row, alpha, slot, nact,
					lambda);
}

/* c->hb > 0: the fused ring; no vector aliases another. */
static inline void be_fused_measure(const struct backend *be,
				    const struct dq_solve_ctl *c,
				    const void *fx, const void *x, void *g,
				    const void *dx, void *dg, const void *U,
				    const void *V, size_t len)
{
	dq_ctl_shape(c);
	assert(c->hb > 0 && c->hb <= DQ_FUSED_MAX_H && c->nchunk >= 1);
	assert(fx != x && fx != g && x != g && g != dg && dx != dg);
	be->ops->math->fused_measure(be->ctx, c, fx, x, g, dx, dg, U, V, len);
}

static inline void be_fused_apply(const struct backend *be,
				  const struct dq_solve_ctl *c, void *x,
				  void *dx, const void *g, const void *dg,
				  void *U, void *V, void *best, size_t len)
{
	dq_ctl_shape(c);
	assert(c->hb > 0 && x != dx && x != best && dx != g);
	be->ops->math->fused_apply(be->ctx, c, x, dx, g, dg, U, V, best, len);
}

/* c->ma > 0 (at most c->m, the Gram matrices' size). */
static inline void be_fused_anderson_measure(const struct backend *be,
					     const struct dq_solve_ctl *c,
					     const void *fx, const void *xn,
					     void *X, void *G, size_t len)
{
	dq_ctl_shape(c);
	assert(c->ma > 0 && c->ma <= c->m && c->ma <= DQ_FUSED_MAX_H);
	assert(c->nchunk >= 1 && fx != xn);
	be->ops->math->fused_anderson_measure(be->ctx, c, fx, xn, X, G, len);
}

static inline void be_fused_anderson_apply(const struct backend *be,
					   const struct dq_solve_ctl *c,
					   void *xn, const void *X,
					   const void *G, void *best,
					   size_t len)
{
	dq_ctl_shape(c);
	assert(c->ma > 0 && xn != best);
	be->ops->math->fused_anderson_apply(be->ctx, c, xn, X, G, best, len);
}

/* Allocator-only: MEM_MANAGED bytes; NULL without managed memory. */
static inline int be_has_managed(const struct backend *be)
{
	return be->ops->managed != NULL;
}

static inline void *be_managed_alloc(const struct backend *be, size_t bytes)
{
	return be_has_managed(be)
		   ? be->ops->managed->managed_alloc(be->ctx, bytes)
		   : NULL;
}

static inline void be_managed_free(const struct backend *be, void *p)
{
	if (be_has_managed(be))
		be->ops->managed->managed_free(be->ctx, p);
}

/* ---- optional ops (the list above): be_has_<op>, then the wrapper, which
 * returns 0 when the op ran and -1 when the backend has none */

/* Whether the backend has pool statistics (the pool table). */
static inline int be_has_pool(const struct backend *be)
{
	return be->ops->pool != NULL;
}

/* Whether the backend has the device switches (TF32, the memory cap). */
static inline int be_has_device(const struct backend *be)
{
	return be->ops->device != NULL;
}

/* Without the pool table, *out is zeroed. */
static inline int be_pool_stats(const struct backend *be,
				struct backend_pool_stats *out)
{
	assert(out != NULL);
	if (!be_has_pool(be)) {
		memset(out, 0, sizeof(*out));
		return -1;
	}
	be->ops->pool->pool_stats(be->ctx, out);
	return 0;
}

static inline int be_pool_reset_peak(const struct backend *be)
{
	if (!be_has_pool(be))
		return -1;
	be->ops->pool->pool_reset_peak(be->ctx);
	return 0;
}

static inline int be_set_tf32(const struct backend *be, int allow)
{
	if (!be_has_device(be))
		return -1;
	be->ops->device->set_tf32(be->ctx, allow);
	return 0;
}

static inline int be_prefetch(const struct backend *be, const void *p,
			      size_t bytes, int to_device, int ev)
{
	assert(ev >= 0 && ev < BACKEND_COPY_EVENTS);
	assert(p != NULL || bytes == 0);
	if (!be_has_managed(be))
		return -1;
	be->ops->managed->prefetch(be->ctx, p, bytes, to_device != 0, ev);
	return 0;
}

static inline int be_has_graphs(const struct backend *be)
{
	return be->ops->graph != NULL;
}

static inline void be_graph_begin(const struct backend *be)
{
	assert(be_has_graphs(be));
	be->ops->graph->graph_begin(be->ctx);
}

static inline void *be_graph_end(const struct backend *be)
{
	assert(be_has_graphs(be));
	return be->ops->graph->graph_end(be->ctx);
}

static inline void be_graph_loop_begin(const struct backend *be)
{
	assert(be_has_graphs(be));
	be->ops->graph->graph_loop_begin(be->ctx);
}

static inline void be_graph_loop_next(const struct backend *be,
				      const double *go)
{
	assert(be_has_graphs(be) && go != NULL);
	be->ops->graph->graph_loop_next(be->ctx, go);
}

static inline void *be_graph_loop_end(const struct backend *be)
{
	assert(be_has_graphs(be));
	return be->ops->graph->graph_loop_end(be->ctx);
}

static inline void be_graph_while_begin(const struct backend *be)
{
	assert(be_has_graphs(be));
	be->ops->graph->graph_while_begin(be->ctx);
}

static inline void *be_graph_while_end(const struct backend *be,
				       const double *go)
{
	assert(be_has_graphs(be) && go != NULL);
	return be->ops->graph->graph_while_end(be->ctx, go);
}

static inline void be_graph_launch(const struct backend *be, void *g)
{
	assert(be_has_graphs(be) && g != NULL);
	be->ops->graph->graph_launch(be->ctx, g);
}

/* g may be NULL. */
static inline void be_graph_free(const struct backend *be, void *g)
{
	if (g)
		be->ops->graph->graph_free(be->ctx, g);
}

/* -1 with a line in err where the backend cannot cap its memory. */
static inline int be_cap_device(const struct backend *be, size_t bytes,
				char *err, size_t errlen)
{
	if (!be_has_device(be)) {
		snprintf(err, errlen,
			 "this backend cannot cap its device memory "
			 "(device_mem_cap_mib needs device=cuda)");
		return -1;
	}
	return be->ops->device->cap_device(be->ctx, bytes, err, errlen);
}

#endif
