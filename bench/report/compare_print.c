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

static void print_pair_md(FILE *f, const json_t *p)
{
	char c[6][48], g[512], h[1024], gm[1536], mm[768], hm[3072];
	cell(c[0], 48, record_num(p, "step_ms_base"), 2);
	cell(c[1], 48, record_num(p, "step_ms_new"), 2);
	cell(c[2], 48, record_num(p, "step_ratio"), 3);
	cell(c[3], 48, record_num(p, "total_peak_ratio"), 3);
	cell(c[4], 48, record_num(p, "valid_ppl_ratio"), 3);
	snprintf(c[5], 48, "%.3g", record_num(p, "p"));
	if (!isfinite(record_num(p, "p")))
		snprintf(c[5], 48, "-");
	group_cell(g, sizeof(g), p);
	labels(h, sizeof(h), p);
	/* record strings inert in markdown (G14): columns, lines, no markup */
	textsafe_md(gm, sizeof(gm), g);
	textsafe_md(mm, sizeof(mm), str(p, "method"));
	textsafe_md(hm, sizeof(hm), h);
	fprintf(f,
		"| %s | %s | %s | %lld/%lld | %s | %s | %s | %s | %s | %s "
		"(%lld+%lld) | %s%s%s%s | %s |\n",
		gm, mm, str(p, "time"), integer(p, "runs_base"),
		integer(p, "runs_new"), c[0], c[1], c[2], c[3], c[4], c[5],
		integer(p, "n_base"), integer(p, "n_new"), str(p, "verdict"),
		*str(p, "reason") ? " (" : "", str(p, "reason"),
		*str(p, "reason") ? ")" : "", hm);
}

static void print_md(FILE *f, const json_t *res)
{
	size_t i;
	json_t *p;
	int undecided = 0;
	fprintf(f, "| group | method | time | runs base/new | base ms | new ms "
		   "| new/base | total peak new/base | valid ppl new/base | "
		   "p (U test on run medians, n base+new) | verdict | health, "
		   "notes |\n"
		   "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
		   "\n");
	json_array_foreach(json_object_get(res, "pairs"), i, p)
	{
		print_pair_md(f, p);
		undecided |= !strcmp(str(p, "verdict"), "UNDECIDED");
	}
	if (undecided)
		fprintf(f, "\nUNDECIDED: with so few runs no p of the U test "
			   "falls below alpha (3+3 runs: 0.1 at best; 4+4: "
			   "0.029); run more repeats. --fail-above judges "
			   "such a pair by its ratio alone.\n");
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
	fprintf(f, ",samples,verdict,time,p_min,reason,notes\n");
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
			fprintf(f, ",%s,,,\n", str(p, "time"));
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
