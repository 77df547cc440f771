/* method.c — what every method shares: config defaults, parsing and
 * validation, the resolved parameters, the depth and solver allocations
 * (method_impl.h), dispatch and statistics. */
#include "method.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/rng.h"
#include "method_impl.h"

/* ---------------------------------------------------------- registry */

int method_kind_count(void)
{
	int n = 0;
	while (method_registry[n])
		n++;
	return n;
}

int method_kind_parse(const char *s)
{
	for (int i = 0; s && method_registry[i]; i++)
		if (strcmp(s, method_registry[i]->name) == 0)
			return i;
	return -1;
}

const char *method_kind_name(int k)
{
	return k >= 0 && k < method_kind_count() ? method_registry[k]->name
						 : "?";
}

const char *method_kind_list(void)
{
	static char buf[256];
	size_t len = 0;
	for (int i = 0; method_registry[i] && len < sizeof(buf); i++)
		len +=
		    (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s",
				     i ? ", " : "", method_registry[i]->name);
	return buf;
}

const struct key_desc *method_kind_keys(int k, size_t *n)
{
	*n = k >= 0 && k < method_kind_count() ? method_registry[k]->n_keys : 0;
	return *n ? method_registry[k]->keys : NULL;
}

int method_kind_needs_managed(int k)
{
	return k >= 0 && k < method_kind_count() &&
	       method_registry[k]->needs_managed;
}

int method_kind_needs_selective(int k)
{
	return k >= 0 && k < method_kind_count() &&
	       method_registry[k]->needs_selective;
}

void *method_opts_slot(const struct method_config *c, int k)
{
	return (char *)&c->opts + method_registry[k]->opts_offset;
}

/* The chosen method's descriptor; c->method must be valid. */
static const struct method_desc *desc_of(const struct method_config *c)
{
	return method_registry[c->method];
}

void method_label(const struct method_config *c, char *buf, size_t n)
{
	const struct method_desc *d = desc_of(c);
	size_t l = (size_t)snprintf(buf, n, "%s", d->name);
	if (l + 1 >= n)
		return;
	if (d->label) {
		buf[l++] = ' ';
		d->label(c, buf + l, n - l);
		if (!buf[l])
			buf[l - 1] = 0; /* nothing followed the name */
	} else if (d->uses_layers)
		snprintf(buf + l, n - l, " L=%d", c->layers);
}

void method_candidate_set(struct method_candidate *out, const char *label,
			  int n, const char *const *key,
			  const char *const *value)
{
	assert(n >= 0 && n <= METHOD_CAND_KEYS);
	memset(out, 0, sizeof(*out));
	snprintf(out->label, sizeof(out->label), "%s", label);
	out->n_keys = n;
	for (int j = 0; j < n; j++) {
		out->key[j] = key[j];
		snprintf(out->value[j], sizeof(out->value[j]), "%s", value[j]);
	}
}

int method_candidate(int k, const struct method_config *c, int i,
		     struct method_candidate *out)
{
	const struct method_desc *d;
	if (k < 0 || k >= method_kind_count() || i < 0)
		return 0;
	d = method_registry[k];
	if (d->candidate)
		return d->candidate(c, i, out);
	if (i > 0)
		return 0;
	method_candidate_set(out, d->name, 0, NULL, NULL);
	return 1;
}

/* ------------------------------------------------------------- config */

void method_config_defaults(struct method_config *c)
{
	memset(c, 0, sizeof(*c));
	c->method = method_kind_parse("unroll");
	c->layers = 12;
	for (int i = 0; method_registry[i]; i++)
		if (method_registry[i]->defaults)
			method_registry[i]->defaults(method_opts_slot(c, i));
}

int method_config_validate(const struct method_config *c, char *err,
			   size_t errlen)
{
	const struct method_desc *d;
	if (c->method < 0 || c->method >= method_kind_count()) {
		snprintf(err, errlen, "method=%d is unknown; use one of: %s",
			 c->method, method_kind_list());
		return -1;
	}
	d = desc_of(c);
	/* deq has no depth of its own: layers is the others' */
	if (d->uses_layers && (c->layers < 1 || c->layers > 100000)) {
		snprintf(
		    err, errlen,
		    "layers=%d is out of range; use a value in [1, 100000]",
		    c->layers);
		return -1;
	}
	if (keys_check(d->keys, d->n_keys, method_opts_slot(c, c->method), err,
		       errlen) != 0)
		return -1;
	return d->check
		   ? d->check(c, method_opts_slot(c, c->method), err, errlen)
		   : 0;
}

void method_config_resolve(struct method_config *c)
{
	const struct method_desc *d = desc_of(c);
	if (d->resolve)
		d->resolve(c, method_opts_slot(c, c->method));
	c->resolved = 1;
}

/* Bytes of one tape of layout l: model_tape_bytes, or with l->selective
 * model_sel_tape_bytes (bf16 under precision=bf16). */
static size_t tape_bytes_of(const struct model *m,
			    const struct method_layout *l)
{
	return l->selective ? model_sel_tape_bytes(m) : model_tape_bytes(m);
}

/* Bytes of the selective recompute scratch of layout l (0 without
 * selective tapes or without tapes: inference). */
static size_t sel_scratch_of(const struct model *m,
			     const struct method_layout *l)
{
	return l->selective && l->n_tapes > 0 ? model_sel_scratch_bytes(m) : 0;
}

/* Bytes of the tapes (tape_bytes_of each) and the selective scratch after
 * them, and elements of the states (checkpoints and vectors) of layout l;
 * SIZE_MAX each when they would pass 2^62 (layers=1e5 of a large tape), so
 * sizes saturate instead of wrapping into a small buffer. */
static void depth_sizes(const struct model *m, const struct method_layout *l,
			size_t *tape_bytes, size_t *states)
{
	size_t t = tape_bytes_of(m, l), n = m->n_state;
	int ns = l->n_ckpts + l->n_vecs;
	*tape_bytes = (double)l->n_tapes * (double)t >= 0x1p62
			  ? SIZE_MAX
			  : (size_t)l->n_tapes * t + sel_scratch_of(m, l);
	*states = (double)ns * (double)n >= 0x1p62 ? SIZE_MAX : (size_t)ns * n;
}

/* Bytes of layout l's offloaded tapes, saturating like depth_sizes. */
static size_t host_tape_bytes(const struct model *m,
			      const struct method_layout *l)
{
	size_t t = model_tape_bytes(m);
	return (double)l->n_host_tapes * (double)t >= 0x1p62
		   ? SIZE_MAX
		   : (size_t)l->n_host_tapes * t;
}

void method_evals_layers(const struct method_config *c, long *fwd, long *vjp)
{
	*fwd = *vjp = c->layers;
}

int method_evals_per_step(const struct method_config *cfg, long *fwd, long *vjp)
{
	assert(cfg->resolved && "method_config_resolve the config first");
	if (!desc_of(cfg)->evals)
		return -1;
	desc_of(cfg)->evals(cfg, fwd, vjp);
	return 0;
}

/* Bytes of cfg's tapes outside device memory in MEM_MANAGED (managed 1)
 * or MEM_HOST (0). */
static size_t outside_memory(const struct model *m,
			     const struct method_config *cfg, int managed)
{
	struct method_layout l;
	assert(cfg->resolved && "method_config_resolve the config first");
	memset(&l, 0, sizeof(l));
	desc_of(cfg)->ops->layout(m, cfg, &l);
	return (l.host_managed != 0) == (managed != 0) ? host_tape_bytes(m, &l)
						       : 0;
}

size_t method_host_memory(const struct model *m,
			  const struct method_config *cfg)
{
	return outside_memory(m, cfg, 0);
}

size_t method_managed_memory(const struct model *m,
			     const struct method_config *cfg)
{
	return outside_memory(m, cfg, 1);
}

/* The refusal of selective tapes (method=selective, checkpoint's
 * selective=true) on a kind without them. */
static int selective_refusal(const struct method_config *c,
			     enum model_kind kind, char *err, size_t errlen)
{
	if (method_kind_needs_selective(c->method))
		snprintf(err, errlen,
			 "method=selective recomputes the transformer's "
			 "attention probabilities, which model=%s has none "
			 "of; use method=unroll or checkpoint (k=1 recomputes "
			 "whole blocks)",
			 model_kind_name(kind));
	else
		snprintf(err, errlen,
			 "selective=true recomputes the transformer's "
			 "attention probabilities, which model=%s has none "
			 "of; drop selective (k=1 recomputes whole blocks)",
			 model_kind_name(kind));
	return -1;
}

/* Whether c asks for selective tapes: its method always, or an option. */
static int wants_selective(const struct method_config *c)
{
	const struct method_desc *d = desc_of(c);
	return d->needs_selective || (d->selective && d->selective(c));
}

int method_check_model(const struct method_config *c, enum model_kind kind,
		       char *err, size_t errlen)
{
	if (!wants_selective(c) || model_kind_has_selective(kind))
		return 0;
	return selective_refusal(c, kind, err, errlen);
}

/* -1 with selective_refusal's message when layout l wants selective tapes
 * of a model kind that has none (tanh_cell, trellisnet). */
static int selective_refused(const struct model *m,
			     const struct method_config *c,
			     const struct method_layout *l, char *err,
			     size_t errlen)
{
	if (!l->selective || model_has_selective(m))
		return 0;
	return selective_refusal(c, m->cfg.kind, err, errlen);
}

int method_memory(const struct model *m, const struct method_config *cfg,
		  size_t *depth_bytes, size_t *solver_bytes, char *err,
		  size_t errlen)
{
	struct method_config c = *cfg;
	struct method_layout l;
	size_t tapes, states, solver, e = m->be->elem;
	assert(cfg->resolved && "method_config_resolve the config first");
	if (method_config_validate(&c, err, errlen) != 0)
		return -1;
	memset(&l, 0, sizeof(l));
	desc_of(&c)->ops->layout(m, &c, &l);
	if (selective_refused(m, &c, &l, err, errlen) != 0)
		return -1;
	depth_sizes(m, &l, &tapes, &states);
	solver = solver_mem_bytes(l.solve, l.n_solve, m->n_state, e);
	if (tapes == SIZE_MAX || states == SIZE_MAX || solver == SIZE_MAX ||
	    states > (SIZE_MAX - tapes) / e) {
		snprintf(err, errlen,
			 "method=%s needs more than 2^62 elements of depth or "
			 "solver memory; lower layers, f_history/b_history, "
			 "batch_size or seq_len",
			 method_kind_name(c.method));
		return -1;
	}
	*depth_bytes = tapes + e * states;
	*solver_bytes = solver;
	return 0;
}

/* ------------------------------------------------------------ lifecycle */

int method_create(struct method **out, struct model *m,
		  const struct method_config *cfg, char *err, size_t errlen)
{
	struct method *me;
	*out = NULL;
	assert(cfg->resolved && "method_config_resolve the config first");
	if (method_config_validate(cfg, err, errlen) != 0)
		return -1;
	me = calloc(1, sizeof(*me));
	if (!me) {
		snprintf(err, errlen, "out of host memory creating the method");
		return -1;
	}
	me->m = m;
	me->cfg = *cfg;
	me->rng = 1;
	me->desc = desc_of(&me->cfg);
	me->ops = me->desc->ops;
	me->ops->layout(m, &me->cfg, &me->lay);
	if (selective_refused(m, &me->cfg, &me->lay, err, errlen) != 0) {
		free(me);
		return -1;
	}
	me->tape_bytes = tape_bytes_of(m, &me->lay);

	struct backend *be = m->be;
	size_t tapes, states;
	depth_sizes(m, &me->lay, &tapes, &states);
	if (me->desc->needs_managed && !be_has_managed(be)) {
		snprintf(err, errlen,
			 "method=%s needs unified memory (cudaMallocManaged), "
			 "which backend %s has not; use device=cuda, or "
			 "method=offload",
			 method_kind_name(me->cfg.method), be_name(be));
		method_destroy(me);
		return -1;
	}
	/* the scratch in an allocation of its own, aligned for fp32 after
	 * bf16 tapes of any length */
	size_t scratch = sel_scratch_of(m, &me->lay);
	me->tapes = backend_alloc_bytes(be, tapes - scratch, MEM_DEPTH);
	if (scratch && me->tapes &&
	    !(me->sel_scratch = backend_alloc_bytes(be, scratch, MEM_DEPTH))) {
		backend_free(be, me->tapes);
		me->tapes = NULL;
	}
	me->states = backend_alloc(be, states, MEM_DEPTH);
	if (me->lay.n_host_tapes > 0 &&
	    !(me->host_tapes = backend_alloc_bytes(
		  be, host_tape_bytes(m, &me->lay),
		  me->lay.host_managed ? MEM_MANAGED : MEM_HOST))) {
		snprintf(err, errlen,
			 "out of %s memory for method=%s's %d %s tapes of %zu "
			 "bytes; lower layers, batch_size or seq_len",
			 me->lay.host_managed ? "managed" : "host",
			 method_kind_name(me->cfg.method), me->lay.n_host_tapes,
			 me->lay.host_managed ? "managed" : "offloaded",
			 me->tape_bytes);
		method_destroy(me);
		return -1;
	}
	if (!me->tapes || !me->states) {
		snprintf(err, errlen,
			 "out of device memory for method=%s's depth buffers "
			 "(%d tapes of %zu bytes, %d states); lower layers, "
			 "batch_size or seq_len",
			 method_kind_name(me->cfg.method), me->lay.n_tapes,
			 me->tape_bytes, me->lay.n_ckpts + me->lay.n_vecs);
		method_destroy(me);
		return -1;
	}
	if (me->desc->init && me->desc->init(me, err, errlen) != 0) {
		method_destroy(me);
		return -1;
	}
	if (me->lay.n_solve > 0 &&
	    solver_create(&me->solver, be, m->n_state, me->lay.solve,
			  me->lay.n_solve, err, errlen) != 0) {
		method_destroy(me);
		return -1;
	}
	if (me->solver)
		solver_graphs(me->solver, me->cfg.graphs);
	*out = me;
	return 0;
}

void method_destroy(struct method *me)
{
	if (!me)
		return;
	backend_free(me->m->be, me->tapes);
	backend_free(me->m->be, me->sel_scratch);
	backend_free(me->m->be, me->states);
	backend_free(me->m->be, me->host_tapes);
	be_graph_free(me->m->be, me->gfwd.g);
	be_graph_free(me->m->be, me->gbwd.g);
	solver_destroy(me->solver);
	free(me->host);
	free(me);
}

/* ------------------------------------------------------- CUDA graphs */

/* Whether me's forward and backward run as recorded graphs: cfg.graphs
 * on a backend with graphs, for a method whose passes issue only device
 * work (method_desc.graphable). */
static int graphed(const struct method *me)
{
	return me->cfg.graphs && me->desc->graphable &&
	       be_has_graphs(me->m->be);
}

/* a + sign · b, unit by unit (struct method_work). */
static struct method_work work_sum(struct method_work a, int sign,
				   struct method_work b)
{
	struct method_work d = {
	    a.block_fwd_taped + sign * b.block_fwd_taped,
	    a.block_fwd + sign * b.block_fwd,
	    a.block_fwd_recompute + sign * b.block_fwd_recompute,
	    a.block_vjp + sign * b.block_vjp,
	    a.block_vjp_input + sign * b.block_vjp_input,
	    a.solver_update + sign * b.solver_update,
	    a.solver_history_sum + sign * b.solver_history_sum,
	    a.attn_recompute + sign * b.attn_recompute,
	};
	return d;
}

/* The forward (train >= 0: a = u, b = z) or the backward (train = -1:
 * a = ḡ, b = gu) as a graph: recorded the first time and whenever a, b,
 * train or the forward's u (which a backward's recomputation reads)
 * differ from the recording's, replayed otherwise. The evaluation
 * counts are the recording's (fixed by the config for these methods). */
static void graph_run(struct method *me, struct method_graph *mg, const void *a,
		      void *b, int train)
{
	const struct backend *be = me->m->be;
	long f0 = me->st.forward_evals, v0 = me->st.vjp_evals;
	struct method_work w0 = me->st.work;
	if (!mg->g || mg->a != a || mg->b != b || mg->train != train ||
	    mg->u != me->u) {
		be_graph_free(be, mg->g);
		be_graph_begin(be);
		if (train >= 0)
			me->ops->forward(me, a, b, train);
		else
			me->ops->backward(me, a, b);
		mg->g = be_graph_end(be);
		mg->a = a, mg->b = b, mg->train = train, mg->u = me->u;
		mg->fwd = me->st.forward_evals - f0;
		mg->vjp = me->st.vjp_evals - v0;
		mg->work = work_sum(me->st.work, -1, w0);
	}
	be_graph_launch(be, mg->g);
	me->st.forward_evals = f0 + mg->fwd;
	me->st.vjp_evals = v0 + mg->vjp;
	me->st.work = work_sum(w0, 1, mg->work);
}

void method_forward(struct method *me, const void *u, void *z, int train)
{
	if (train && me->cfg.inference) {
		fprintf(stderr, "deqbench: a training forward on a method "
				"created for inference\n");
		abort();
	}
	memset(&me->st, 0, sizeof(me->st));
	me->have_train = train != 0;
	me->eval_forward = train == 0;
	me->u = u; /* backward recomputation reads it; the caller keeps it */
	if (graphed(me))
		graph_run(me, &me->gfwd, u, z, train);
	else
		me->ops->forward(me, u, z, train);
}

void method_backward(struct method *me, const void *gz, void *gu)
{
	if (!me->have_train) {
		fprintf(stderr, "deqbench: method_backward without a training "
				"forward\n");
		abort();
	}
	if (graphed(me))
		graph_run(me, &me->gbwd, gz, gu, -1);
	else
		me->ops->backward(me, gz, gu);
	me->have_train = 0;
}

const struct method_stats *method_get_stats(const struct method *me)
{
	return &me->st;
}

void method_restore_stats(struct method *me, const struct method_stats *st)
{
	me->st = *st;
}

const void *method_fixed_point(const struct method *me)
{
	return me->zstar;
}

const struct method_config *method_get_config(const struct method *me)
{
	return &me->cfg;
}

void method_seed(struct method *me, uint64_t seed)
{
	me->rng = seed;
	me->probe_valid = 0;
}

const double *method_jac_probe(const struct method *me)
{
	return me->probe_valid ? me->host : NULL;
}

double method_u01(struct method *me)
{
	return splitmix64_u01(&me->rng);
}

/* Box–Muller, both outputs of each pair used. O(n) host work: ~n/2 logs,
 * square roots and sin/cos pairs. */
void method_gaussian(struct method *me, double *x, size_t n)
{
	for (size_t i = 0; i < n; i += 2) {
		double r = sqrt(-2.0 * log(method_u01(me)));
		double a = 2.0 * M_PI * method_u01(me);
		x[i] = r * cos(a);
		if (i + 1 < n)
			x[i + 1] = r * sin(a);
	}
}

const void *method_run_plain(struct method *me, const void *u, const void *z_in,
			     void *z, int n_layers, void *a, void *b)
{
	const void *in = z_in;
	for (int i = 0; i < n_layers; i++) {
		void *out = i == n_layers - 1 && z ? z : (in == a ? b : a);
		method_f(me, out, in, u, NULL);
		in = out;
	}
	return in;
}

void method_unroll_forward(struct method *me, const void *u, void *z, int train,
			   void *tapes)
{
	void *a = method_vec(me, 0), *b = method_vec(me, 1);
	const int L = me->cfg.layers;
	be_fill(me->m->be, a, 0.0, me->m->n_state);
	if (!train) {
		method_run_plain(me, u, a, z, L, a, b);
		return;
	}
	const void *in = a;
	for (int i = 0; i < L; i++) {
		void *out = i == L - 1 ? z : (in == a ? b : a);
		method_f(me, out, in, u,
			 (char *)tapes + (size_t)i * me->tape_bytes);
		in = out;
	}
}

const void *method_vjp_taped(struct method *me, const void *g, void *gu, int n,
			     void *a, void *b)
{
	for (int j = n - 1; j >= 0; j--) {
		void *out = g == a ? b : a;
		method_vjp(me, out, gu, g, method_tape(me, j), 1);
		g = out;
	}
	return g;
}
