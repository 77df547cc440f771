/* report_cost.c — see report_cost.h: price records read, matched to a
 * run's shape, and a step's work priced. */
#include "report_cost.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../records/record.h"
#include "report.h"
#include "report_impl.h"

json_t *report_price_records(const char *path, const char *what, char *err,
			     size_t n)
{
	FILE *f = fopen(path, "r");
	json_t *out = json_array();
	char *line = NULL;
	size_t cap = 0;
	long no = 0;
	if (!f) {
		snprintf(err, n,
			 "%s %.200s: %s; give the file "
			 "deqbench price out= wrote",
			 what, path, strerror(errno));
		json_decref(out);
		return NULL;
	}
	while (out && getline(&line, &cap, f) > 0) {
		json_error_t je;
		json_t *r;
		no++;
		if (strspn(line, " \t\r\n") == strlen(line))
			continue;
		if (!(r = json_loads(line, 0, &je))) {
			snprintf(err, n,
				 "%s %.200s:%ld: not JSON "
				 "(%.80s); give the file deqbench price out= "
				 "wrote",
				 what, path, no, je.text);
			json_decref(out);
			out = NULL;
		} else if (!strcmp(report_str(r, "kind", ""), "price"))
			json_array_append_new(out, r);
		else
			json_decref(r);
	}
	free(line);
	fclose(f);
	if (out && !json_array_size(out)) {
		snprintf(err, n,
			 "%s %.200s: holds no price "
			 "records; make them with deqbench price ... "
			 "out=%.200s",
			 what, path, path);
		json_decref(out);
		out = NULL;
	}
	return out;
}

/* The run shape of rec, in the keys of a price record's shape and
 * device: "model d_model n_heads d_ff seq_len batch_size vocab precision
 * device" into buf; batch_size / microbatches, the rows each unit of a
 * micro-batched run ran on (docs/methods.md §Micro-batches). */
static void run_shape(char *buf, size_t n, const json_t *rec)
{
	const json_t *c = json_object_get(rec, "config");
	const char *prec = json_string_value(json_object_get(c, "precision"));
	double M = record_num(c, "microbatches");
	double B = record_num(c, "batch_size") / (isfinite(M) && M > 1 ? M : 1);
	snprintf(buf, n, "%s %.0f %.0f %.0f %.0f %.0f %.0f %s %s",
		 report_str(c, "model", "?"), record_num(c, "d_model"),
		 record_num(c, "n_heads"), record_num(c, "d_ff"),
		 record_num(c, "seq_len"), B,
		 record_num(rec, "model.vocab_size"), prec ? prec : "fp32",
		 report_str(c, "device", "cpu"));
}

static void price_shape(char *buf, size_t n, const json_t *p)
{
	const json_t *s = json_object_get(p, "shape");
	const json_t *c = json_object_get(p, "config");
	snprintf(buf, n, "%s %.0f %.0f %.0f %.0f %.0f %.0f %s %s",
		 report_str(s, "model", "-"), record_num(s, "d_model"),
		 record_num(s, "n_heads"), record_num(s, "d_ff"),
		 record_num(s, "seq_len"), record_num(s, "batch_size"),
		 record_num(s, "vocab_size"), report_str(s, "precision", "-"),
		 report_str(c, "device", "cpu"));
}

/* Inserts [h, ms] into the solver points pts, kept sorted by h, unless
 * h is there already. */
static void add_point(json_t *pts, double h, double ms)
{
	size_t i = 0;
	for (; i < json_array_size(pts); i++) {
		double hi = json_number_value(
		    json_array_get(json_array_get(pts, i), 0));
		if (hi == h)
			return;
		if (hi > h)
			break;
	}
	json_array_insert_new(pts, i, json_pack("[f, f]", h, ms));
}

json_t *report_cost_match(const json_t *prices, const json_t *rec)
{
	char want[512], have[512];
	json_t *units = json_object(), *pts = json_object(), *p;
	size_t i;
	int found = 0;
	run_shape(want, sizeof(want), rec);
	json_array_foreach(prices, i, p)
	{
		const char *u = json_string_value(json_object_get(p, "unit"));
		double ms = record_num(p, "median_ms");
		price_shape(have, sizeof(have), p);
		if (!u || !isfinite(ms) || strcmp(want, have))
			continue;
		found = 1;
		if (!strcmp(u, "solver_update")) {
			/* records before `solver` priced Broyden alone */
			const char *s = report_str(p, "solver", "broyden");
			if (!json_object_get(pts, s))
				json_object_set_new(pts, s, json_array());
			add_point(json_object_get(pts, s), record_num(p, "h"),
				  ms);
		} else if (!json_object_get(units, u))
			json_object_set_new(units, u, json_real(ms));
	}
	if (!found) {
		json_decref(units);
		json_decref(pts);
		return NULL;
	}
	return json_pack("{s:o, s:o}", "units", units, "solver", pts);
}

/* The solver line pts at h: linear between the priced points, the end
 * values beyond them; NAN without points. */
static double solver_at(const json_t *pts, double h)
{
	size_t n = json_array_size(pts);
	double h0 = 0, y0 = 0, h1 = 0, y1 = 0;
	if (!n)
		return NAN;
	for (size_t i = 0; i < n; i++) {
		h1 = json_number_value(
		    json_array_get(json_array_get(pts, i), 0));
		y1 = json_number_value(
		    json_array_get(json_array_get(pts, i), 1));
		if (h <= h1)
			return i == 0 ? y1
				      : y0 + (y1 - y0) * (h - h0) / (h1 - h0);
		h0 = h1;
		y0 = y1;
	}
	return y1;
}

static void note_unpriced(json_t *unpriced, const char *u)
{
	size_t i;
	json_t *v;
	if (!unpriced)
		return;
	json_array_foreach(unpriced, i,
			   v) if (!strcmp(json_string_value(v), u)) return;
	json_array_append_new(unpriced, json_string(u));
}

/* The price of one solver update at mean history h of a record whose
 * solves use f and b (borrowed names; NULL: not a DEQ): that solver's
 * points at h, or where the two differ the mean of theirs (the work
 * counts both solves' updates together); NAN without points. */
static double update_at(const json_t *m, const char *f, const char *b, double h)
{
	const json_t *pts = json_object_get(m, "solver");
	double yf, yb;
	if (!f || !b)
		return NAN;
	yf = solver_at(json_object_get(pts, f), h);
	yb = strcmp(f, b) ? solver_at(json_object_get(pts, b), h) : yf;
	return (yf + yb) / 2;
}

/* count × unit u's price added to *s, or u noted unpriced. */
static void add_priced(double *s, double count, const json_t *up, const char *u,
		       const char *name, json_t *unpriced)
{
	const json_t *p = json_object_get(up, u);
	if (count > 0 && !json_is_number(p))
		note_unpriced(unpriced, name);
	else if (count > 0)
		*s += count * json_number_value(p);
}

/* The head's price: a training step's pairs of forward and backward at
 * head_train (the fused head the step runs) where it is priced, the rest
 * at head_fwd and head_bwd. */
static void add_head(double *s, double hf, double hb, const json_t *up,
		     json_t *unpriced)
{
	double pairs = hf < hb ? hf : hb;
	if (!json_is_number(json_object_get(up, "head_train")))
		pairs = 0; /* prices made before head_train */
	add_priced(s, pairs, up, "head_train", "head_train", unpriced);
	add_priced(s, hf - pairs, up, "head_fwd", "head_fwd", unpriced);
	add_priced(s, hb - pairs, up, "head_bwd", "head_bwd", unpriced);
}

double report_cost_units_ms(const json_t *work, const json_t *m,
			    const char *which, const char *f_solver,
			    const char *b_solver, json_t *unpriced)
{
	static const char *const units[] = {
	    "block_fwd_taped", "block_fwd",	  "block_fwd_recompute",
	    "block_vjp",       "block_vjp_input", "optimizer_step",
	    "host_bytes"};
	const json_t *up = json_object_get(m, "units");
	double s = 0, upd, hsum, hf, hb;
	if (!json_is_object(work))
		return NAN;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		double c = record_num(json_object_get(work, units[i]), which);
		if (!isfinite(c))
			return NAN;
		add_priced(&s, c, up, i == 2 ? "block_fwd_taped" : units[i],
			   units[i], unpriced);
	}
	/* records before attn_recompute lack it: none was done */
	{
		double c =
		    record_num(json_object_get(work, "attn_recompute"), which);
		add_priced(&s, isfinite(c) ? c : 0, up, "attn_recompute",
			   "attn_recompute", unpriced);
	}
	hf = record_num(json_object_get(work, "head_fwd"), which);
	hb = record_num(json_object_get(work, "head_bwd"), which);
	if (!isfinite(hf) || !isfinite(hb))
		return NAN;
	add_head(&s, hf, hb, up, unpriced);
	upd = record_num(json_object_get(work, "solver_update"), which);
	hsum = record_num(json_object_get(work, "solver_history_sum"), which);
	if (upd > 0) {
		double y = update_at(m, f_solver, b_solver,
				     isfinite(hsum) ? hsum / upd : 0);
		if (isfinite(y))
			s += upd * y;
		else
			note_unpriced(unpriced, "solver_update");
	}
	return s;
}

double report_cost_fixed_ms(const json_t *work, const json_t *m,
			    const char *which, json_t *unpriced)
{
	double c = record_num(json_object_get(work, "optimizer_step"), which),
	       hb = record_num(json_object_get(work, "head_bwd"), which), s = 0;
	if (!json_is_object(work) || !isfinite(c))
		return NAN;
	/* microbatches = M: each micro-batch uploads its rows and runs the
	 * injection, M head backwards to an optimizer step */
	if (c > 0 && isfinite(hb) && hb > c)
		c = hb;
	add_priced(&s, c, json_object_get(m, "units"), "step_fixed",
		   "step_fixed", unpriced);
	return s;
}
