/* model_head.c — the LM head and the input injection around the block
 * (docs/ARCHITECTURE.md §Model, §Data flow): a batch's tokens, token and
 * position embeddings, the injection u, the output projection and the mean
 * next-token cross-entropy, chunked or not, and their backward; and the
 * linear-layer helpers the kinds share (model_impl.h).
 *
 * Letters: B batch, T sequence, N = B*T positions, d state width, E
 * embedding width = head input width, U injection width, V vocabulary.
 *
 * Gradient rule: every backward here ADDs (+=) into the parameter
 * gradients; model_zero_grads (model.c) clears them once per step.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "model_impl.h"

/* ------------------------------------------------------------------ head */

int model_set_batch(struct model *m, const int32_t *tokens_host, char *err,
		    size_t errlen)
{
	struct model_priv *pv = m->priv;
	int B = m->B, T = m->T, V = m->cfg.vocab_size;
	size_t N = (size_t)B * T;
	int32_t *in = pv->staging, *tg = pv->staging + N;
	for (int b = 0; b < B; b++) {
		const int32_t *row = tokens_host + (size_t)b * (T + 1);
		for (int t = 0; t <= T; t++) {
			if (row[t] < 0 || row[t] >= V)
				return model_err(
				    err, errlen,
				    "token id %d at batch row %d, position %d "
				    "is outside [0, vocab_size=%d)",
				    (int)row[t], b, t, V);
		}
		memcpy(in + (size_t)b * T, row, (size_t)T * sizeof(int32_t));
		memcpy(tg + (size_t)b * T, row + 1,
		       (size_t)T * sizeof(int32_t));
	}
	be_upload_bytes(m->be, m->tokens, in, N * sizeof(int32_t));
	be_upload_bytes(m->be, m->targets, tg, N * sizeof(int32_t));
	return 0;
}

void model_matmul_forward(struct model *m, void *y, double beta, const void *x,
			  int w, int N, int in, int out)
{
	model_gemm(m, 0, 1, N, out, in, 1.0, x, in, model_p(m, m->param_buf, w),
		   in, beta, y, out);
}

void model_linear_forward(struct model *m, void *y, double beta, const void *x,
			  int w, int N, int in, int out)
{
	model_linear_act_forward(m, y, beta, x, w, N, in, out, 0);
}

void model_matmul_backward(struct model *m, void *dx, double beta,
			   const void *dy, const void *x, int w, int N, int in,
			   int out, int param_grads)
{
	model_gemm(m, 0, 0, N, in, out, 1.0, dy, out,
		   model_p(m, m->param_buf, w), in, beta, dx, in);
	if (param_grads)
		model_gemm(m, 1, 0, out, in, N, 1.0, dy, out, x, in, 1.0,
			   model_p(m, m->grad_buf, w), in);
}

void model_linear_backward(struct model *m, void *dx, double beta,
			   const void *dy, const void *x, int w, int N, int in,
			   int out, int param_grads)
{
	model_matmul_backward(m, dx, beta, dy, x, w, N, in, out, param_grads);
	if (param_grads)
		be_bias_backward(m->be, model_p(m, m->grad_buf, w + 1), dy, N,
				 out);
}

void model_inject_forward(struct model *m)
{
	model_bf16_cast(m); /* a step's first read of the parameters */
	if (m->def->inject_forward) {
		m->def->inject_forward(m);
		return;
	}
	void *P = m->param_buf;
	/* x (N,E) = embed[tok] + pos; u (N,U) = x Winjᵀ + b */
	be_embed_forward(m->be, m->x, m->tokens, model_p(m, P, P_EMBED_W),
			 model_p(m, P, P_POS_W), m->B, m->T, m->E);
	model_linear_forward(m, m->u, 0.0, m->x, P_INJ_W, m->B * m->T, m->E,
			     m->U);
}

/* Rows [r0, r0 + n) of the head: logits (n,V) = z[r0 .. r0+n, :E] Whᵀ + b
 * into m->logits, then in place the probabilities, or with train the
 * rows of dlogits = (probs - onehot) / N (xent_train: one pass, the
 * probabilities never stored); returns their mean cross-entropy. z[:, :E]
 * is the (N,E) matrix at the start of z. */
static double head_chunk_forward(struct model *m, const void *z, int r0, int n,
				 int train)
{
	int N = m->B * m->T, V = m->cfg.vocab_size;
	const void *zc = dq_at(m->be, z, (size_t)r0 * m->E);
	model_linear_forward(m, m->logits, 0.0, zc, m->n_params - 2, n, m->E,
			     V);
	if (train)
		return be_xent_train_host(m->be, m->logits, m->logits,
					  m->targets + r0, n, V,
					  1.0 / (double)N);
	return be_xent_forward(m->be, m->logits, m->logits, m->targets + r0, n,
			       V);
}

/* Rows [r0, r0 + n) of the head's backward from dlogits in m->logits: gz
 * rows (n,E) = dlogits Wh; dWh (V,E) += dlogitsᵀ z rows; dbh += Σ rows. */
static void head_chunk_grads(struct model *m, const void *z, int r0, int n)
{
	int E = m->E, V = m->cfg.vocab_size;
	size_t off = (size_t)r0 * E;
	model_linear_backward(m, dq_at(m->be, m->gz, off), 0.0, m->logits,
			      dq_at(m->be, z, off), m->n_params - 2, n, E, V,
			      1);
}

/* model_head_forward; with train, each chunk's backward follows its
 * forward at once, from xent_train's dlogits. */
static double head_forward(struct model *m, const void *z, int train)
{
	int N = m->B * m->T, K = (int)model_head_rows(m);
	struct model_priv *pv = m->priv;
	double total = 0;
	if (K == N && train) {
		/* the one training head: its device loss, read back */
		model_head_forward_train_dev(m, z, m->be->scal);
		be_download_bytes(m->be, &total, m->be->scal, sizeof(total));
		return total;
	}
	pv->head_z = z;
	pv->head_grads_done = train;
	if (K == N)
		return head_chunk_forward(m, z, 0, N, 0);
	/* chunked: Σ over chunks of rows · chunk mean, in double */
	for (int r0 = 0; r0 < N; r0 += K) {
		int n = N - r0 < K ? N - r0 : K;
		total += (double)n * head_chunk_forward(m, z, r0, n, train);
		if (train)
			head_chunk_grads(m, z, r0, n);
	}
	return total / (double)N;
}

double model_head_forward(struct model *m, const void *z)
{
	return head_forward(m, z, 0);
}

double model_head_forward_train(struct model *m, const void *z)
{
	return head_forward(m, z, 1);
}

void model_head_forward_train_dev(struct model *m, const void *z, double *loss)
{
	int N = m->B * m->T, V = m->cfg.vocab_size;
	struct model_priv *pv = m->priv;
	assert(model_head_rows(m) == (size_t)N);
	pv->head_z = z;
	pv->head_grads_done = 1;
	model_linear_forward(m, m->logits, 0.0, z, m->n_params - 2, N, m->E, V);
	be_xent_train(m->be, m->logits, m->logits, m->targets, N, V,
		      1.0 / (double)N, loss);
	head_chunk_grads(m, z, 0, N);
}

/* Reads the z given to the last model_head_forward: the caller keeps it
 * unchanged in between. */
void model_head_backward(struct model *m)
{
	int N = m->B * m->T, E = m->E, K = (int)model_head_rows(m);
	struct model_priv *pv = m->priv;
	const void *z = pv->head_z;
	if (pv->head_grads_done) {
		/* model_head_forward_train did every chunk's backward */
		pv->head_grads_done = 0;
	} else if (K == N) {
		/* one chunk: the forward left its probabilities */
		be_xent_backward(m->be, m->logits, m->logits, m->targets, N,
				 m->cfg.vocab_size, 1.0 / (double)N);
		head_chunk_grads(m, z, 0, N);
	} else {
		/* each chunk's dlogits again, then its backward */
		for (int r0 = 0; r0 < N; r0 += K) {
			int n = N - r0 < K ? N - r0 : K;
			head_chunk_forward(m, z, r0, n, 1);
			head_chunk_grads(m, z, r0, n);
		}
	}
	/* the rest of the state (trellisnet's c) does not reach the head */
	size_t ne = (size_t)N * E;
	if (m->n_state > ne)
		be_fill(m->be, dq_at(m->be, m->gz, ne), 0.0, m->n_state - ne);
}

void model_inject_backward(struct model *m)
{
	if (m->def->inject_backward) {
		m->def->inject_backward(m);
		return;
	}
	void *G = m->grad_buf;
	void *dx = model_ws(m); /* (N,E), workspace is >= n_state */
	/* dx (N,E) = gu Winj; dWinj (U,E) += guᵀ x; dbinj += Σ rows gu */
	model_linear_backward(m, dx, 0.0, m->gu, m->x, P_INJ_W, m->B * m->T,
			      m->E, m->U, 1);
	be_embed_backward(m->be, model_p(m, G, P_EMBED_W),
			  model_p(m, G, P_POS_W), dx, m->tokens, m->B, m->T,
			  m->E, m->cfg.vocab_size);
}
