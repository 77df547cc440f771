/* report_target.c — see report_impl.h: the steps and the measured training
 * time each row's runs took to reach a target valid perplexity, from the
 * records' quality.valid_curve (eval_every; results/SCHEMA.md). A run
 * reaches the target at the first curve point whose perplexity is at or
 * below it (no interpolation between points: the answer's resolution is
 * eval_every steps); its steps and train_s are that point's. A row gives
 * the medians over its runs that reached it and how many did. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_impl.h"
#include "stats.h"

int report_target_add(struct agg *r, const json_t *rec, int ok)
{
	const json_t *pts = json_object_get(
	    json_object_get(json_object_get(rec, "quality"), "valid_curve"),
	    "points");
	json_t *c = json_null(), *p;
	size_t i;
	if (!r->curves && !(r->curves = json_array()))
		return -1;
	if (ok && json_array_size(pts)) {
		c = json_array();
		json_array_foreach(pts, i, p)
		{
			json_t *ppl = json_object_get(p, "valid_ppl");
			json_t *e =
			    json_pack("[O,O,O]", json_object_get(p, "step"),
				      json_is_number(ppl) ? ppl : json_null(),
				      json_object_get(p, "train_s"));
			if (!e || json_array_append_new(c, e) != 0) {
				json_decref(c);
				return -1;
			}
		}
	}
	return json_array_append_new(r->curves, c);
}

/* The best (lowest) perplexity of curve c; INFINITY when none. */
static double curve_best(const json_t *c)
{
	double best = INFINITY;
	size_t i;
	json_t *p;
	json_array_foreach(c, i, p)
	{
		json_t *ppl = json_array_get(p, 1);
		double v = json_number_value(ppl);
		if (json_is_number(ppl) && isfinite(v) && v < best)
			best = v;
	}
	return best;
}

/* The automatic target of group g: the largest over its training rows'
 * runs with a curve of the best perplexity each reached on it (so every
 * such run reaches it); NAN when no run has a curve. */
static double auto_target(const struct table *t, const char *g)
{
	double tgt = NAN;
	for (size_t j = 0; j < t->nrow; j++) {
		const struct agg *r = &t->rows[j];
		size_t i;
		json_t *c;
		if (strcmp(r->group, g) || !r->curves)
			continue;
		json_array_foreach(r->curves, i, c)
		{
			double b = curve_best(c);
			if (isfinite(b) && !(b <= tgt))
				tgt = b;
		}
	}
	return tgt;
}

/* The first point of curve c at or below target: its step and train_s
 * into *step, *s; 0 when the curve never gets there. */
static int reach(const json_t *c, double target, double *step, double *s)
{
	size_t i;
	json_t *p;
	json_array_foreach(c, i, p)
	{
		json_t *ppl = json_array_get(p, 1);
		if (json_is_number(ppl) && json_number_value(ppl) <= target) {
			*step = json_number_value(json_array_get(p, 0));
			*s = json_number_value(json_array_get(p, 2));
			return 1;
		}
	}
	return 0;
}

/* Row r's medians over its runs that reach target into *steps and *s
 * (NAN when none does), the runs with a curve into *n; the runs that
 * reach it returned. */
static int row_reach(const struct agg *r, double target, int *n, double *steps,
		     double *s)
{
	size_t i, m = json_array_size(r->curves);
	double *st = malloc((m + 1) * sizeof(*st)), *ts = malloc((m + 1) * 8);
	json_t *c;
	int k = 0;
	*n = 0;
	*steps = *s = NAN;
	if (!st || !ts) {
		free(st);
		free(ts);
		return 0;
	}
	json_array_foreach(r->curves, i, c)
	{
		if (!json_array_size(c))
			continue;
		++*n;
		k += reach(c, target, &st[k], &ts[k]);
	}
	if (k) {
		*steps = stats_median(st, k);
		*s = stats_median(ts, k);
	}
	free(st);
	free(ts);
	return k;
}

/* The geometric mean of row r's priced step ms (report --price: Σ work ×
 * price + step_fixed, C_PR) over its runs; NAN without prices. */
static double priced_ms(const struct agg *r)
{
	double s = 0;
	int k = 0;
	for (int i = 0; r && i < r->n; i++) {
		double x = agg_col(r, C_PR)[i];
		if (isfinite(x) && x > 0) {
			s += log(x);
			k++;
		}
	}
	return k ? exp(s / k) : NAN;
}

/* A number, or null where x is not finite. */
static json_t *num_or_null(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

/* to_target of row r (report.h, docs/commands.md), or null when none of
 * its runs has a curve. priced_s: the steps to the target × the row's
 * priced step (a whole run's mean: the time the work to the target costs
 * at the local prices, the steps' own drift aside). */
static json_t *target_json(const struct table *t, const struct agg *r)
{
	const struct agg *b = report_unroll_row(t, r);
	int given = isfinite(t->target_ppl), n, nb, k, kb = 0;
	double tgt = given ? t->target_ppl : auto_target(t, r->group);
	double steps, s, bsteps = NAN, bs = NAN, ps, bps;
	json_t *o;
	if (!r->curves || !isfinite(tgt))
		return json_null();
	k = row_reach(r, tgt, &n, &steps, &s);
	if (!n)
		return json_null();
	if (b && b->curves)
		kb = row_reach(b, tgt, &nb, &bsteps, &bs);
	ps = k ? steps * priced_ms(r) / 1000 : NAN;
	bps = kb ? bsteps * priced_ms(b) / 1000 : NAN;
	o = json_pack("{s:f, s:s, s:i, s:i, s:o, s:o, s:o}", "target_ppl", tgt,
		      "target", given ? "given" : "auto", "runs", n, "reached",
		      k, "steps", k ? json_real(steps) : json_null(), "train_s",
		      k ? json_real(s) : json_null(), "train_s_x_unroll",
		      k && kb && bs > 0 ? json_real(s / bs) : json_null());
	json_object_set_new(o, "priced_s", num_or_null(ps));
	json_object_set_new(o, "priced_s_x_unroll",
			    num_or_null(bps > 0 ? ps / bps : NAN));
	return o;
}

void report_target_rows(const struct table *t, json_t *rows)
{
	size_t j;
	json_t *o;
	json_array_foreach(rows, j, o)
	{
		json_t *v = target_json(t, &t->rows[j]);
		json_object_set_new(o, "to_target", v ? v : json_null());
	}
}

int report_target_text(char *buf, size_t n, const json_t *row)
{
	const json_t *o = json_object_get(row, "to_target");
	const char *m = json_string_value(json_object_get(row, "method"));
	double tgt = json_number_value(json_object_get(o, "target_ppl"));
	int runs = (int)json_integer_value(json_object_get(o, "runs"));
	int k = (int)json_integer_value(json_object_get(o, "reached"));
	char x[64] = "";
	if (!json_is_object(o))
		return 0;
	if (!k) {
		snprintf(buf, n, "%s: valid ppl %.4g not reached (0/%d runs)",
			 m ? m : "", tgt, runs);
		return 1;
	}
	if (json_is_number(json_object_get(o, "train_s_x_unroll")))
		snprintf(
		    x, sizeof(x), ", %.3gx unroll",
		    json_number_value(json_object_get(o, "train_s_x_unroll")));
	snprintf(buf, n,
		 "%s: valid ppl %.4g%s in %.6g steps, %.4g s%s (%d/%d "
		 "runs, medians)",
		 m ? m : "", tgt,
		 strcmp(json_string_value(json_object_get(o, "target")), "auto")
		     ? ""
		     : " (auto)",
		 json_number_value(json_object_get(o, "steps")),
		 json_number_value(json_object_get(o, "train_s")), x, k, runs);
	return 1;
}
