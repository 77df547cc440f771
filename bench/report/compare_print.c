/* compare_print.c — see compare.h: compare's result as a markdown table,
 * CSV or JSON, and the gate of --fail-above. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "../records/record.h"
#include "report.h"
#include "textsafe.h"

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static long long integer(const json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

/* x into buf with prec decimals, or with prec + 2 significant digits where
 * fixed notation would be long (1e308 ms, a huge ratio: all of it, never
 * cut by the buffer); "-" when x is not finite (a null figure). */
static void cell(char *buf, size_t n, double x, int prec)
{
	if (!isfinite(x))
		snprintf(buf, n, "-");
	else if (fabs(x) < 1e7)
		snprintf(buf, n, "%.*f", prec, x);
	else
		snprintf(buf, n, "%.*g", prec + 2, x);
}

/* The health labels of both sides, then the notes, "-" when none. */
static void labels(char *buf, size_t n, const json_t *p)
{
	const char *side[] = {"health_base", "health_new", "notes"};
	size_t l = 0, i;
	json_t *s;
	buf[0] = 0;
	for (int k = 0; k < 3; k++)
		json_array_foreach(json_object_get(p, side[k]), i, s) l +=
		    (size_t)snprintf(buf + l, l < n ? n - l : 0, "%s%s%s",
				     l ? ", " : "",
				     k == 2 ? ""
				     : k    ? "new "
					    : "base ",
				     json_string_value(s));
	if (!buf[0])
		snprintf(buf, n, "-");
}

/* The group cell: the group, and with --match the key's values when they
 * differ ("threads 1 -> 2"). */
static void group_cell(char *buf, size_t n, const json_t *p)
{
	const json_t *m = json_object_get(p, "match");
	char *b, *v;
	if (!m ||
	    json_equal(json_object_get(m, "base"), json_object_get(m, "new"))) {
		snprintf(buf, n, "%s", str(p, "group"));
		return;
	}
	b = record_value_text(json_object_get(m, "base"));
	v = record_value_text(json_object_get(m, "new"));
	snprintf(buf, n, "%s, %s %s -> %s", str(p, "group"), str(m, "key"),
		 b ? b : "-", v ? v : "-");
	free(b);
	free(v);
}

/* "P (smallest P_MIN; NB+NN)" of pair p's test at prefix ("" or
 * "x_unroll."); "-" for p where it has none. */
static void p_cell(char *buf, size_t n, const json_t *p, const char *prefix)
{
	char k[4][32], pv[24], pm[24];
	snprintf(k[0], sizeof(k[0]), "%sp", prefix);
	snprintf(k[1], sizeof(k[1]), "%sp_min", prefix);
	snprintf(k[2], sizeof(k[2]), "%sn_base", prefix);
	snprintf(k[3], sizeof(k[3]), "%sn_new", prefix);
	snprintf(pv, sizeof(pv), "%.3g", record_num(p, k[0]));
	snprintf(pm, sizeof(pm), "%.2g", record_num(p, k[1]));
	if (!isfinite(record_num(p, k[1]))) {
		snprintf(buf, n, "-");
		return;
	}
	snprintf(buf, n, "%s (smallest %s; %lld+%lld)",
		 isfinite(record_num(p, k[0])) ? pv : "-", pm,
		 (long long)record_num(p, k[2]),
		 (long long)record_num(p, k[3]));
}

/* The × unroll cells of pair p: BASE's and NEW's medians, NEW / BASE with
 * its p, and the verdict with its reason. */
static void x_unroll_cells(char c[4][400], const json_t *p)
{
	const json_t *x = json_object_get(p, "x_unroll");
	const char *v = str(x, "verdict"), *why = str(x, "reason");
	char pc[80];
	cell(c[0], 400, record_num(x, "base"), 3);
	cell(c[1], 400, record_num(x, "new"), 3);
	cell(c[2], 400, record_num(x, "ratio"), 3);
	p_cell(pc, sizeof(pc), p, "x_unroll.");
	if (strcmp(pc, "-"))
		snprintf(c[2] + strlen(c[2]), 400 - strlen(c[2]), ", p %s", pc);
	snprintf(c[3], 400, "%s%s%s%s", *v ? v : "-", *v && *why ? " (" : "",
		 *v ? why : "", *v && *why ? ")" : "");
}

static void print_pair_md(FILE *f, const json_t *p)
{
	char c[6][48], x[4][400], g[512], h[1024], gm[1536], mm[768], hm[3072];
	char pc[80];
	cell(c[0], 48, record_num(p, "step_ms_base"), 2);
	cell(c[1], 48, record_num(p, "step_ms_new"), 2);
	cell(c[2], 48, record_num(p, "step_ratio"), 3);
	cell(c[3], 48, record_num(p, "total_peak_ratio"), 3);
	cell(c[4], 48, record_num(p, "valid_ppl_ratio"), 3);
	p_cell(pc, sizeof(pc), p, "");
	x_unroll_cells(x, p);
	group_cell(g, sizeof(g), p);
	labels(h, sizeof(h), p);
	/* record strings inert in markdown (G14): columns, lines, no markup */
	textsafe_md(gm, sizeof(gm), g);
	textsafe_md(mm, sizeof(mm), str(p, "method"));
	textsafe_md(hm, sizeof(hm), h);
	fprintf(f,
		"| %s | %s | %s | %lld/%lld | %s | %s | %s | %s | %s%s%s%s | "
		"%s | %s | %s | %s | %s | %s | %s |\n",
		gm, mm, str(p, "time"), integer(p, "runs_base"),
		integer(p, "runs_new"), c[0], c[1], c[2], pc, str(p, "verdict"),
		*str(p, "reason") ? " (" : "", str(p, "reason"),
		*str(p, "reason") ? ")" : "", x[0], x[1], x[2], x[3], c[3],
		c[4], hm);
}

static void print_md(FILE *f, const json_t *res)
{
	size_t i;
	json_t *p;
	int undecided = 0, need = 0;
	fprintf(f, "| group | method | time | runs base/new | base ms | new ms "
		   "| new/base | p (U test on run means; smallest p; n "
		   "base+new) | verdict | × unroll base | × unroll new | "
		   "× unroll new/base | × unroll verdict | total peak "
		   "new/base | valid ppl new/base | health, notes |\n"
		   "|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"
		   "---|---:|---:|---|\n");
	json_array_foreach(json_object_get(res, "pairs"), i, p)
	{
		print_pair_md(f, p);
		undecided |=
		    !strcmp(str(p, "verdict"), "UNDECIDED") ||
		    !strcmp(str(json_object_get(p, "x_unroll"), "verdict"),
			    "UNDECIDED");
		need = (int)integer(p, "need_n");
	}
	if (json_array_size(json_object_get(res, "pairs")))
		fprintf(f,
			"\nms: the median of the runs' mean step times (one "
			"sample a "
			"run); × unroll: each run's mean over its file's "
			"unroll run "
			"of the same seed, which carries across machines.\n");
	if (undecided)
		fprintf(f,
			"UNDECIDED: too few runs to call: the smallest p the "
			"exact U test can reach at those n is not below alpha "
			"(3+3 runs: 0.1 at best); run at least %d a side. "
			"--fail-above judges such a pair by its ratio alone.\n",
			need);
	for (int side = 0; side < 2; side++) {
		const json_t *u = json_object_get(res, side ? "unpaired_new"
							    : "unpaired_base");
		char g[768], m[768];
		json_array_foreach(u, i, p)
		{
			textsafe_md(g, sizeof(g), str(p, "group"));
			textsafe_md(m, sizeof(m), str(p, "method"));
			fprintf(f,
				"%sunpaired, only in %s: %s %s (%lld runs)\n",
				i ? "" : "\n", side ? "NEW" : "BASE", g, m,
				integer(p, "runs"));
		}
	}
}

static void csv_num(FILE *f, double x)
{
	if (isfinite(x))
		fprintf(f, ",%.17g", x);
	else
		fputc(',', f);
}

static const char *const csv_nums[] = {"runs_base",
				       "runs_new",
				       "step_ms_base",
				       "step_ms_new",
				       "step_ratio",
				       "total_peak_ratio",
				       "depth_solver_ratio",
				       "valid_ppl_ratio",
				       "n_base",
				       "n_new",
				       "u",
				       "p"};
#define CSV_NUMS (sizeof(csv_nums) / sizeof(*csv_nums))

/* The members of a pair's x_unroll object, in its CSV columns
 * (x_unroll_base ...); the last two are strings. */
static const char *const csv_x[] = {"base",    "new",	"ratio", "n_base",
				    "n_new",   "u",	"p",	 "p_min",
				    "verdict", "reason"};
#define CSV_X (sizeof(csv_x) / sizeof(*csv_x))

static void csv_x_unroll(FILE *f, const json_t *x)
{
	for (size_t k = 0; k < CSV_X - 2; k++)
		csv_num(f, record_num(x, csv_x[k]));
	fputc(',', f);
	report_csv_str(f, str(x, "verdict"));
	fputc(',', f);
	report_csv_str(f, str(x, "reason"));
}

/* The pair's notes as one CSV field, "; " between them. */
static void csv_notes(FILE *f, const json_t *p)
{
	char buf[1024];
	size_t l = 0, i;
	json_t *s;
	buf[0] = 0;
	json_array_foreach(json_object_get(p, "notes"), i, s) l +=
	    (size_t)snprintf(buf + l, l < sizeof(buf) ? sizeof(buf) - l : 0,
			     "%s%s", l ? "; " : "", json_string_value(s));
	report_csv_str(f, buf);
}

static void print_csv(FILE *f, const json_t *res)
{
	size_t i, k;
	json_t *p;
	fprintf(f, "kind,group,method");
	for (k = 0; k < CSV_NUMS; k++)
		fprintf(f, ",%s", csv_nums[k]);
	fprintf(f, ",samples,verdict,time,p_min,reason,notes,need_n");
	for (k = 0; k < CSV_X; k++)
		fprintf(f, ",x_unroll_%s", csv_x[k]);
	fputc('\n', f);
	json_array_foreach(json_object_get(res, "pairs"), i, p)
	{
		fprintf(f, "pair,");
		report_csv_str(f, str(p, "group"));
		fputc(',', f);
		report_csv_str(f, str(p, "method"));
		for (k = 0; k < CSV_NUMS; k++)
			csv_num(f, record_num(p, csv_nums[k]));
		fputc(',', f);
		report_csv_str(f, str(p, "samples"));
		fprintf(f, ",%s,%s", str(p, "verdict"), str(p, "time"));
		csv_num(f, record_num(p, "p_min"));
		fputc(',', f);
		report_csv_str(f, str(p, "reason"));
		fputc(',', f);
		csv_notes(f, p);
		csv_num(f, record_num(p, "need_n"));
		csv_x_unroll(f, json_object_get(p, "x_unroll"));
		fputc('\n', f);
	}
	for (int side = 0; side < 2; side++)
		json_array_foreach(json_object_get(res, side ? "unpaired_new"
							     : "unpaired_base"),
				   i, p)
		{
			fprintf(f, "%s,", side ? "only_new" : "only_base");
			report_csv_str(f, str(p, "group"));
			fputc(',', f);
			report_csv_str(f, str(p, "method"));
			/* the numbers, samples, verdict; then time */
			for (k = 0; k < CSV_NUMS + 2; k++)
				fputc(',', f);
			fprintf(f, ",%s,,,,", str(p, "time"));
			for (k = 0; k < CSV_X; k++)
				fputc(',', f);
			fputc('\n', f);
		}
}

void compare_print(FILE *f, const json_t *res, enum compare_format fmt_)
{
	if (fmt_ == COMPARE_JSON) {
		json_dumpf(res, f, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
		fputc('\n', f);
	} else if (fmt_ == COMPARE_CSV)
		print_csv(f, res);
	else
		print_md(f, res);
}

/* Why pair p fails --fail-above pct, into why; 0 when it passes. */
static int gate_one(const json_t *p, double pct, char *why, size_t n)
{
	const char *v = str(p, "verdict");
	double r = record_num(p, "step_ms_new") / record_num(p, "step_ms_base");
	char rs[48];
	cell(rs, sizeof(rs), r, 3);
	if (!strcmp(v, "SLOWER") && r > 1 + pct / 100)
		snprintf(why, n, "SLOWER by more than %g%% (new/base %s)", pct,
			 rs);
	else if (!strcmp(v, "UNDECIDED") && r > 1 + pct / 100)
		snprintf(why, n,
			 "UNDECIDED (%s) and new/base %s is more than %g%% "
			 "slower: the test cannot decide, so the ratio alone",
			 str(p, "reason"), rs, pct);
	else if (!strcmp(v, "NEW DIVERGED") || !strcmp(v, "NO DATA"))
		snprintf(why, n, "%s (%s)", v, str(p, "reason"));
	else
		return 0;
	return 1;
}

int compare_gate(const json_t *result, double pct, FILE *why)
{
	size_t i;
	json_t *p;
	int n = 0;
	json_array_foreach(json_object_get(result, "pairs"), i, p)
	{
		char w[400], g[512];
		if (!gate_one(p, pct, w, sizeof(w)))
			continue;
		n++;
		group_cell(g, sizeof(g), p);
		if (why)
			fprintf(why,
				"deqbench: compare: --fail-above %g: %s %s: "
				"%s\n",
				pct, g, str(p, "method"), w);
	}
	return n;
}
