/* report_term.c — see report.h: the rows as a terminal table at most
 * REPORT_TERM_WIDTH columns wide (each group once as a heading line, short
 * method labels, units in the header, health labels as notes under the
 * group), and as CSV. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../records/record.h"
#include "report.h"
#include "textsafe.h"

static double at(const json_t *row, const char *path)
{
	return record_num(row, path);
}

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

/* Column widths of a row (print_header): they add up to
 * REPORT_TERM_WIDTH with the two leading spaces, the separating ones and
 * the "!" column. */
enum {
	METHOD_W = 18,
	RUNS_W = 3,
	EST_W = 19,
	MEM_W = 6,
	CONV_W = 7,
	PPL_W = 11
};

/* Columns of a number inside "x [lo-hi]": three of them fit EST_W. */
#define CI_NUM_W 5

/* x with d decimals into t (400 bytes: any double fits "%.2f"), at most w
 * columns: fewer decimals where they do not fit, then (and from a million
 * on, which is easier read so) the longest exponent form with at most 2
 * decimals that fits ("4.09e5", "4.1e5", "1e-9"). 0, or -1 when none fits
 * (a huge negative value in a narrow column). */
static int fit_text(char t[400], double x, int w, int d)
{
	for (; d >= 0 && fabs(x) < 1e6; d--)
		if (snprintf(t, 400, "%.*f", d, x) <= w)
			return 0;
	for (int p = 2; p >= 0; p--) {
		char m[64], *e;
		snprintf(m, sizeof(m), "%.*e", p, x);
		e = strchr(m, 'e');
		*e = 0;
		if (snprintf(t, 400, "%se%d", m, atoi(e + 1)) <= w)
			return 0;
	}
	return -1;
}

/* x in at most w columns (fit_text), "-" when not finite, w '#'s where
 * nothing fits (a spreadsheet's sign for a number wider than its cell). */
static void fit(char *buf, size_t n, double x, int w, int d)
{
	char t[400];
	size_t l;
	if (!isfinite(x))
		snprintf(t, sizeof(t), "-");
	else if (fit_text(t, x, w, d) != 0)
		snprintf(t, sizeof(t), "%.*s", w, "####################");
	l = strlen(t) < n ? strlen(t) : n - 1;
	memcpy(buf, t, l);
	buf[l] = 0;
}

/* Decimals of a time or ratio x: 2 below 10, 1 below 100, else 0. */
static int decimals(double x)
{
	return fabs(x) >= 100 ? 0 : fabs(x) >= 10 ? 1 : 2;
}

/* An interval or ratio object o (report.h) in EST_W columns: "x [lo-hi]"
 * of its member center, "1" on the unroll row's own ratio, "x (n=2: no
 * CI)" where too few runs give no interval, "-" without a value. */
static void fmt_est(char *buf, size_t n, const json_t *o, const char *center)
{
	double x = at(o, center), lo = at(o, "lo"), hi = at(o, "hi");
	int d = decimals(x), few = report_few_runs(o);
	char a[8], b[8], c[8];
	if (isfinite(x) && json_is_true(json_object_get(o, "self")))
		snprintf(buf, n, "1");
	else if (isfinite(x) && isfinite(lo) && isfinite(hi)) {
		fit(a, sizeof(a), x, CI_NUM_W, d);
		fit(b, sizeof(b), lo, CI_NUM_W, d);
		fit(c, sizeof(c), hi, CI_NUM_W, d);
		snprintf(buf, n, "%s [%s-%s]", a, b, c);
	} else if (isfinite(x) && few) {
		fit(a, sizeof(a), x, EST_W - 13, d);
		snprintf(buf, n, "%s (n=%d: no CI)", a, few);
	} else
		fit(buf, n, x, EST_W, d);
}

/* "99/100" converged percentages (floored: 99.96% never reads 100), "-"
 * for a solve the row does not have. */
static void fmt_conv(char *buf, size_t n, const json_t *row)
{
	double f = at(row, "fwd_converged"), b = at(row, "bwd_converged");
	char a[8], c[8];
	if (!isfinite(f) && !isfinite(b)) {
		snprintf(buf, n, "-");
		return;
	}
	fit(a, sizeof(a), isfinite(f) ? floor(100 * f) : NAN, 3, 0);
	fit(c, sizeof(c), isfinite(b) ? floor(100 * b) : NAN, 3, 0);
	snprintf(buf, n, "%s/%s", a, c);
}

/* "mean±sd" in PPL_W columns (± is one). */
static void fmt_ppl(char *buf, size_t n, const json_t *row)
{
	double m = at(row, "valid_ppl.mean"), sd = at(row, "valid_ppl.sd");
	char a[8], b[8];
	if (isfinite(m) && isfinite(sd)) {
		fit(a, sizeof(a), m, (PPL_W - 1) / 2, 1);
		fit(b, sizeof(b), sd, (PPL_W - 1) / 2, 1);
		snprintf(buf, n, "%s±%s", a, b);
	} else
		fit(buf, n, m, PPL_W, 1);
}

/* runs in RUNS_W columns: "999", "30k", then "1e5". */
static void fmt_runs(char *buf, size_t n, json_int_t runs)
{
	if (runs < 1000)
		snprintf(buf, n, "%lld", (long long)runs);
	else if (runs < 100000)
		snprintf(buf, n, "%lldk", (long long)(runs / 1000));
	else
		fit(buf, n, (double)runs, RUNS_W, 0);
}

/* s (safe text) right-aligned in w columns (left: left-aligned), then a
 * space. */
static void put_cell(FILE *f, const char *s, int w, int left)
{
	int pad = w - textsafe_columns(s);
	fprintf(f, "%*s%s%*s ",
		left	  ? 0
		: pad > 0 ? pad
			  : 0,
		"", s, left && pad > 0 ? pad : 0, "");
}

static void print_header(FILE *f)
{
	fputs("  ", f);
	put_cell(f, "method", METHOD_W, 1);
	put_cell(f, "n", RUNS_W, 0);
	put_cell(f, "step ms [95% CI]", EST_W, 0);
	put_cell(f, "x unroll [95%]", EST_W, 0);
	put_cell(f, "d+s x", MEM_W, 0);
	put_cell(f, "tot x", MEM_W, 0);
	put_cell(f, "f/b cv%", CONV_W, 0);
	put_cell(f, "valid ppl", PPL_W, 0);
	fputs("!\n", f);
}

static void print_row(FILE *f, const json_t *row)
{
	char m[96], runs[24], step[64], x[64], ds[16], tot[16], conv[16],
	    ppl[32];
	int labelled = json_array_size(json_object_get(
			   json_object_get(row, "health"), "labels")) > 0;
	textsafe_term(m, sizeof(m), str(row, "method"), METHOD_W);
	fmt_runs(runs, sizeof(runs),
		 json_integer_value(json_object_get(row, "runs")));
	fmt_est(step, sizeof(step), json_object_get(row, "step_ms"), "gmean");
	fmt_est(x, sizeof(x), json_object_get(row, "step_x_unroll"), "ratio");
	fit(ds, sizeof(ds), at(row, "depth_solver_x_unroll"), MEM_W, 3);
	fit(tot, sizeof(tot), at(row, "total_x_unroll"), MEM_W, 3);
	fmt_conv(conv, sizeof(conv), row);
	fmt_ppl(ppl, sizeof(ppl), row);
	fputs("  ", f);
	put_cell(f, m, METHOD_W, 1);
	put_cell(f, runs, RUNS_W, 0);
	put_cell(f, step, EST_W, 0);
	put_cell(f, x, EST_W, 0);
	put_cell(f, ds, MEM_W, 0);
	put_cell(f, tot, MEM_W, 0);
	put_cell(f, conv, CONV_W, 0);
	put_cell(f, ppl, PPL_W, 0);
	fputs(labelled ? "!\n" : "\n", f);
}

/* Columns of an eval group's table (print_eval_row): method,
 * the evaluation keys (f_tol, f_max_iter, layers of an unrolled net),
 * runs, ms per valid batch [95% CI], the head's ms, x unroll [95%] and
 * the depth of the unroll row it is against, valid and test ppl; 2 + 11+1
 * + 6+1 + 3+1 + 3+1 + 3+1 + 19+1 + 6+1 + 19+1 + 3+1 + 6+1 + 6+1 + 1 = 99
 * columns. */
enum { EMETHOD_W = 11, TOL_W = 6, KEY_W = 3, HEAD_W = 6, EPPL_W = 6 };

static void print_eval_header(FILE *f)
{
	fputs("  ", f);
	put_cell(f, "method", EMETHOD_W, 1);
	put_cell(f, "f_tol", TOL_W, 0);
	put_cell(f, "cap", KEY_W, 0);
	put_cell(f, "L", KEY_W, 0);
	put_cell(f, "n", RUNS_W, 0);
	put_cell(f, "ms/batch [95% CI]", EST_W, 0);
	put_cell(f, "head", HEAD_W, 0);
	put_cell(f, "x unroll [95%]", EST_W, 0);
	put_cell(f, "vsL", KEY_W, 0);
	put_cell(f, "valid", EPPL_W, 0);
	put_cell(f, "test", EPPL_W, 0);
	fputs("\n", f);
}

/* An eval row: a DEQ's f_tol and cap, an unrolled net's depth L (the
 * other keys "-"), and against which unroll depth its ratio is ("vsL";
 * marked '<' when no unroll row is as good: that of lowest ppl). */
static void print_eval_row(FILE *f, const json_t *row)
{
	const json_t *c = json_object_get(row, "config");
	const json_t *mu = json_object_get(row, "matched_unroll");
	int deq = !strcmp(str(c, "method"), "deq");
	char m[96], name[64], tol[16], cap[16], L[16], runs[24], ms[64],
	    head[16], x[64], vs[16], vp[16], tp[16];
	snprintf(name, sizeof(name), "%s%s%s", str(c, "method"), deq ? " " : "",
		 deq ? str(c, "f_solver") : "");
	textsafe_term(m, sizeof(m), name, EMETHOD_W);
	fit(tol, sizeof(tol), NAN, TOL_W, 0);
	if (deq && snprintf(tol, sizeof(tol), "%g", at(c, "f_tol")) > TOL_W)
		snprintf(tol, sizeof(tol), "%.0e", at(c, "f_tol"));
	fit(cap, sizeof(cap), deq ? at(c, "f_max_iter") : NAN, KEY_W, 0);
	fit(L, sizeof(L), deq ? NAN : at(c, "layers"), KEY_W, 0);
	fmt_runs(runs, sizeof(runs),
		 json_integer_value(json_object_get(row, "runs")));
	fmt_est(ms, sizeof(ms), json_object_get(row, "inference_ms"), "gmean");
	fit(head, sizeof(head), at(row, "inference_head_ms.gmean"), HEAD_W,
	    decimals(at(row, "inference_head_ms.gmean")));
	fmt_est(x, sizeof(x), json_object_get(row, "inference_x_unroll"),
		"ratio");
	fit(vs, sizeof(vs), at(mu, "layers"), KEY_W - 1, 0);
	if (json_is_false(json_object_get(mu, "as_good")))
		snprintf(vs + strlen(vs), sizeof(vs) - strlen(vs), "<");
	fit(vp, sizeof(vp), at(row, "valid_ppl.mean"), EPPL_W, 1);
	fit(tp, sizeof(tp), at(row, "test_ppl.mean"), EPPL_W, 1);
	fputs("  ", f);
	put_cell(f, m, EMETHOD_W, 1);
	put_cell(f, tol, TOL_W, 0);
	put_cell(f, cap, KEY_W, 0);
	put_cell(f, L, KEY_W, 0);
	put_cell(f, runs, RUNS_W, 0);
	put_cell(f, ms, EST_W, 0);
	put_cell(f, head, HEAD_W, 0);
	put_cell(f, x, EST_W, 0);
	put_cell(f, vs, KEY_W, 0);
	put_cell(f, vp, EPPL_W, 0);
	put_cell(f, tp, EPPL_W, 0);
	fputs(json_array_size(
		  json_object_get(json_object_get(row, "health"), "labels"))
		  ? "!\n"
		  : "\n",
	      f);
}

/* text (record text: made safe here) after prefix, broken at spaces into
 * lines of at most REPORT_TERM_WIDTH columns, each further line after
 * indent; a word longer than a line is cut, marked '~'. */
static void put_wrapped(FILE *f, const char *prefix, const char *text,
			const char *indent)
{
	char safe[2048], word[1024], out[1024];
	int col = textsafe_columns(prefix), first = 1;
	const char *p = safe;
	textsafe_term(safe, sizeof(safe), text, -1);
	fputs(prefix, f);
	while (*p) {
		size_t wl = strcspn(p, " ");
		if (wl) {
			int sep = !first, wc;
			snprintf(word, sizeof(word), "%.*s", (int)wl, p);
			wc = textsafe_columns(word);
			if (!first && col + sep + wc > REPORT_TERM_WIDTH) {
				fprintf(f, "\n%s", indent);
				col = textsafe_columns(indent);
				sep = 0;
			}
			col +=
			    sep + textsafe_term(out, sizeof(out), word,
						REPORT_TERM_WIDTH - col - sep);
			fprintf(f, "%s%s", sep ? " " : "", out);
			first = 0;
		}
		p += wl + strspn(p + wl, " ");
	}
	fputc('\n', f);
}

/* The health notes of a group's rows: "! METHOD: LABELS"; and "= METHOD:
 * commits ..." for a row of several commits of one fingerprint. */
static void print_notes(FILE *f, const json_t *rows, const char *group)
{
	size_t i, j;
	json_t *r, *l;
	char t[2048];
	json_array_foreach(rows, i, r)
	{
		const json_t *labels =
		    json_object_get(json_object_get(r, "health"), "labels");
		size_t k;
		char c[1024];
		if (strcmp(str(r, "group"), group))
			continue;
		if (report_commits_text(c, sizeof(c), r)) {
			snprintf(t, sizeof(t), "%s: %s", str(r, "method"), c);
			put_wrapped(f, "  = ", t, "    ");
		}
		if (report_target_text(t, sizeof(t), r))
			put_wrapped(f, "  ~ ", t, "    ");
		if (!json_array_size(labels))
			continue;
		k = (size_t)snprintf(t, sizeof(t), "%s:", str(r, "method"));
		json_array_foreach(labels, j, l) if (k < sizeof(t)) k +=
		    (size_t)snprintf(t + k, sizeof(t) - k, "%s %s",
				     j ? "," : "", json_string_value(l));
		put_wrapped(f, "  ! ", t, "    ");
	}
}

/* Columns of the priced table (print_cost): method, measured mean step
 * ms with its interval, priced ms, × unroll of each, the priced early and
 * late step ms; 2 + 18+1 + 19+1 + 7+1 + 19+1 + 7+1 + 15 = 92 columns. */
enum { PRICE_W = 7, EDGE_W = 15 };

static void print_cost_header(FILE *f)
{
	fputs("  ", f);
	put_cell(f, "measured/priced", METHOD_W, 1);
	put_cell(f, "mean step ms [95%]", EST_W, 0);
	put_cell(f, "priced", PRICE_W, 0);
	put_cell(f, "x unroll [95%]", EST_W, 0);
	put_cell(f, "priced", PRICE_W, 0);
	put_cell(f, "priced early>late", EDGE_W, 0);
	fputc('\n', f);
}

/* A row of the priced table, and its note ("? METHOD: NOTE") when its
 * pricing has one. */
static void print_cost_row(FILE *f, const json_t *row)
{
	const json_t *p = json_object_get(row, "priced");
	const json_t *px = json_object_get(p, "x_unroll");
	char m[96], step[64], x[64], pr[16], prx[16], e[16], l[16], el[40];
	const char *note = json_string_value(json_object_get(p, "note"));
	double xr = at(px, "ratio");
	textsafe_term(m, sizeof(m), str(row, "method"), METHOD_W);
	fmt_est(step, sizeof(step), json_object_get(row, "step_mean_ms"),
		"gmean");
	fmt_est(x, sizeof(x), json_object_get(row, "step_mean_x_unroll"),
		"ratio");
	fit(pr, sizeof(pr), at(p, "step_ms.gmean"), PRICE_W,
	    decimals(at(p, "step_ms.gmean")));
	if (json_is_true(json_object_get(px, "self")))
		snprintf(prx, sizeof(prx), "1");
	else
		fit(prx, sizeof(prx), xr, PRICE_W, 3);
	fit(e, sizeof(e), at(p, "early_ms.gmean"), 7, 1);
	fit(l, sizeof(l), at(p, "late_ms.gmean"), 7, 1);
	snprintf(el, sizeof(el), "%s>%s", e, l);
	fputs("  ", f);
	put_cell(f, m, METHOD_W, 1);
	put_cell(f, step, EST_W, 0);
	put_cell(f, pr, PRICE_W, 0);
	put_cell(f, x, EST_W, 0);
	put_cell(f, prx, PRICE_W, 0);
	put_cell(f, el, EDGE_W, 0);
	fputc('\n', f);
	if (note) {
		char t[512];
		snprintf(t, sizeof(t), "%s: %s", str(row, "method"), note);
		put_wrapped(f, "  ? ", t, "    ");
	}
}

/* The group's priced table (report --price): nothing when no row of it
 * was priced. */
static void print_cost(FILE *f, const json_t *rows, const char *group)
{
	size_t j;
	json_t *q;
	int any = 0;
	json_array_foreach(rows, j,
			   q) if (!strcmp(str(q, "group"), group) &&
				  json_is_object(json_object_get(q, "priced")))
	    any = 1;
	if (!any)
		return;
	print_cost_header(f);
	json_array_foreach(rows, j, q) if (!strcmp(str(q, "group"), group))
	    print_cost_row(f, q);
}

/* qsort order of an eval group's rows: by method and solver, then a
 * DEQ's f_tol from loose to tight and its cap, an unrolled net's depth. */
static int eval_order(const void *pa, const void *pb)
{
	const json_t *a = json_object_get(*(json_t *const *)pa, "config");
	const json_t *b = json_object_get(*(json_t *const *)pb, "config");
	static const char *const keys[] = {"f_tol", "f_max_iter", "layers"};
	int d = strcmp(str(a, "method"), str(b, "method"));
	if (!d)
		d = strcmp(str(a, "f_solver"), str(b, "f_solver"));
	for (int i = 0; !d && i < 3; i++) {
		double x = at(a, keys[i]), y = at(b, keys[i]);
		if (i == 0)
			x = -x, y = -y;
		d = (x > y) - (x < y);
	}
	return d;
}

/* The rows of eval group group in eval_order (in the rows' order when out
 * of memory). */
static void print_eval_rows(FILE *f, const json_t *rows, const char *group)
{
	size_t j, n = 0;
	json_t *q, **v = malloc((json_array_size(rows) + 1) * sizeof(*v));
	json_array_foreach(rows, j, q)
	{
		if (strcmp(str(q, "group"), group))
			continue;
		if (v)
			v[n++] = q;
		else
			print_eval_row(f, q);
	}
	if (v)
		qsort(v, n, sizeof(*v), eval_order);
	for (j = 0; j < n; j++)
		print_eval_row(f, v[j]);
	free(v);
}

void report_print_term(FILE *f, const json_t *rows)
{
	size_t i, j;
	json_t *r, *q;
	json_array_foreach(rows, i, r)
	{
		int seen = 0, eval;
		json_array_foreach(
		    rows, j, q) if (j < i && !strcmp(str(q, "group"),
						     str(r, "group"))) seen = 1;
		if (seen)
			continue;
		if (i)
			fputc('\n', f);
		put_wrapped(f, "== ", str(r, "group"), "   ");
		eval = !strcmp(str(r, "kind"), "eval");
		(eval ? print_eval_header : print_header)(f);
		if (eval)
			print_eval_rows(f, rows, str(r, "group"));
		json_array_foreach(rows, j, q)
		{
			if (!eval && !strcmp(str(q, "group"), str(r, "group")))
				print_row(f, q);
		}
		print_notes(f, rows, str(r, "group"));
		print_cost(f, rows, str(r, "group"));
	}
}

void report_print_csv(FILE *f, const json_t *rows)
{
	static const char *const cols[] = {
	    "runs",
	    "step_ms.median",
	    "step_ms.gmean",
	    "step_ms.lo",
	    "step_ms.hi",
	    "step_x_unroll.ratio",
	    "step_x_unroll.lo",
	    "step_x_unroll.hi",
	    "step_x_unroll.median_ratio",
	    "inference_ms.median",
	    "inference_ms.gmean",
	    "inference_x_unroll.ratio",
	    "inference_x_unroll.median_ratio",
	    "inference_x_unroll.lo",
	    "inference_x_unroll.hi",
	    "inference_head_ms.gmean",
	    "inference_body_ms.gmean",
	    "inference_body_x_unroll.ratio",
	    "matched_unroll.layers",
	    "depth_solver_mib",
	    "depth_solver_x_unroll",
	    "total_mib",
	    "total_x_unroll",
	    "fwd_iters",
	    "fwd_converged",
	    "bwd_iters",
	    "bwd_converged",
	    "valid_ppl.mean",
	    "valid_ppl.sd",
	    "test_ppl.mean",
	    "test_ppl.sd",
	    "step_mean_ms.gmean",
	    "step_mean_ms.lo",
	    "step_mean_ms.hi",
	    "step_mean_x_unroll.ratio",
	    "step_mean_x_unroll.lo",
	    "step_mean_x_unroll.hi",
	    "priced.step_ms.gmean",
	    "priced.x_unroll.ratio",
	    "priced.early_ms.gmean",
	    "priced.late_ms.gmean",
	    "to_target.target_ppl",
	    "to_target.runs",
	    "to_target.reached",
	    "to_target.steps",
	    "to_target.train_s",
	    "to_target.train_s_x_unroll",
	};
	size_t i, k, j;
	json_t *r, *l;
	fprintf(f, "group,method,impl,kind,status");
	for (k = 0; k < sizeof(cols) / sizeof(*cols); k++)
		fprintf(f, ",%s", cols[k]);
	fprintf(f, ",health\n");
	json_array_foreach(rows, i, r)
	{
		const char *text[] = {"group", "method", "impl", "kind",
				      "status"};
		char labels[512] = "";
		size_t n = 0;
		for (k = 0; k < 5; k++) {
			if (k)
				fputc(',', f);
			report_csv_str(f, str(r, text[k]));
		}
		for (k = 0; k < sizeof(cols) / sizeof(*cols); k++) {
			double x = at(r, cols[k]);
			if (isfinite(x))
				fprintf(f, ",%.17g", x);
			else
				fputc(',', f);
		}
		json_array_foreach(
		    json_object_get(json_object_get(r, "health"), "labels"), j,
		    l) n +=
		    (size_t)snprintf(
			labels + n, n < sizeof(labels) ? sizeof(labels) - n : 0,
			"%s%s", j ? "; " : "", json_string_value(l));
		fputc(',', f);
		report_csv_str(f, labels);
		fputc('\n', f);
	}
}
