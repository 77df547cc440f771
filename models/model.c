/* model.c — the parts every model kind shares: config validation, the
 * parameter table and its seeded initialisation, the head (embeddings,
 * injection, LM projection, cross-entropy) and dispatch to the per-kind
 * block (transformer.c, tanh_cell.c, trellisnet.c). ../shared/DESIGN.md
 * §Model.
 *
 * Letters: B batch, T sequence, N = B*T positions, d state width, E
 * embedding width = head input width (d, or h = d/2 for trellisnet), U
 * injection width, V vocabulary.
 *
 * Gradient rule: every backward here ADDs (+=) into the parameter
 * gradients; model_zero_grads clears them (and m->gu) once per step.
 */
#include "model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"

static const char *const kind_names[] = {"transformer", "tanh_cell",
					 "trellisnet"};

int model_kind_parse(const char *s)
{
	for (int i = 0; i < 3; i++)
		if (s && strcmp(s, kind_names[i]) == 0)
			return i;
	return -1;
}

const char *model_kind_name(enum model_kind k)
{
	return ((int)k >= 0 && (int)k < 3) ? kind_names[k] : "?";
}

static const char *const init_names[] = {"gpt2", "pytorch", "deq"};

int model_init_parse(const char *s)
{
	for (int i = 0; i < 3; i++)
		if (s && strcmp(s, init_names[i]) == 0)
			return i;
	return -1;
}

const char *model_init_name(enum model_init k)
{
	return ((int)k >= 0 && (int)k < 3) ? init_names[k] : "?";
}

/* ------------------------------------------------------------ parameters */

/* Initialisation (the `init`, `init_std`, `embed_std` keys; README
 * "Initialisation" carries the same table). fan_in is the layer's input
 * width times its kernel (nn.Linear: in; nn.Conv1d: in * kernel): inject
 * E (trellisnet 2E), qkv / out / ff1 d, ff2 F, block.conv 2h, head E.
 *
 *   tensor            gpt2          pytorch          deq
 *   embed.weight      N(0, 0.02²)   N(0, 1)          N(0, (0.01 √E)²)
 *   pos_embed.weight  N(0, 0.02²)   N(0, 1)          N(0, (0.01 √E)²)
 *   linear/conv W     N(0, 0.02²)   U(±1/√fan_in)    N(0, 0.01²)
 *   their biases      0             U(±1/√fan_in)    0
 *   ln*.weight / bias 1 / 0         1 / 0            1 / 0
 *   cell.weight       N(0, (0.25/√d)²) under every preset
 *
 * "linear/conv W" is inject.weight, the block's weights (qkv, out, ff1,
 * ff2; block.conv) and head.weight. U(±b) is drawn as b (2 u − 1) with u
 * uniform in (0, 1], so in (−b, b]; nn.Linear's kaiming_uniform_(a = √5)
 * has bound gain √(3 / fan_in) with gain √(2 / (1 + 5)), i.e. 1/√fan_in.
 *
 * deq is the locuslab DEQ-Transformer training script's weights_init: every
 * nn.Linear / nn.Conv1d weight and nn.Embedding N(0, init_std²) with its
 * default init_std 0.01, biases 0, and AdaptiveEmbedding multiplying the
 * embedding by emb_scale = √d_model in its forward, folded here into the
 * init (so under Adam the embedding moves √E times slower relative to its
 * scale than the reference's); its LayerNorm has no affine parameters (1 /
 * 0 here); it has no learned positions (sinusoidal relative ones) and ties
 * the head to the (unscaled) embedding: pos_embed follows embed, head.weight
 * the weights. tanh_cell has no reference and takes the same. trellisnet
 * takes DEQ-TrellisNet's own (deq_trellisnet.py): embed (its encoder) and
 * head.weight (its decoder, tied to the encoder) U(±0.1), head.bias 0,
 * block.conv weight and bias N(0, 0.01²) (WeightShareConv1d; weight
 * normalisation leaves the weight unchanged at init), inject.weight and
 * inject.bias PyTorch's Conv1d default U(±1/√(2E)), pos_embed 0 (the
 * reference has no positions).
 *
 * init_std > 0 replaces every linear/conv weight's distribution (any
 * preset, any kind; not cell.weight) by N(0, init_std²); embed_std > 0
 * replaces embed's and pos_embed's by N(0, embed_std²). Each tensor draws
 * from its own stream seeded by (seed, index), whatever the preset: a
 * preset changes scales, not draws (the N(0, 0.02²) weights of gpt2
 * are exactly twice deq's N(0, 0.01²) ones), and gpt2 is bitwise the init
 * before presets existed. Why each kind's block is well posed at init: tanh_cell below,
 * trellisnet in trellisnet.c; the transformer's post-LN block is not a
 * contraction at the gpt2 init (issue 11). */

/* What a tensor is, for the presets. */
enum param_role {
	R_EMBED,
	R_POS,
	R_INJ_W,
	R_INJ_B,
	R_BLOCK_W,
	R_BLOCK_B,
	R_LN_W,
	R_LN_B,
	R_CELL,
	R_HEAD_W,
	R_HEAD_B,
};

enum init_kind { INIT_NORMAL, INIT_UNIFORM, INIT_CONST };

/* Table entry plus how to initialise it. */
struct param_spec {
	const char *name;
	int64_t rows, cols; /* cols = 0: a vector of `rows` */
	int64_t kern;	    /* > 0: a Conv1d weight [rows, cols, kern] */
	enum param_role role;
	int64_t fan_in; /* of the layer (weights and biases) */
	enum init_kind init;
	double a; /* NORMAL: std; UNIFORM: bound b of (−b, b]; CONST: value */
};

static int is_weight(enum param_role r)
{
	return r == R_INJ_W || r == R_BLOCK_W || r == R_HEAD_W;
}

static int is_bias(enum param_role r)
{
	return r == R_INJ_B || r == R_BLOCK_B || r == R_HEAD_B;
}

/* DEQ-TrellisNet's init (see above). */
static void init_deq_trellisnet(struct param_spec *p)
{
	double fb = 1.0 / sqrt((double)p->fan_in);
	switch (p->role) {
	case R_EMBED:
	case R_HEAD_W:
		p->init = INIT_UNIFORM, p->a = 0.1;
		break;
	case R_INJ_W:
	case R_INJ_B:
		p->init = INIT_UNIFORM, p->a = fb;
		break;
	case R_BLOCK_W:
	case R_BLOCK_B:
		p->init = INIT_NORMAL, p->a = 0.01;
		break;
	default: /* pos_embed, head.bias */
		p->init = INIT_CONST, p->a = 0.0;
	}
}

/* Sets p->init and p->a from the preset and the overrides of c; E is the
 * embedding width. */
static void spec_init(const struct model_config *c, int E, struct param_spec *p)
{
	enum param_role r = p->role;
	if (r == R_LN_W || r == R_LN_B) {
		p->init = INIT_CONST, p->a = r == R_LN_W ? 1.0 : 0.0;
		return;
	}
	if (r == R_CELL) {
		p->init = INIT_NORMAL, p->a = 0.25 / sqrt((double)c->d_model);
		return;
	}
	if (c->init == MODEL_INIT_PYTORCH) {
		if (r == R_EMBED || r == R_POS)
			p->init = INIT_NORMAL, p->a = 1.0;
		else
			p->init = INIT_UNIFORM,
			p->a = 1.0 / sqrt((double)p->fan_in);
	} else if (c->init == MODEL_INIT_DEQ && c->kind == MODEL_TRELLISNET) {
		init_deq_trellisnet(p);
	} else if (c->init == MODEL_INIT_DEQ) {
		if (r == R_EMBED || r == R_POS)
			p->init = INIT_NORMAL, p->a = 0.01 * sqrt((double)E);
		else if (is_bias(r))
			p->init = INIT_CONST, p->a = 0.0;
		else
			p->init = INIT_NORMAL, p->a = 0.01;
	} else {
		if (is_bias(r))
			p->init = INIT_CONST, p->a = 0.0;
		else
			p->init = INIT_NORMAL, p->a = 0.02;
	}
	if (c->init_std > 0 && is_weight(r))
		p->init = INIT_NORMAL, p->a = c->init_std;
	if (c->embed_std > 0 && (r == R_EMBED || r == R_POS))
		p->init = INIT_NORMAL, p->a = c->embed_std;
}

#define SPEC(nm, r, c, k, role, fin)                                           \
	(struct param_spec)                                                    \
	{                                                                      \
		nm, r, c, k, role, fin, INIT_CONST, 0                          \
	}

/* Appends the block table of the transformer (d, F) to s. */
static int transformer_specs(int64_t d, int64_t F, struct param_spec *s)
{
	int n = 0;
	s[n++] = SPEC("block.attn.qkv.weight", 3 * d, d, 0, R_BLOCK_W, d);
	s[n++] = SPEC("block.attn.qkv.bias", 3 * d, 0, 0, R_BLOCK_B, d);
	s[n++] = SPEC("block.attn.out.weight", d, d, 0, R_BLOCK_W, d);
	s[n++] = SPEC("block.attn.out.bias", d, 0, 0, R_BLOCK_B, d);
	s[n++] = SPEC("block.ln1.weight", d, 0, 0, R_LN_W, 0);
	s[n++] = SPEC("block.ln1.bias", d, 0, 0, R_LN_B, 0);
	s[n++] = SPEC("block.ff1.weight", F, d, 0, R_BLOCK_W, d);
	s[n++] = SPEC("block.ff1.bias", F, 0, 0, R_BLOCK_B, d);
	s[n++] = SPEC("block.ff2.weight", d, F, 0, R_BLOCK_W, F);
	s[n++] = SPEC("block.ff2.bias", d, 0, 0, R_BLOCK_B, F);
	s[n++] = SPEC("block.ln2.weight", d, 0, 0, R_LN_W, 0);
	s[n++] = SPEC("block.ln2.bias", d, 0, 0, R_LN_B, 0);
	return n;
}

/* Appends the table of cfg's kind to specs, with each tensor's init;
 * returns the count. Names and shapes exactly as ../shared/DESIGN.md lists
 * them (PyTorch nn.Linear layout, weight [out, in]; nn.Conv1d [out, in,
 * kernel] for trellisnet). tanh_cell's cell.weight N(0, (0.25/√d)²) has
 * spectral norm about 0.25 * 2 = 0.5 for a square Gaussian matrix
 * (Marchenko-Pastur edge 2 σ √d), so the cell is a contraction whatever
 * the injection. U is the injection width, E the embedding width. */
static int param_specs(const struct model_config *c, int U, int E,
		       struct param_spec *s)
{
	int64_t d = c->d_model, T = c->seq_len, V = c->vocab_size;
	int n = 0;
	int64_t kin = c->kind == MODEL_TRELLISNET ? 2 : 0;
	int64_t fin = kin ? 2 * (int64_t)E : E;
	s[n++] = SPEC("embed.weight", V, E, 0, R_EMBED, 0);
	s[n++] = SPEC("pos_embed.weight", T, E, 0, R_POS, 0);
	s[n++] = SPEC("inject.weight", U, E, kin, R_INJ_W, fin);
	s[n++] = SPEC("inject.bias", U, 0, 0, R_INJ_B, fin);
	if (c->kind == MODEL_TRELLISNET) {
		s[n++] =
		    SPEC("block.conv.weight", 4 * d, d, 2, R_BLOCK_W, 2 * d);
		s[n++] = SPEC("block.conv.bias", 4 * d, 0, 0, R_BLOCK_B, 2 * d);
	} else if (c->kind == MODEL_TRANSFORMER) {
		n += transformer_specs(d, c->d_ff, s + n);
	} else {
		s[n++] = SPEC("cell.weight", d, d, 0, R_CELL, d);
	}
	s[n++] = SPEC("head.weight", V, E, 0, R_HEAD_W, E);
	s[n++] = SPEC("head.bias", V, 0, 0, R_HEAD_B, E);
	for (int i = 0; i < n; i++)
		spec_init(c, E, &s[i]);
	return n;
}

/* splitmix64 (Steele, Lea, Flood 2014): a tiny seedable generator whose
 * output is the same on every platform. */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in (0, 1]: 53 random bits, never 0 (log below). */
static double uniform01(uint64_t *s)
{
	return ((double)(splitmix64(s) >> 11) + 1.0) * 0x1.0p-53;
}

/* Fills host values of every parameter; each tensor draws from its own
 * stream seeded by (seed, index), so one tensor's shape does not shift
 * another's values. Normal: Box-Muller, both outputs used; uniform: one
 * draw per element. */
static void init_values(const struct model *m, const struct param_spec *s,
			double *v)
{
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		double *x = v + p->offset;
		uint64_t st = m->cfg.seed ^ (0xd1b54a32d192ed03ull * (i + 1));
		if (s[i].init == INIT_CONST) {
			for (size_t k = 0; k < p->numel; k++)
				x[k] = s[i].a;
			continue;
		}
		if (s[i].init == INIT_UNIFORM) {
			for (size_t k = 0; k < p->numel; k++)
				x[k] = s[i].a * (2.0 * uniform01(&st) - 1.0);
			continue;
		}
		for (size_t k = 0; k < p->numel; k += 2) {
			double r = sqrt(-2.0 * log(uniform01(&st)));
			double th = 2.0 * M_PI * uniform01(&st);
			x[k] = s[i].a * r * cos(th);
			if (k + 1 < p->numel)
				x[k + 1] = s[i].a * r * sin(th);
		}
	}
}

/* --------------------------------------------------------------- create */

static int check_dims(const struct model_config *c, char *err, size_t errlen)
{
	struct {
		const char *key;
		int v;
		int needed;
	} dims[] = {
	    {"d_model", c->d_model, 1},
	    {"n_heads", c->n_heads, c->kind == MODEL_TRANSFORMER},
	    {"d_ff", c->d_ff, c->kind == MODEL_TRANSFORMER},
	    {"seq_len", c->seq_len, 1},
	    {"batch_size", c->batch_size, 1},
	    {"vocab_size", c->vocab_size, 1},
	};
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
		if (dims[i].needed && dims[i].v <= 0) {
			snprintf(err, errlen, "%s=%d must be positive",
				 dims[i].key, dims[i].v);
			return -1;
		}
	}
	if (c->kind == MODEL_TRANSFORMER && c->d_model % c->n_heads != 0) {
		snprintf(err, errlen,
			 "d_model=%d is not divisible by n_heads=%d",
			 c->d_model, c->n_heads);
		return -1;
	}
	/* The ops take int row/column counts: N*max(V,3d,F) and B*H*T*T must
	 * fit (the products themselves are formed in size_t inside). */
	long long N = (long long)c->batch_size * c->seq_len;
	long long wide = c->vocab_size;
	if (3LL * c->d_model > wide)
		wide = 3LL * c->d_model;
	if (c->kind == MODEL_TRELLISNET && 4LL * c->d_model > wide)
		wide = 4LL * c->d_model;
	if (c->kind == MODEL_TRANSFORMER && c->d_ff > wide)
		wide = c->d_ff;
	double big = (double)N * (double)wide;
	if (c->kind == MODEL_TRANSFORMER)
		big += (double)N * c->n_heads * c->seq_len;
	/* trellisnet transposes its conv weights with one gemm whose N is
	 * 4 d_model² (trellisnet.c) */
	if (c->kind == MODEL_TRELLISNET &&
	    4LL * c->d_model * c->d_model > INT_MAX) {
		snprintf(err, errlen,
			 "d_model=%d is too large for model=trellisnet "
			 "(4*d_model^2 must be at most %d)",
			 c->d_model, INT_MAX);
		return -1;
	}
	if (N > INT_MAX || big > 1e15) {
		snprintf(err, errlen,
			 "batch_size=%d seq_len=%d: the activations are too "
			 "large",
			 c->batch_size, c->seq_len);
		return -1;
	}
	return 0;
}

static int check_init(const struct model_config *c, char *err, size_t errlen)
{
	if ((int)c->init < 0 || (int)c->init > MODEL_INIT_DEQ) {
		snprintf(err, errlen,
			 "init=%d is not a known preset; use gpt2, pytorch or "
			 "deq",
			 (int)c->init);
		return -1;
	}
	if (!(c->init_std >= 0 && isfinite(c->init_std)) ||
	    !(c->embed_std >= 0 && isfinite(c->embed_std))) {
		snprintf(err, errlen,
			 "init_std=%g embed_std=%g: each must be a finite "
			 "number >= 0 (0 = the preset's)",
			 c->init_std, c->embed_std);
		return -1;
	}
	return 0;
}

/* Kind, shapes and parameter table of cfg into m (no allocation); the
 * init specs into specs. */
static int shape_init(struct model *m, struct backend *be,
		      const struct model_config *cfg, struct param_spec *specs,
		      char *err, size_t errlen)
{
	if (cfg->kind != MODEL_TRANSFORMER && cfg->kind != MODEL_TANH_CELL &&
	    cfg->kind != MODEL_TRELLISNET) {
		snprintf(err, errlen, "model: unknown kind %d", (int)cfg->kind);
		return -1;
	}
	if (check_dims(cfg, err, errlen) != 0 ||
	    check_init(cfg, err, errlen) != 0)
		return -1;
	m->be = be;
	m->cfg = *cfg;
	m->B = cfg->batch_size;
	m->T = cfg->seq_len;
	m->d = cfg->d_model;
	m->E = cfg->d_model;
	switch (cfg->kind) {
	case MODEL_TRANSFORMER:
		m->ops = &model_transformer_ops;
		m->U = 3 * m->d;
		break;
	case MODEL_TANH_CELL:
		m->ops = &model_tanh_cell_ops;
		m->U = m->d;
		break;
	case MODEL_TRELLISNET: /* z = [h; c], u = the four gates */
		m->ops = &model_trellisnet_ops;
		m->d = 2 * cfg->d_model;
		m->U = 4 * cfg->d_model;
		break;
	}
	size_t N = (size_t)m->B * m->T;
	m->n_state = N * m->d;
	m->state_parts = cfg->kind == MODEL_TRELLISNET ? 2 : 1;
	m->n_u = N * m->U;

	m->n_params = param_specs(cfg, m->U, m->E, specs);
	size_t off = 0;
	for (int i = 0; i < m->n_params; i++) {
		struct model_param *p = &m->params[i];
		p->name = specs[i].name;
		p->ndim = specs[i].kern ? 3 : specs[i].cols ? 2 : 1;
		p->shape[0] = specs[i].rows;
		p->shape[1] = specs[i].cols;
		p->shape[2] = specs[i].kern;
		p->numel = (size_t)specs[i].rows *
			   (size_t)(specs[i].cols ? specs[i].cols : 1) *
			   (size_t)(specs[i].kern ? specs[i].kern : 1);
		p->offset = off;
		off += p->numel;
	}
	m->n_param_elems = off;
	return 0;
}

int model_shape(struct model *m, struct backend *be,
		const struct model_config *cfg, char *err, size_t errlen)
{
	struct param_spec specs[MODEL_MAX_PARAMS];
	memset(m, 0, sizeof(*m));
	return shape_init(m, be, cfg, specs, err, errlen);
}

void model_memory(const struct model *m, size_t bytes[MEM_NCAT])
{
	size_t e = m->be->elem, N = (size_t)m->B * m->T;
	for (int c = 0; c < MEM_NCAT; c++)
		bytes[c] = 0;
	bytes[MEM_PARAMS] = e * m->n_param_elems;
	bytes[MEM_GRADS] = e * m->n_param_elems;
	/* tokens and targets (int32), x, u, gu, logits, gz: model_create */
	bytes[MEM_HEAD] = 2 * N * sizeof(int32_t) +
			  e * (N * (size_t)m->E + 2 * m->n_u +
			       N * (size_t)m->cfg.vocab_size + m->n_state);
	bytes[MEM_WORKSPACE] = e * m->ops->workspace_elems(m);
}

int model_create(struct model **out, struct backend *be,
		 const struct model_config *cfg, char *err, size_t errlen)
{
	struct param_spec specs[MODEL_MAX_PARAMS];
	struct model *m = NULL;
	struct model_priv *pv = NULL;
	double *host = NULL;
	size_t N, off;

	*out = NULL;
	m = calloc(1, sizeof(*m));
	pv = calloc(1, sizeof(*pv));
	if (!m || !pv) {
		free(m);
		free(pv);
		snprintf(err, errlen, "out of host memory creating the model");
		return -1;
	}
	if (shape_init(m, be, cfg, specs, err, errlen) != 0) {
		free(m);
		free(pv);
		return -1;
	}
	m->priv = pv;
	N = (size_t)m->B * m->T;
	off = m->n_param_elems;

	pv->ws_elems = m->ops->workspace_elems(m);
	pv->staging = malloc(2 * N * sizeof(int32_t));
	host = malloc(sizeof(double) * (off ? off : 1));
	if (!pv->staging || !host)
		goto oom_host;

	size_t V = (size_t)cfg->vocab_size;
	m->param_buf = backend_alloc(be, off, MEM_PARAMS);
	m->grad_buf = backend_alloc(be, off, MEM_GRADS);
	m->tokens = backend_alloc_bytes(be, N * sizeof(int32_t), MEM_HEAD);
	m->targets = backend_alloc_bytes(be, N * sizeof(int32_t), MEM_HEAD);
	m->x = backend_alloc(be, N * (size_t)m->E, MEM_HEAD);
	m->u = backend_alloc(be, m->n_u, MEM_HEAD);
	m->gu = backend_alloc(be, m->n_u, MEM_HEAD);
	m->logits = backend_alloc(be, N * V, MEM_HEAD);
	m->gz = backend_alloc(be, m->n_state, MEM_HEAD);
	pv->ws = backend_alloc(be, pv->ws_elems, MEM_WORKSPACE);
	if (!m->param_buf || !m->grad_buf || !m->tokens || !m->targets ||
	    !m->x || !m->u || !m->gu || !m->logits || !m->gz || !pv->ws) {
		snprintf(err, errlen,
			 "out of device memory creating model=%s (d_model=%d "
			 "batch_size=%d seq_len=%d vocab_size=%d)",
			 model_kind_name(cfg->kind), cfg->d_model, m->B, m->T,
			 cfg->vocab_size);
		goto fail;
	}

	init_values(m, specs, host);
	be_upload(be, m->param_buf, host, off);
	free(host);
	/* Tokens 0 until the first batch, so a forward before
	 * model_set_batch reads valid ids. */
	memset(pv->staging, 0, 2 * N * sizeof(int32_t));
	be_upload_bytes(be, m->tokens, pv->staging, N * sizeof(int32_t));
	be_upload_bytes(be, m->targets, pv->staging, N * sizeof(int32_t));
	model_zero_grads(m);
	*out = m;
	return 0;

oom_host:
	snprintf(err, errlen, "out of host memory creating the model");
fail:
	free(host);
	model_destroy(m);
	return -1;
}

void model_destroy(struct model *m)
{
	if (!m)
		return;
	struct backend *be = m->be;
	struct model_priv *pv = m->priv;
	if (be) {
		backend_free(be, m->param_buf);
		backend_free(be, m->grad_buf);
		backend_free(be, m->tokens);
		backend_free(be, m->targets);
		backend_free(be, m->x);
		backend_free(be, m->u);
		backend_free(be, m->gu);
		backend_free(be, m->logits);
		backend_free(be, m->gz);
		if (pv)
			backend_free(be, pv->ws);
	}
	if (pv)
		free(pv->staging);
	free(pv);
	free(m);
}

/* ------------------------------------------------------------- the block */

size_t model_tape_elems(const struct model *m)
{
	return m->ops->tape_elems(m);
}

void model_block_forward(struct model *m, void *z_out, const void *z_in,
			 const void *u, void *tape)
{
	m->ops->forward(m, z_out, z_in, u, tape);
}

void model_block_vjp(struct model *m, void *gz_in, void *gu, const void *gz_out,
		     const void *tape, int param_grads)
{
	m->ops->vjp(m, gz_in, gu, gz_out, tape, param_grads);
}

double model_block_flops(const struct model *m)
{
	return m->ops->flops(m);
}

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
			if (row[t] < 0 || row[t] >= V) {
				snprintf(err, errlen,
					 "token id %d at batch row %d, "
					 "position %d is outside [0, "
					 "vocab_size=%d)",
					 (int)row[t], b, t, V);
				return -1;
			}
		}
		memcpy(in + (size_t)b * T, row, (size_t)T * sizeof(int32_t));
		memcpy(tg + (size_t)b * T, row + 1,
		       (size_t)T * sizeof(int32_t));
	}
	be_upload_bytes(m->be, m->tokens, in, N * sizeof(int32_t));
	be_upload_bytes(m->be, m->targets, tg, N * sizeof(int32_t));
	return 0;
}

void model_inject_forward(struct model *m)
{
	if (m->ops->inject_forward) {
		m->ops->inject_forward(m);
		return;
	}
	struct backend *be = m->be;
	void *P = m->param_buf;
	int N = m->B * m->T, E = m->E, U = m->U;
	/* x (N,E) = embed[tok] + pos; u (N,U) = x Winjᵀ + b */
	be_embed_forward(be, m->x, m->tokens, model_p(m, P, P_EMBED_W),
			 model_p(m, P, P_POS_W), m->B, m->T, E);
	be_gemm(be, 0, 1, N, U, E, 1.0, m->x, E, model_p(m, P, P_INJ_W), E, 0.0,
		m->u, U);
	be_bias_forward(be, m->u, model_p(m, P, P_INJ_B), N, U);
}

double model_head_forward(struct model *m, const void *z)
{
	struct backend *be = m->be;
	void *P = m->param_buf;
	int N = m->B * m->T, E = m->E, V = m->cfg.vocab_size;
	int hw = m->n_params - 2, hb = m->n_params - 1;
	((struct model_priv *)m->priv)->head_z = z;
	/* logits (N,V) = z[:, :E] Whᵀ + b, then probabilities in place;
	 * z[:, :E] is the (N,E) matrix at the start of z */
	be_gemm(be, 0, 1, N, V, E, 1.0, z, E, model_p(m, P, hw), E, 0.0,
		m->logits, V);
	be_bias_forward(be, m->logits, model_p(m, P, hb), N, V);
	return be_xent_forward(be, m->logits, m->logits, m->targets, N, V);
}

/* Reads the z given to the last model_head_forward: the caller keeps it
 * unchanged in between. */
void model_head_backward(struct model *m)
{
	struct backend *be = m->be;
	void *P = m->param_buf, *G = m->grad_buf;
	int N = m->B * m->T, E = m->E, V = m->cfg.vocab_size;
	int hw = m->n_params - 2, hb = m->n_params - 1;
	const void *z = ((struct model_priv *)m->priv)->head_z;
	/* dlogits (N,V) = (probs - onehot) / N, in place */
	be_xent_backward(be, m->logits, m->logits, m->targets, N, V,
			 1.0 / (double)N);
	/* gz[:, :E] (N,E) = dlogits Wh; dWh (V,E) += dlogitsᵀ z[:, :E];
	 * dbh += Σ rows */
	be_gemm(be, 0, 0, N, E, V, 1.0, m->logits, V, model_p(m, P, hw), E, 0.0,
		m->gz, E);
	be_gemm(be, 1, 0, V, E, N, 1.0, m->logits, V, z, E, 1.0,
		model_p(m, G, hw), E);
	be_bias_backward(be, model_p(m, G, hb), m->logits, N, V);
	/* the rest of the state (trellisnet's c) does not reach the head */
	size_t ne = (size_t)N * E;
	if (m->n_state > ne)
		be_fill(be, dq_at(m->be, m->gz, ne), 0.0, m->n_state - ne);
}

void model_inject_backward(struct model *m)
{
	if (m->ops->inject_backward) {
		m->ops->inject_backward(m);
		return;
	}
	struct backend *be = m->be;
	void *P = m->param_buf, *G = m->grad_buf;
	int N = m->B * m->T, E = m->E, U = m->U;
	void *dx = model_ws(m); /* (N,E), workspace is >= n_state */
	/* dWinj (U,E) += guᵀ x; dbinj += Σ rows gu; dx (N,E) = gu Winj */
	be_gemm(be, 1, 0, U, E, N, 1.0, m->gu, U, m->x, E, 1.0,
		model_p(m, G, P_INJ_W), E);
	be_bias_backward(be, model_p(m, G, P_INJ_B), m->gu, N, U);
	be_gemm(be, 0, 0, N, E, U, 1.0, m->gu, U, model_p(m, P, P_INJ_W), E,
		0.0, dx, E);
	be_embed_backward(be, model_p(m, G, P_EMBED_W), model_p(m, G, P_POS_W),
			  dx, m->tokens, m->B, m->T, E, m->cfg.vocab_size);
}

void model_zero_grads(struct model *m)
{
	be_fill(m->be, m->grad_buf, 0.0, m->n_param_elems);
	be_fill(m->be, m->gu, 0.0, m->n_u);
}

const struct model_param *model_param_find(const struct model *m,
					   const char *name)
{
	for (int i = 0; i < m->n_params; i++)
		if (strcmp(m->params[i].name, name) == 0)
			return &m->params[i];
	return NULL;
}
