/* report_agg.c — the accessors of report's rows (report_impl.h) that
 * every part of the report uses: a record's strings, a row's columns, its
 * group's unroll row, whether it holds evaluations. Below report.c, which
 * fills the rows, and report_cost.c and report_target.c, which read them. */
#include <string.h>

#include "report_impl.h"

const char *report_str(const json_t *o, const char *k, const char *dflt)
{
	const json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : dflt;
}

int report_is_eval(const struct agg *r)
{
	return !strcmp(report_str(r->first, "kind", "train"), "eval");
}

double *agg_col(const struct agg *r, enum col c)
{
	return r->v + (size_t)c * r->cap;
}

const struct agg *report_unroll_row(const struct table *t, const struct agg *r)
{
	const json_t *q = json_object_get(t->unroll, r->group);
	return q ? &t->rows[json_integer_value(q)] : NULL;
}
