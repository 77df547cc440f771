/* compare_print.c — see compare.h: compare's result as a markdown table,
 * CSV or JSON. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compare.h"
#include "../records/record.h"
#include "report.h"

#define fmt report_fmt

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

/* The health labels of both sides, "-" when none. */
static void labels(char *buf, size_t n, const json_t *p)
{
	const char *side[] = {"health_base", "health_new"};
	size_t l = 0, i;
	json_t *s;
	buf[0] = 0;
	for (int k = 0; k < 2; k++)
		json_array_foreach(json_object_get(p, side[k]), i, s) l +=
		    (size_t)snprintf(buf + l, l < n ? n - l : 0, "%s%s %s",
				     l ? ", " : "", k ? "new" : "base",
				     json_string_value(s));
	if (!buf[0])
		snprintf(buf, n, "-");
}

static void print_md(FILE *f, const json_t *res)
{
	size_t i;
	json_t *p;
	fprintf(f, "| group | method | runs base/new | base ms | new ms | "
		   "time new/base | total peak new/base | valid ppl new/base | "
		   "p (U test; samples) | verdict | health |\n"
		   "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
	json_array_foreach(json_object_get(res, "pairs"), i, p)
	{
		char c[6][32], h[512];
		fmt(c[0], 32, record_num(p, "step_ms_base"), "%.2f");
		fmt(c[1], 32, record_num(p, "step_ms_new"), "%.2f");
		fmt(c[2], 32, record_num(p, "step_ratio"), "%.3f");
		fmt(c[3], 32, record_num(p, "total_peak_ratio"), "%.3f");
		fmt(c[4], 32, record_num(p, "valid_ppl_ratio"), "%.3f");
		fmt(c[5], 32, record_num(p, "p"), "%.3g");
		labels(h, sizeof(h), p);
		fprintf(
		    f,
		    "| %s | %s | %lld/%lld | %s | %s | %s | %s | %s | %s "
		    "(%lld+%lld %s) | %s | %s |\n",
		    str(p, "group"), str(p, "method"),
		    (long long)json_integer_value(
			json_object_get(p, "runs_base")),
		    (long long)json_integer_value(
			json_object_get(p, "runs_new")),
		    c[0], c[1], c[2], c[3], c[4], c[5],
		    (long long)json_integer_value(json_object_get(p, "n_base")),
		    (long long)json_integer_value(json_object_get(p, "n_new")),
		    str(p, "samples"), str(p, "verdict"), h);
	}
	for (int side = 0; side < 2; side++) {
		const json_t *u = json_object_get(res, side ? "unpaired_new"
							    : "unpaired_base");
		json_array_foreach(u, i, p) fprintf(
		    f, "%sunpaired, only in %s: %s %s (%lld runs)\n",
		    i ? "" : "\n", side ? "NEW" : "BASE", str(p, "group"),
		    str(p, "method"),
		    (long long)json_integer_value(json_object_get(p, "runs")));
	}
}

static void csv_num(FILE *f, double x)
{
	if (isfinite(x))
		fprintf(f, ",%.17g", x);
	else
		fputc(',', f);
}

static void print_csv(FILE *f, const json_t *res)
{
	static const char *const nums[] = {"runs_base",
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
	size_t i, k;
	json_t *p;
	fprintf(f, "kind,group,method");
	for (k = 0; k < sizeof(nums) / sizeof(*nums); k++)
		fprintf(f, ",%s", nums[k]);
	fprintf(f, ",samples,verdict\n");
	json_array_foreach(json_object_get(res, "pairs"), i, p)
	{
		fprintf(f, "pair,");
		report_csv_str(f, str(p, "group"));
		fputc(',', f);
		report_csv_str(f, str(p, "method"));
		for (k = 0; k < sizeof(nums) / sizeof(*nums); k++)
			csv_num(f, record_num(p, nums[k]));
		fputc(',', f);
		report_csv_str(f, str(p, "samples"));
		fprintf(f, ",%s\n", str(p, "verdict"));
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
			fprintf(f, "%s\n", ",,,,,,,,,,,,,,");
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
