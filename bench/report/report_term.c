/* report_term.c — see report.h: the rows as a terminal table at most
 * REPORT_TERM_WIDTH columns wide (each group once as a heading line, short
 * method labels, units in the header, health labels as notes under the
 * group), and as CSV. */
#include <math.h>
#include <stdio.h>
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

/* x with digits decimals, "-" when not finite. */
static void fmt(char *buf, size_t n, double x, int digits)
{
	char f[8];
	snprintf(f, sizeof(f), "%%.%df", digits);
	report_fmt(buf, n, x, f);
}

/* "x [lo-hi]", or "x" without an interval; digits chosen by magnitude. */
static void fmt_ci(char *buf, size_t n, const json_t *o, const char *center)
{
	double x = at(o, center), lo = at(o, "lo"), hi = at(o, "hi");
	/* at most 19 columns for any value up to 99999 */
	int d = !isfinite(x) || fabs(x) >= 100 ? 0 : fabs(x) >= 10 ? 1 : 2;
	char a[16], b[16], c[16];
	fmt(a, sizeof(a), x, d);
	if (!isfinite(lo) || !isfinite(hi)) {
		snprintf(buf, n, "%s", a);
		return;
	}
	fmt(b, sizeof(b), lo, d);
	fmt(c, sizeof(c), hi, d);
	snprintf(buf, n, "%s [%s-%s]", a, b, c);
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
	fmt(a, sizeof(a), isfinite(f) ? floor(100 * f) : NAN, 0);
	fmt(c, sizeof(c), isfinite(b) ? floor(100 * b) : NAN, 0);
	snprintf(buf, n, "%s/%s", a, c);
}

static void fmt_ppl(char *buf, size_t n, const json_t *row)
{
	double m = at(row, "valid_ppl.mean"), sd = at(row, "valid_ppl.sd");
	if (isfinite(m) && isfinite(sd))
		snprintf(buf, n, "%.1f±%.1f", m, sd);
	else
		fmt(buf, n, m, 1);
}

#define METHOD_W 18

static void print_header(FILE *f)
{
	fprintf(f, "  %-*s %2s %19s %19s %6s %6s %7s %12s %s\n", METHOD_W,
		"method", "n", "step ms [95% CI]", "x unroll [95%]", "d+s x",
		"tot x", "f/b cv%", "valid ppl", "!");
}

static void print_row(FILE *f, const json_t *row)
{
	char m[96], step[64], x[64], ds[16], tot[16], conv[16], ppl[32];
	int labelled = json_array_size(json_object_get(
			   json_object_get(row, "health"), "labels")) > 0;
	int mw = textsafe_term(m, sizeof(m), str(row, "method"), METHOD_W);
	fmt_ci(step, sizeof(step), json_object_get(row, "step_ms"), "gmean");
	if (json_is_true(
		json_object_get(json_object_get(row, "step_x_unroll"), "self")))
		snprintf(x, sizeof(x), "1");
	else
		fmt_ci(x, sizeof(x), json_object_get(row, "step_x_unroll"),
		       "ratio");
	fmt(ds, sizeof(ds), at(row, "depth_solver_x_unroll"), 3);
	fmt(tot, sizeof(tot), at(row, "total_x_unroll"), 3);
	fmt_conv(conv, sizeof(conv), row);
	fmt_ppl(ppl, sizeof(ppl), row);
	fprintf(f, "  %s%*s %2lld %19s %19s %6s %6s %7s %12s %s\n", m,
		METHOD_W - mw, "",
		(long long)json_integer_value(json_object_get(row, "runs")),
		step, x, ds, tot, conv, ppl, labelled ? "!" : "");
}

/* The health notes of a group's rows: "! METHOD: LABELS". */
static void print_notes(FILE *f, const json_t *rows, const char *group)
{
	size_t i, j;
	json_t *r, *l;
	char t[1024];
	json_array_foreach(rows, i, r)
	{
		const json_t *labels =
		    json_object_get(json_object_get(r, "health"), "labels");
		if (strcmp(str(r, "group"), group) || !json_array_size(labels))
			continue;
		textsafe_term(t, sizeof(t), str(r, "method"), -1);
		fprintf(f, "  ! %s:", t);
		json_array_foreach(labels, j, l)
		    fprintf(f, "%s %s", j ? "," : "", json_string_value(l));
		fputc('\n', f);
	}
}

void report_print_term(FILE *f, const json_t *rows)
{
	size_t i, j;
	json_t *r, *q;
	char g[1024];
	json_array_foreach(rows, i, r)
	{
		int seen = 0;
		json_array_foreach(
		    rows, j, q) if (j < i && !strcmp(str(q, "group"),
						     str(r, "group"))) seen = 1;
		if (seen)
			continue;
		textsafe_term(g, sizeof(g), str(r, "group"), -1);
		fprintf(f, "%s== %s\n", i ? "\n" : "", g);
		print_header(f);
		json_array_foreach(
		    rows, j, q) if (!strcmp(str(q, "group"), str(r, "group")))
		    print_row(f, q);
		print_notes(f, rows, str(r, "group"));
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
