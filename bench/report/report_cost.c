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
 * solver_kernels device" into buf; batch_size / microbatches, the rows
 * each unit of a micro-batched run ran on (docs/methods.md
 * §Micro-batches); solver_kernels absent: ops. */
static void run_shape(char *buf, size_t n, const json_t *rec)
{
	const json_t *c = json_object_get(rec, "config");
	const char *prec = json_string_value(json_object_get(c, "precision"));
	double M = record_num(c, "microbatches");
	double B = record_num(c, "batch_size") / (isfinite(M) && M > 1 ? M : 1);
	snprintf(buf, n, "%s %.0f %.0f %.0f %.0f %.0f %.0f %s %s %s",
		 report_str(c, "model", "?"), record_num(c, "d_model"),
		 record_num(c, "n_heads"), record_num(c, "d_ff"),
		 record_num(c, "seq_len"), B,
		 record_num(rec, "model.vocab_size"), prec ? prec : "fp32",
		 report_str(c, "solver_kernels", "ops"),
		 report_str(c, "device", "cpu"));
}

static void price_shape(char *buf, size_t n, const json_t *p)
{
	const json_t *s = json_object_get(p, "shape");
	const json_t *c = json_object_get(p, "config");
	snprintf(buf, n, "%s %.0f %.0f %.0f %.0f %.0f %.0f %s %s %s",
		 report_str(s, "model", "-"), record_num(s, "d_model"),
		 record_num(s, "n_heads"), record_num(s, "d_ff"),
		 record_num(s, "seq_len"), record_num(s, "batch_size"),
		 record_num(s, "vocab_size"), report_str(s, "precision", "-"),
		 report_str(s, "solver_kernels", "ops"),
		 report_str(c, "device", "cpu"));
}

/* The standard deviation of the log of price record p's median, from
 * its 95% interval [lo_ms, hi_ms] read as normal on the log scale:
 * (ln hi − ln lo) / (2 · 1.96); 0 without an interval. */
static double log_sd(const json_t *p)
{
	double lo = record_num(p, "lo_ms"), hi = record_num(p, "hi_ms");
	if (!(lo > 0) || !(hi >= lo) || !isfinite(hi))
		return 0;
	return (log(hi) - log(lo)) / (2 * 1.959963984540054);
}

/* Inserts [h, ms, sd] into the solver points pts, kept sorted by h,
 * unless h is there already. */
static void add_point(json_t *pts, double h, double ms, double sd)
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
	json_array_insert_new(pts, i, json_pack("[f, f, f]", h, ms, sd));
}

json_t *report_cost_match(const json_t *prices, const json_t *rec)
{
	char want[512], have[512];
	json_t *units = json_object(), *pts = json_object(),
	       *sd = json_object(), *p;
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
				  ms, log_sd(p));
		} else if (!json_object_get(units, u)) {
			json_object_set_new(units, u, json_real(ms));
			json_object_set_new(sd, u, json_real(log_sd(p)));
		}
	}
	if (!found) {
		json_decref(units);
		json_decref(pts);
		json_decref(sd);
		return NULL;
	}
	return json_pack("{s:o, s:o, s:o}", "units", units, "solver", pts, "sd",
			 sd);
}

/* Column col (1: the price, 2: its log sd) of the solver line pts at h:
 * linear between the priced points, the end values beyond them; NAN
 * without points. */
static double solver_at(const json_t *pts, double h, int col)
{
	size_t n = json_array_size(pts);
	double h0 = 0, y0 = 0, h1 = 0, y1 = 0;
	if (!n)
		return NAN;
	for (size_t i = 0; i < n; i++) {
		h1 = json_number_value(
		    json_array_get(json_array_get(pts, i), 0));
		y1 = json_number_value(
		    json_array_get(json_array_get(pts, i), col));
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
static double update_at(const json_t *m, const char *f, const char *b, double h,
			int col)
{
	const json_t *pts = json_object_get(m, "solver");
	double yf, yb;
	if (!f || !b)
		return NAN;
	yf = solver_at(json_object_get(pts, f), h, col);
	yb = strcmp(f, b) ? solver_at(json_object_get(pts, b), h, col) : yf;
	return (yf + yb) / 2;
}

/* What report_cost_units_ms and report_cost_fixed_ms add up: the sum,
 * the unpriced list, and (NULL: not kept) each unit's part. */
struct acc {
	double s;
	json_t *unpriced;
	struct cost_parts *parts;
};

/* Adds ms, of unit part cu whose price has log sd sd, to a. */
static void add_part(struct acc *a, int cu, double ms, double sd)
{
	a->s += ms;
	if (a->parts) {
		a->parts->ms[cu] += ms;
		a->parts->sd[cu] = sd;
	}
}

/* count × unit u's price added to a (part cu), or u noted unpriced. */
static void add_priced(struct acc *a, double count, const json_t *m,
		       const char *u, const char *name, int cu)
{
	const json_t *p = json_object_get(json_object_get(m, "units"), u);
	if (count > 0 && !json_is_number(p))
		note_unpriced(a->unpriced, name);
	else if (count > 0)
		add_part(a, cu, count * json_number_value(p),
			 record_num(json_object_get(m, "sd"), u));
}

/* The head's price: a training step's pairs of forward and backward at
 * head_train (the fused head the step runs) where it is priced, the rest
 * at head_fwd and head_bwd. */
static void add_head(struct acc *a, double hf, double hb, const json_t *m)
{
	double pairs = hf < hb ? hf : hb;
	if (!json_is_number(
		json_object_get(json_object_get(m, "units"), "head_train")))
		pairs = 0; /* prices made before head_train */
	add_priced(a, pairs, m, "head_train", "head_train", CU_HEAD_TRAIN);
	add_priced(a, hf - pairs, m, "head_fwd", "head_fwd", CU_HEAD_FWD);
	add_priced(a, hb - pairs, m, "head_bwd", "head_bwd", CU_HEAD_BWD);
}

/* report_cost_units_ms into a; -1 where work lacks a count. */
static int units_ms(struct acc *a, const json_t *work, const json_t *m,
		    const char *which, const char *f_solver,
		    const char *b_solver)
{
	static const char *const units[] = {
	    "block_fwd_taped", "block_fwd",	  "block_fwd_recompute",
	    "block_vjp",       "block_vjp_input", "optimizer_step",
	    "host_bytes",      "attn_recompute"};
	static const int part[] = {CU_FWD_TAPED, CU_FWD, CU_FWD_TAPED, CU_VJP,
				   CU_VJP_INPUT, CU_OPT, CU_HOST,      CU_ATTN};
	double upd, hsum, hf, hb;
	if (!json_is_object(work))
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		double c = record_num(json_object_get(work, units[i]), which);
		/* records before attn_recompute lack it: none was done */
		if (!isfinite(c) && part[i] == CU_ATTN)
			c = 0;
		if (!isfinite(c))
			return -1;
		add_priced(a, c, m, i == 2 ? "block_fwd_taped" : units[i],
			   units[i], part[i]);
	}
	hf = record_num(json_object_get(work, "head_fwd"), which);
	hb = record_num(json_object_get(work, "head_bwd"), which);
	if (!isfinite(hf) || !isfinite(hb))
		return -1;
	add_head(a, hf, hb, m);
	upd = record_num(json_object_get(work, "solver_update"), which);
	hsum = record_num(json_object_get(work, "solver_history_sum"), which);
	if (upd > 0) {
		double h = isfinite(hsum) ? hsum / upd : 0;
		double y = update_at(m, f_solver, b_solver, h, 1);
		if (isfinite(y))
			add_part(a, CU_SOLVER, upd * y,
				 update_at(m, f_solver, b_solver, h, 2));
		else
			note_unpriced(a->unpriced, "solver_update");
	}
	return 0;
}

double report_cost_units_ms(const json_t *work, const json_t *m,
			    const char *which, const char *f_solver,
			    const char *b_solver, json_t *unpriced,
			    struct cost_parts *parts)
{
	struct acc a = {0, unpriced, parts};
	return units_ms(&a, work, m, which, f_solver, b_solver) ? NAN : a.s;
}

/* report_cost_fixed_ms into a; -1 without work or its optimizer steps. */
static int fixed_ms(struct acc *a, const json_t *work, const json_t *m,
		    const char *which)
{
	double c = record_num(json_object_get(work, "optimizer_step"), which),
	       hb = record_num(json_object_get(work, "head_bwd"), which);
	if (!json_is_object(work) || !isfinite(c))
		return -1;
	/* microbatches = M: each micro-batch uploads its rows and runs the
	 * injection, M head backwards to an optimizer step */
	if (c > 0 && isfinite(hb) && hb > c)
		c = hb;
	add_priced(a, c, m, "step_fixed", "step_fixed", CU_FIXED);
	return 0;
}

double report_cost_fixed_ms(const json_t *work, const json_t *m,
			    const char *which, json_t *unpriced,
			    struct cost_parts *parts)
{
	struct acc a = {0, unpriced, parts};
	return fixed_ms(&a, work, m, which) ? NAN : a.s;
}

double report_cost_log_var(const struct cost_parts *x,
			   const struct cost_parts *y)
{
	double sx = 0, sy = 0, v = 0;
	for (int u = 0; u < CU_N; u++) {
		sx += x->ms[u];
		sy += y ? y->ms[u] : 0;
	}
	if (!(sx > 0) || (y && !(sy > 0)))
		return 0;
	for (int u = 0; u < CU_N; u++) {
		double d = x->sd[u] * x->ms[u] / sx -
			   (y ? y->sd[u] * y->ms[u] / sy : 0);
		v += d * d;
	}
	return v;
}
