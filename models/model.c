/* model.c — the parts every model kind shares: config validation, the
 * parameter table and its seeded initialisation, dispatch to the kind's
 * block through its struct model_def (model_impl.h; the kinds are listed
 * in registry.c), and the bf16 tapes. model_gemm and the bf16 buffers
 * are in model_gemm.c, the head in model_head.c. docs/ARCHITECTURE.md
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/rng.h"
#include "model_impl.h"

int model_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* ----------------------------------------------------------------- names */

static const char *kind_name_at(int i)
{
	return model_registry[i]->name;
}

static const char *const init_names[] = {"gpt2", "pytorch", "deq"};

static const char *init_name_at(int i)
{
	return init_names[i];
}

/* Index of s among the n names name_at(0 .. n-1); -1 when absent. */
static int find_name(const char *s, const char *(*name_at)(int), int n)
{
	for (int i = 0; i < n; i++)
		if (s && strcmp(s, name_at(i)) == 0)
			return i;
	return -1;
}

int model_kind_parse(const char *s)
{
	return find_name(s, kind_name_at, model_registry_len);
}

static const struct model_def *def_of(enum model_kind k)
{
	return ((int)k >= 0 && (int)k < model_registry_len) ? model_registry[k]
							    : NULL;
}

const char *model_kind_name(enum model_kind k)
{
	const struct model_def *d = def_of(k);
	return d ? d->name : "?";
}

int model_kind_count(void)
{
	return model_registry_len;
}

void model_kind_list(char *buf, size_t n)
{
	size_t len = 0;
	if (!n)
		return;
	buf[0] = '\0';
	for (int i = 0; i < model_registry_len && len < n; i++) {
		int w = snprintf(buf + len, n - len, "%s%s", i ? ", " : "",
				 kind_name_at(i));
		len += w > 0 ? (size_t)w : 0;
	}
}

static const char *const attention_names[] = {"unfused", "flash"};
static const char *const epilogue_names[] = {"separate", "fused"};

static const char *attention_at(int i)
{
	return attention_names[i];
}

static const char *epilogue_at(int i)
{
	return epilogue_names[i];
}

int model_attention_parse(const char *s)
{
	return find_name(s, attention_at, 2);
}

const char *model_attention_name(enum model_attention a)
{
	return ((int)a >= 0 && (int)a < 2) ? attention_names[a] : "?";
}

int model_epilogue_parse(const char *s)
{
	return find_name(s, epilogue_at, 2);
}

const char *model_epilogue_name(enum model_epilogue e)
{
	return ((int)e >= 0 && (int)e < 2) ? epilogue_names[e] : "?";
}

int model_init_parse(const char *s)
{
	return find_name(s, init_name_at, 3);
}

const char *model_init_name(enum model_init k)
{
	return ((int)k >= 0 && (int)k < 3) ? init_names[k] : "?";
}

/* ------------------------------------------------------------ parameters */

/* Initialisation (the `init`, `init_std`, `embed_std` keys; docs/models.md
 * "Initialisation" carries the same table). fan_in is the layer's input
 * width times its kernel (nn.Linear: in; nn.Conv1d: in * kernel): inject
 * E (a Conv1d injection k E), qkv / out / ff1 d, ff2 F, block.conv 2h,
 * head E.
 *
 *   tensor            gpt2          pytorch          deq
 *   embed.weight      N(0, 0.02²)   N(0, 1)          N(0, (0.01 √E)²)
 *   pos_embed.weight  N(0, 0.02²)   N(0, 1)          N(0, (0.01 √E)²)
 *   linear/conv W     N(0, 0.02²)   U(±1/√fan_in)    N(0, 0.01²)
 *   their biases      0             U(±1/√fan_in)    0
 *   ln*.weight / bias 1 / 0         1 / 0            1 / 0
 *   R_FIXED           the kind's own under every preset (tanh_cell.c)
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
 * the weights. A kind with a reference of its own replaces this recipe by
 * its init_deq (trellisnet.c: DEQ-TrellisNet's); tanh_cell has no reference
 * and takes this one.
 *
 * init_std > 0 replaces every linear/conv weight's distribution (any
 * preset, any kind; not R_FIXED) by N(0, init_std²); embed_std > 0
 * replaces embed's and pos_embed's by N(0, embed_std²). Each tensor draws
 * from its own stream seeded by (seed, index), whatever the preset: a
 * preset changes scales, not draws (the N(0, 0.02²) weights of gpt2
 * are exactly twice deq's N(0, 0.01²) ones), and gpt2 is bitwise the init
 * before presets existed. Why each kind's block is well posed at init: in
 * its file (tanh_cell.c, trellisnet.c); the transformer's post-LN block is
 * not a contraction at the gpt2 init. */

static int is_weight(enum param_role r)
{
	return r == R_INJ_W || r == R_BLOCK_W || r == R_HEAD_W;
}

static int is_bias(enum param_role r)
{
	return r == R_INJ_B || r == R_BLOCK_B || r == R_HEAD_B;
}

/* Sets p->init and p->a from the preset and the overrides of c; E is the
 * embedding width. */
static void spec_init(const struct model_def *def, const struct model_config *c,
		      int E, struct param_spec *p)
{
	enum param_role r = p->role;
	if (r == R_LN_W || r == R_LN_B) {
		p->init = INIT_CONST, p->a = r == R_LN_W ? 1.0 : 0.0;
		return;
	}
	if (r == R_FIXED)
		return;
	if (c->init == MODEL_INIT_PYTORCH) {
		if (r == R_EMBED || r == R_POS)
			p->init = INIT_NORMAL, p->a = 1.0;
		else
			p->init = INIT_UNIFORM,
			p->a = 1.0 / sqrt((double)p->fan_in);
	} else if (c->init == MODEL_INIT_DEQ && def->init_deq) {
		def->init_deq(p);
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

/* The whole table of c's kind into specs, with each tensor's init;
 * returns the count. Names and shapes exactly as docs/ARCHITECTURE.md
 * §Model lists them (PyTorch nn.Linear layout, weight [out, in];
 * nn.Conv1d [out, in, kernel]). U is the injection width, E the embedding
 * width. */
static int param_specs(const struct model_def *def,
		       const struct model_config *c, int U, int E,
		       struct param_spec *s)
{
	int64_t T = c->seq_len, V = c->vocab_size;
	int n = 0;
	int64_t kin = def->inject_kernel;
	int64_t fin = (kin ? kin : 1) * (int64_t)E;
	s[n++] = SPEC("embed.weight", V, E, 0, R_EMBED, 0);
	s[n++] = SPEC("pos_embed.weight", T, E, 0, R_POS, 0);
	s[n++] = SPEC("inject.weight", U, E, kin, R_INJ_W, fin);
	s[n++] = SPEC("inject.bias", U, 0, 0, R_INJ_B, fin);
	n += def->block_specs(c, s + n);
	s[n++] = SPEC("head.weight", V, E, 0, R_HEAD_W, E);
	s[n++] = SPEC("head.bias", V, 0, 0, R_HEAD_B, E);
	for (int i = 0; i < n; i++)
		spec_init(def, c, E, &s[i]);
	return n;
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

static int check_dims(const struct model_def *def, const struct model_config *c,
		      char *err, size_t errlen)
{
	struct {
		const char *key;
		int v;
	} dims[] = {
	    {"d_model", c->d_model},
	    {"seq_len", c->seq_len},
	    {"batch_size", c->batch_size},
	    {"vocab_size", c->vocab_size},
	};
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
		if (dims[i].v <= 0)
			return model_err(err, errlen, "%s=%d must be positive",
					 dims[i].key, dims[i].v);
	}
	if (c->head_chunk < 0)
		return model_err(err, errlen,
				 "head_chunk=%d must be >= 0 (0 = off)",
				 c->head_chunk);
	if (c->attention == MODEL_ATT_FLASH && !def->attention)
		return model_err(err, errlen,
				 "attention=flash: model=%s has no attention; "
				 "use model=transformer or drop attention",
				 def->name);
	if (def->check && def->check(c, err, errlen) != 0)
		return -1;
	/* The ops take int row/column counts: N*max(V, the kind's widest
	 * row) and its extra per position (B*H*T*T for attention) must fit
	 * (the products themselves are formed in size_t inside). */
	struct model_extent x = def->extent(c);
	long long N = (long long)c->batch_size * c->seq_len;
	long long wide = c->vocab_size > x.row ? c->vocab_size : x.row;
	double big = (double)N * (double)wide + (double)N * (double)x.extra;
	if (N > INT_MAX || big > 1e15)
		return model_err(
		    err, errlen,
		    "batch_size=%d seq_len=%d: the activations are too large",
		    c->batch_size, c->seq_len);
	return 0;
}

static int check_init(const struct model_config *c, char *err, size_t errlen)
{
	if ((int)c->init < 0 || (int)c->init > MODEL_INIT_DEQ)
		return model_err(
		    err, errlen,
		    "init=%d is not a known preset; use gpt2, pytorch or deq",
		    (int)c->init);
	if (!(c->init_std >= 0 && isfinite(c->init_std)) ||
	    !(c->embed_std >= 0 && isfinite(c->embed_std)))
		return model_err(err, errlen,
				 "init_std=%g embed_std=%g: each must be a "
				 "finite number >= 0 (0 = the preset's)",
				 c->init_std, c->embed_std);
	return 0;
}

/* The parameter table of specs into m (offsets in one allocation). */
static void param_table(struct model *m, const struct param_spec *specs)
{
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
}

/* Kind, shapes and parameter table of cfg into m (no allocation); the
 * init specs into specs. */
static int shape_init(struct model *m, struct backend *be,
		      const struct model_config *cfg, struct param_spec *specs,
		      char *err, size_t errlen)
{
	const struct model_def *def = def_of(cfg->kind);
	if (!def)
		return model_err(err, errlen, "model: unknown kind %d",
				 (int)cfg->kind);
	if (check_dims(def, cfg, err, errlen) != 0 ||
	    check_init(cfg, err, errlen) != 0)
		return -1;
	m->be = be;
	m->cfg = *cfg;
	m->def = def;
	m->B = cfg->batch_size;
	m->T = cfg->seq_len;
	m->d = def->d_mult * cfg->d_model;
	m->E = cfg->d_model;
	m->U = def->u_mult * cfg->d_model;
	size_t N = (size_t)m->B * m->T;
	m->n_state = N * m->d;
	m->state_parts = def->state_parts;
	m->n_u = N * m->U;
	m->n_params = param_specs(def, cfg, m->U, m->E, specs);
	param_table(m, specs);
	return 0;
}

int model_shape(struct model *m, struct backend *be,
		const struct model_config *cfg, char *err, size_t errlen)
{
	struct param_spec specs[MODEL_MAX_PARAMS];
	memset(m, 0, sizeof(*m));
	return shape_init(m, be, cfg, specs, err, errlen);
}

size_t model_head_rows(const struct model *m)
{
	return model_head_rows_of(m);
}

void model_memory(const struct model *m, size_t bytes[MEM_NCAT])
{
	size_t e = m->be->elem, N = (size_t)m->B * m->T;
	for (int c = 0; c < MEM_NCAT; c++)
		bytes[c] = 0;
	bytes[MEM_PARAMS] = e * m->n_param_elems;
	bytes[MEM_GRADS] = e * m->n_param_elems;
	/* tokens and targets (int32), x, u, gu, logits, gz: model_create */
	bytes[MEM_HEAD] =
	    2 * N * sizeof(int32_t) +
	    e * (N * (size_t)m->E + 2 * m->n_u +
		 model_head_rows(m) * (size_t)m->cfg.vocab_size + m->n_state);
	bytes[MEM_WORKSPACE] =
	    e * m->def->workspace_elems(m) + model_bf16_workspace_bytes(m);
}

/* Device buffers of m: params, grads, head and workspace; -1 with the
 * message when the device is out of memory (model_destroy frees what was
 * allocated). */
static int alloc_device(struct model *m, char *err, size_t errlen)
{
	struct backend *be = m->be;
	struct model_priv *pv = m->priv;
	size_t N = (size_t)m->B * m->T, V = (size_t)m->cfg.vocab_size;
	m->param_buf = backend_alloc(be, m->n_param_elems, MEM_PARAMS);
	m->grad_buf = backend_alloc(be, m->n_param_elems, MEM_GRADS);
	m->tokens = backend_alloc_bytes(be, N * sizeof(int32_t), MEM_HEAD);
	m->targets = backend_alloc_bytes(be, N * sizeof(int32_t), MEM_HEAD);
	m->x = backend_alloc(be, N * (size_t)m->E, MEM_HEAD);
	m->u = backend_alloc(be, m->n_u, MEM_HEAD);
	m->gu = backend_alloc(be, m->n_u, MEM_HEAD);
	m->logits = backend_alloc(be, model_head_rows(m) * V, MEM_HEAD);
	m->gz = backend_alloc(be, m->n_state, MEM_HEAD);
	pv->ws = backend_alloc(be, pv->ws_elems, MEM_WORKSPACE);
	if (!m->param_buf || !m->grad_buf || !m->tokens || !m->targets ||
	    !m->x || !m->u || !m->gu || !m->logits || !m->gz || !pv->ws)
		return model_err(
		    err, errlen,
		    "out of device memory creating model=%s (d_model=%d "
		    "batch_size=%d seq_len=%d vocab_size=%d)",
		    model_kind_name(m->cfg.kind), m->cfg.d_model, m->B, m->T,
		    m->cfg.vocab_size);
	return 0;
}

int model_create(struct model **out, struct backend *be,
		 const struct model_config *cfg, char *err, size_t errlen)
{
	struct param_spec specs[MODEL_MAX_PARAMS];
	struct model *m = calloc(1, sizeof(*m));
	struct model_priv *pv = calloc(1, sizeof(*pv));
	double *host = NULL;

	*out = NULL;
	if (!m || !pv) {
		free(m);
		free(pv);
		return model_err(err, errlen,
				 "out of host memory creating the model");
	}
	if (shape_init(m, be, cfg, specs, err, errlen) != 0) {
		free(m);
		free(pv);
		return -1;
	}
	m->priv = pv;
	size_t N = (size_t)m->B * m->T, np = m->n_param_elems;
	pv->ws_elems = m->def->workspace_elems(m);
	pv->staging = malloc(2 * N * sizeof(int32_t));
	host = malloc(sizeof(double) * (np ? np : 1));
	if (!pv->staging || !host) {
		snprintf(err, errlen, "out of host memory creating the model");
		goto fail;
	}
	if (alloc_device(m, err, errlen) != 0)
		goto fail;
	if (model_bf16_alloc(m) != 0) {
		model_err(err, errlen,
			  "out of device memory for precision=bf16's workspace "
			  "(one fp32 tape and %zu bytes of GEMM operands); "
			  "lower batch_size or seq_len",
			  pv->gemm_scratch_bytes);
		goto fail;
	}
	init_values(m, specs, host);
	be_upload(be, m->param_buf, host, np);
	model_bf16_cast(m);
	free(host);
	/* Tokens 0 until the first batch, so a forward before
	 * model_set_batch reads valid ids. */
	memset(pv->staging, 0, 2 * N * sizeof(int32_t));
	be_upload_bytes(be, m->tokens, pv->staging, N * sizeof(int32_t));
	be_upload_bytes(be, m->targets, pv->staging, N * sizeof(int32_t));
	model_zero_grads(m);
	*out = m;
	return 0;

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
		if (pv) {
			backend_free(be, pv->ws);
			backend_free(be, pv->tape32);
			backend_free(be, pv->gemm_scratch);
			backend_free(be, pv->wcast);
		}
	}
	if (pv)
		free(pv->staging);
	free(pv);
	free(m);
}

/* ------------------------------------------------------------- the block */

size_t model_tape_elems(const struct model *m)
{
	return m->def->tape_elems(m);
}

void model_block_forward(struct model *m, void *z_out, const void *z_in,
			 const void *u, void *tape)
{
	struct model_priv *pv = m->priv;
	if (!tape || m->cfg.precision != DQ_PREC_BF16) {
		m->def->forward(m, z_out, z_in, u, tape);
		return;
	}
	/* bf16: the fp32 tape in tape32, stored rounded (below, precision=bf16) */
	m->def->forward(m, z_out, z_in, u, pv->tape32);
	be_to_bf16(m->be, tape, pv->tape32, model_tape_elems(m));
}

void model_block_vjp(struct model *m, void *gz_in, void *gu, const void *gz_out,
		     const void *tape, int param_grads)
{
	struct model_priv *pv = m->priv;
	if (m->cfg.precision == DQ_PREC_BF16) {
		be_from_bf16(m->be, pv->tape32, tape, model_tape_elems(m));
		tape = pv->tape32;
	}
	m->def->vjp(m, gz_in, gu, gz_out, tape, param_grads);
}

int model_kind_has_selective(enum model_kind k)
{
	return (int)k >= 0 && (int)k < model_registry_len &&
	       model_registry[k]->sel_vjp != NULL;
}

int model_has_selective(const struct model *m)
{
	return m->def->sel_vjp != NULL;
}

size_t model_sel_tape_elems(const struct model *m)
{
	assert(model_has_selective(m));
	return m->def->sel_tape_elems(m);
}

size_t model_sel_tape_bytes(const struct model *m)
{
	size_t e =
	    m->cfg.precision == DQ_PREC_BF16 ? sizeof(uint16_t) : m->be->elem;
	return e * model_sel_tape_elems(m);
}

size_t model_sel_scratch_bytes(const struct model *m)
{
	assert(model_has_selective(m));
	return m->be->elem * m->def->sel_scratch_elems(m);
}

/* As model_block_forward; tape32 holds a full fp32 tape, so a selective
 * one fits. */
void model_block_forward_sel(struct model *m, void *z_out, const void *z_in,
			     const void *u, void *tape)
{
	struct model_priv *pv = m->priv;
	assert(tape && model_has_selective(m));
	if (m->cfg.precision != DQ_PREC_BF16) {
		m->def->sel_forward(m, z_out, z_in, u, tape);
		return;
	}
	m->def->sel_forward(m, z_out, z_in, u, pv->tape32);
	be_to_bf16(m->be, tape, pv->tape32, model_sel_tape_elems(m));
}

void model_block_vjp_sel(struct model *m, void *gz_in, void *gu,
			 const void *gz_out, const void *tape, void *scratch,
			 int param_grads)
{
	struct model_priv *pv = m->priv;
	assert(model_has_selective(m));
	if (m->cfg.precision == DQ_PREC_BF16) {
		be_from_bf16(m->be, pv->tape32, tape, model_sel_tape_elems(m));
		tape = pv->tape32;
	}
	m->def->sel_vjp(m, gz_in, gu, gz_out, tape, scratch, param_grads);
}

void model_sel_recompute(struct model *m, void *scratch, const void *tape)
{
	struct model_priv *pv = m->priv;
	assert(model_has_selective(m));
	if (m->cfg.precision == DQ_PREC_BF16) {
		be_from_bf16(m->be, pv->tape32, tape, model_sel_tape_elems(m));
		tape = pv->tape32;
	}
	m->def->sel_recompute(m, scratch, tape);
}

double model_sel_recompute_flops(const struct model *m)
{
	assert(model_has_selective(m));
	return m->def->sel_flops(m);
}

double model_block_flops(const struct model *m)
{
	return m->def->flops(m);
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
