/*
 * test_registry.c — the model registry (models/registry.c): every entry is
 * complete and named once, the names round-trip through model_kind_parse /
 * model_kind_name at their enum model_kind indices, model_kind_list gives
 * the `model` key's allowed values (and cuts to fit), and every kind
 * builds a shape-only model whose sizes follow its entry.
 */
#include "models/model.h"
#include "models/model_impl.h"

#include <criterion/criterion.h>
#include <string.h>

Test(registry, entries_complete_and_unique)
{
	cr_assert_eq(model_kind_count(), model_registry_len);
	cr_assert_geq(model_registry_len, 3);
	for (int i = 0; i < model_registry_len; i++) {
		const struct model_def *d = model_registry[i];
		cr_assert_not_null(d, "entry %d", i);
		cr_assert(d->name && d->name[0], "entry %d has no name", i);
		cr_assert(d->extent && d->block_specs && d->tape_elems &&
			      d->workspace_elems && d->forward && d->vjp &&
			      d->flops,
			  "%s lacks a required member", d->name);
		cr_assert(!d->inject_forward == !d->inject_backward,
			  "%s: inject_forward and inject_backward go together",
			  d->name);
		cr_assert(d->d_mult > 0 && d->u_mult > 0 && d->state_parts > 0,
			  "%s", d->name);
		cr_assert_eq(model_kind_parse(d->name), i, "%s", d->name);
		cr_assert_str_eq(model_kind_name((enum model_kind)i), d->name);
		for (int j = 0; j < i; j++)
			cr_assert(strcmp(model_registry[j]->name, d->name),
				  "%s registered twice", d->name);
	}
	cr_assert_eq(model_kind_parse("transformer"), MODEL_TRANSFORMER);
	cr_assert_eq(model_kind_parse("tanh_cell"), MODEL_TANH_CELL);
	cr_assert_eq(model_kind_parse("trellisnet"), MODEL_TRELLISNET);
	cr_assert_eq(model_kind_parse("lstm"), -1);
	cr_assert_eq(model_kind_parse(NULL), -1);
	cr_assert_str_eq(model_kind_name((enum model_kind) - 1), "?");
	cr_assert_str_eq(model_kind_name((enum model_kind)model_registry_len),
			 "?");
}

Test(registry, kind_list)
{
	char buf[256], small[8];
	model_kind_list(buf, sizeof(buf));
	cr_assert_str_eq(buf, "transformer, tanh_cell, trellisnet");
	model_kind_list(small, sizeof(small));
	cr_assert_str_eq(small, "transfo");
	memset(small, 'x', sizeof(small));
	model_kind_list(small, 1);
	cr_assert_eq(small[0], '\0');
	model_kind_list(small, 0); /* writes nothing */
	cr_assert_eq(small[1], 'x');
}

/* d = d_mult d_model, U = u_mult d_model, E = d_model; the table has the
 * four injection tensors, the kind's block specs and the head. */
Test(registry, shapes_follow_the_entry)
{
	for (int i = 0; i < model_registry_len; i++) {
		const struct model_def *d = model_registry[i];
		struct model_config c = {
		    .kind = (enum model_kind)i,
		    .d_model = 8,
		    .n_heads = 2,
		    .d_ff = 12,
		    .seq_len = 5,
		    .batch_size = 3,
		    .vocab_size = 11,
		};
		struct backend stub = {.elem = sizeof(float)};
		struct model m;
		struct param_spec specs[MODEL_MAX_PARAMS];
		char err[256] = "";
		cr_assert_eq(model_shape(&m, &stub, &c, err, sizeof(err)), 0,
			     "%s: %s", d->name, err);
		cr_assert_eq(m.def, d);
		cr_assert_eq(m.d, d->d_mult * 8, "%s", d->name);
		cr_assert_eq(m.U, d->u_mult * 8, "%s", d->name);
		cr_assert_eq(m.E, 8, "%s", d->name);
		cr_assert_eq(m.state_parts, d->state_parts, "%s", d->name);
		cr_assert_eq(m.n_state, (size_t)15 * m.d, "%s", d->name);
		cr_assert_eq(m.n_params, 6 + d->block_specs(&c, specs), "%s",
			     d->name);
		cr_assert_str_eq(m.params[m.n_params - 2].name, "head.weight");
		cr_assert_eq(m.params[P_INJ_W].ndim, d->inject_kernel ? 3 : 2,
			     "%s", d->name);
	}
}
