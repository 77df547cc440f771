/* report_print.c — see report.h: the rows (report_rows) as the markdown
 * summary table and the deqbench / PyTorch table. */
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

void report_fmt(char *buf, size_t n, double x, const char *f)
{
	if (!isfinite(x))
		snprintf(buf, n, "-");
	else if (snprintf(buf, n, f, x) >= (int)n) /* 1e300 with %.2f */
		snprintf(buf, n, "%.6g", x);
}

void report_csv_str(FILE *f, const char *s)
{
	textsafe_csv(f, s);
}

/* Member k of o (a string) as markdown cell text into buf. */
static const char *md_str(char *buf, size_t n, const json_t *o, const char *k)
{
	textsafe_md(buf, n, json_string_value(json_object_get(o, k)));
	return buf;
}

#define fmt report_fmt

/* A fraction in [0, 1] as a percentage with one decimal; never rounded to
 * 100.0% or 0.0% unless it is exactly that, so a solve that missed its
 * tolerance once in 2000 steps does not read as always converged. */
static void fmt_pct(char *buf, size_t n, double x)
{
	double p = 100 * x;
	if (p < 100 && p > 99.9)
		p = 99.9;
	else if (p > 0 && p < 0.1)
		p = 0.1;
	fmt(buf, n, isfinite(x) ? p : NAN, "%.1f%%");
}

/* An interval or ratio object o (report.h) as "x [lo, hi]" of its member
 * center (ci; else x alone): "1" on the unroll row's own ratio, and
 * "x (n=2: no interval)" where too few runs give none. */
static void fmt_est(char *buf, size_t n, const json_t *o, const char *center,
		    int ci)
{
	double x = at(o, center), lo = at(o, "lo"), hi = at(o, "hi");
	int few = report_few_runs(o);
	char a[40], b[40], c[40];
	fmt(a, sizeof(a), x, "%.2f");
	if (isfinite(x) && json_is_true(json_object_get(o, "self")))
		snprintf(buf, n, "1");
	else if (ci && isfinite(x) && isfinite(lo) && isfinite(hi)) {
		fmt(b, sizeof(b), lo, "%.2f");
		fmt(c, sizeof(c), hi, "%.2f");
		snprintf(buf, n, "%s [%s, %s]", a, b, c);
	} else if (ci && isfinite(x) && few)
		snprintf(buf, n, "%s (n=%d: no interval)", a, few);
	else
		snprintf(buf, n, "%s", a);
}

int report_few_runs(const json_t *o)
{
	const json_t *n = json_object_get(o, "n");
	const json_t *nu = json_object_get(o, "n_unroll");
	json_int_t k = json_integer_value(n);
	if (!json_is_integer(n) || json_is_number(json_object_get(o, "lo")) ||
	    json_is_true(json_object_get(o, "self")))
		return 0;
	if (json_is_integer(nu) && json_integer_value(nu) < k)
		k = json_integer_value(nu);
	return k >= 1 && k < REPORT_MIN_CI_RUNS ? (int)k : 0;
}

/* The health column: the row's labels, or "healthy" (eval rows: "-"). */
static void fmt_health(char *buf, size_t n, const json_t *row)
{
	const json_t *labels =
	    json_object_get(json_object_get(row, "health"), "labels");
	size_t i, l = 0;
	json_t *s;
	buf[0] = 0;
	json_array_foreach(labels, i, s) l +=
	    (size_t)snprintf(buf + l, l < n ? n - l : 0, "%s%s", i ? ", " : "",
			     json_string_value(s));
	if (!buf[0])
		snprintf(buf, n, "%s",
			 strcmp(json_string_value(json_object_get(row, "kind")),
				"eval")
			     ? "healthy"
			     : "-");
}

static void print_header(FILE *f)
{
	fprintf(f, "| group | method | status | runs | health | step ms "
		   "[95%% CI] | × unroll [95%% CI] | infer ms | × unroll "
		   "| depth+solver MiB | × unroll | total peak MiB | × unroll "
		   "| fwd iters | fwd converged | bwd iters | bwd converged "
		   "| valid ppl |\n");
	fprintf(f, "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"
		   "---:|---:|---:|---:|---:|---:|\n");
}

static void print_row(FILE *f, const json_t *row)
{
	char c[12][128], h[256], hs[768], g[768], m[768], st[64];
	fmt_est(c[0], 128, json_object_get(row, "step_ms"), "gmean", 1);
	fmt_est(c[1], 128, json_object_get(row, "step_x_unroll"), "ratio", 1);
	fmt_est(c[2], 128, json_object_get(row, "inference_ms"), "gmean", 0);
	fmt_est(c[3], 128, json_object_get(row, "inference_x_unroll"), "ratio",
		0);
	fmt(c[4], 128, at(row, "depth_solver_mib"), "%.2f");
	fmt(c[5], 128, at(row, "depth_solver_x_unroll"), "%.3f");
	fmt(c[6], 128, at(row, "total_mib"), "%.2f");
	fmt(c[7], 128, at(row, "total_x_unroll"), "%.3f");
	fmt(c[8], 128, at(row, "fwd_iters"), "%.1f");
	fmt_pct(c[9], 128, at(row, "fwd_converged"));
	fmt(c[10], 128, at(row, "bwd_iters"), "%.1f");
	fmt_pct(c[11], 128, at(row, "bwd_converged"));
	fmt_health(h, sizeof(h), row);
	textsafe_md(hs, sizeof(hs), h);
	fprintf(f,
		"| %s | %s | %s | %lld | %s | %s | %s | %s | %s | %s | %s | "
		"%s | %s | %s | %s | %s | %s | ",
		md_str(g, sizeof(g), row, "group"),
		md_str(m, sizeof(m), row, "method"),
		md_str(st, sizeof(st), row, "status"),
		(long long)json_integer_value(json_object_get(row, "runs")), hs,
		c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9],
		c[10], c[11]);
	if (isfinite(at(row, "valid_ppl.sd")))
		fprintf(f, "%.2f ± %.2f |\n", at(row, "valid_ppl.mean"),
			at(row, "valid_ppl.sd"));
	else {
		fmt(c[0], 128, at(row, "valid_ppl.mean"), "%.2f");
		fprintf(f, "%s |\n", c[0]);
	}
}

/* Each deqbench row beside the pytorch row of the same config: step time
 * and depth+solver peak, and PyTorch's / deqbench's. */
static void print_peer_table(FILE *f, const json_t *rows)
{
	int header = 0;
	size_t j;
	json_t *r;
	json_array_foreach(rows, j, r)
	{
		const json_t *p = json_array_get(
		    rows, (size_t)json_integer_value(
			      json_object_get(r, "pytorch_row")));
		char c[6][32], g[768], m[768];
		double ms, pms, ds, pds;
		if (!json_is_integer(json_object_get(r, "pytorch_row")) || !p)
			continue;
		if (!header++)
			fprintf(f, "\n| group | method | deqbench step ms | "
				   "pytorch step ms | pytorch / deqbench | "
				   "deqbench depth+solver MiB | pytorch "
				   "depth+solver MiB | pytorch / deqbench |\n"
				   "|---|---|---:|---:|---:|---:|---:|---:|\n");
		ms = at(r, "step_ms.gmean");
		pms = at(p, "step_ms.gmean");
		ds = at(r, "depth_solver_mib");
		pds = at(p, "depth_solver_mib");
		fmt(c[0], 32, ms, "%.2f");
		fmt(c[1], 32, pms, "%.2f");
		fmt(c[2], 32, pms / ms, "%.2f");
		fmt(c[3], 32, ds, "%.2f");
		fmt(c[4], 32, pds, "%.2f");
		fmt(c[5], 32, pds / ds, "%.2f");
		fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s |\n",
			md_str(g, sizeof(g), r, "group"),
			md_str(m, sizeof(m), r, "method"), c[0], c[1], c[2],
			c[3], c[4], c[5]);
	}
}

/* The measured and priced table (report --price): per priced row the
 * measured mean step ms [95%], the priced ms, × unroll of each, priced /
 * measured, early and late (measured from the trace, priced from work's
 * first and last tenth) and the row's pricing note. */
static void print_cost_table(FILE *f, const json_t *rows)
{
	int header = 0;
	size_t j;
	json_t *r;
	json_array_foreach(rows, j, r)
	{
		const json_t *p = json_object_get(r, "priced");
		char c[9][64], g[768], m[768], note[256];
		if (!json_is_object(p))
			continue;
		if (!header++)
			fprintf(f, "\n| group | method | mean step ms [95%%] | "
				   "priced ms | x unroll [95%%] | priced x "
				   "unroll | priced / measured | measured "
				   "early ms | measured late ms | priced "
				   "early ms | priced late ms | note |\n"
				   "|---|---|---:|---:|---:|---:|---:|---:|---:"
				   "|---:|---:|---|\n");
		fmt_est(c[0], 64, json_object_get(r, "step_mean_ms"), "gmean",
			1);
		fmt(c[1], 64, at(p, "step_ms.gmean"), "%.2f");
		fmt_est(c[2], 64, json_object_get(r, "step_mean_x_unroll"),
			"ratio", 1);
		fmt_est(c[3], 64, json_object_get(p, "x_unroll"), "ratio", 0);
		fmt(c[4], 64, at(p, "x_measured"), "%.3f");
		fmt(c[5], 64, at(r, "early_ms.gmean"), "%.2f");
		fmt(c[6], 64, at(r, "late_ms.gmean"), "%.2f");
		fmt(c[7], 64, at(p, "early_ms.gmean"), "%.2f");
		fmt(c[8], 64, at(p, "late_ms.gmean"), "%.2f");
		textsafe_md(note, sizeof(note),
			    json_string_value(json_object_get(p, "note")));
		fprintf(
		    f,
		    "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
		    "| %s |\n",
		    md_str(g, sizeof(g), r, "group"),
		    md_str(m, sizeof(m), r, "method"), c[0], c[1], c[2], c[3],
		    c[4], c[5], c[6], c[7], c[8], note);
	}
}

/* The eval rows' table: per row its evaluation keys (a DEQ's
 * f_tol and f_max_iter, an unrolled net's depth L), runs (trained seeds),
 * ms per valid batch [95% CI], the head's and the rest's ms, x unroll
 * [95% CI] of the whole and of the rest against the matched unroll row
 * (named), valid and test ppl and forward evaluations per batch. */
static void print_eval_table(FILE *f, const json_t *rows)
{
	int header = 0;
	size_t j;
	json_t *r;
	json_array_foreach(rows, j, r)
	{
		const json_t *c = json_object_get(r, "config");
		const json_t *mu = json_object_get(r, "matched_unroll");
		const char *meth =
		    json_string_value(json_object_get(c, "method"));
		int deq = meth && !strcmp(meth, "deq");
		char k[3][32], e[8][128], g[768], m[768], lab[768];
		const char *kind =
		    json_string_value(json_object_get(r, "kind"));
		if (!kind || strcmp(kind, "eval"))
			continue;
		if (!header++)
			fprintf(f,
				"\n| group | method | f_tol | f_max_iter | L "
				"| runs | ms per valid batch [95%% CI] | "
				"head ms | rest ms | × unroll [95%% CI] | "
				"rest × unroll | against | valid ppl | test "
				"ppl | fwd evals per batch |\n"
				"|---|---|---:|---:|---:|---:|---:|---:|---:|"
				"---:|---:|---|---:|---:|---:|\n");
		fmt(k[0], 32, deq ? at(c, "f_tol") : NAN, "%g");
		fmt(k[1], 32, deq ? at(c, "f_max_iter") : NAN, "%.0f");
		fmt(k[2], 32, deq ? NAN : at(c, "layers"), "%.0f");
		fmt_est(e[0], 128, json_object_get(r, "inference_ms"), "gmean",
			1);
		fmt(e[1], 128, at(r, "inference_head_ms.gmean"), "%.2f");
		fmt(e[2], 128, at(r, "inference_body_ms.gmean"), "%.2f");
		fmt_est(e[3], 128, json_object_get(r, "inference_x_unroll"),
			"ratio", 1);
		fmt_est(e[4], 128,
			json_object_get(r, "inference_body_x_unroll"), "ratio",
			0);
		fmt(e[5], 128, at(r, "test_ppl.mean"), "%.2f");
		fmt(e[6], 128, at(r, "valid_ppl.mean"), "%.2f");
		fmt(e[7], 128, at(r, "forward_evals"), "%.1f");
		textsafe_md(m, sizeof(m),
			    json_string_value(json_object_get(mu, "method")));
		fprintf(
		    f,
		    "| %s | %s | %s | %s | %s | %lld | %s | %s | %s | %s | "
		    "%s | %s%s | %s | %s | %s |\n",
		    md_str(g, sizeof(g), r, "group"),
		    md_str(lab, sizeof(lab), r, "method"), k[0], k[1], k[2],
		    (long long)json_integer_value(json_object_get(r, "runs")),
		    e[0], e[1], e[2], e[3], e[4], mu ? m : "-",
		    json_is_false(json_object_get(mu, "as_good"))
			? " (none as good)"
			: "",
		    e[6], e[5], e[7]);
	}
}

int report_commits_text(char *buf, size_t n, const json_t *row)
{
	const json_t *c = json_object_get(row, "commits");
	const char *fp = json_string_value(json_object_get(row, "fingerprint"));
	size_t i, l;
	json_t *v;
	buf[0] = 0;
	if (!fp || json_array_size(c) < 2)
		return 0;
	l = (size_t)snprintf(buf, n, "commits");
	json_array_foreach(c, i, v) if (l < n) l += (size_t)snprintf(
	    buf + l, n - l, "%s %s", i ? "," : "", json_string_value(v));
	if (l < n)
		snprintf(buf + l, n - l, " (one fingerprint, %s)", fp);
	return 1;
}

/* "- GROUP METHOD: commits ..." for each row of several commits. */
static void print_commits(FILE *f, const json_t *rows)
{
	char t[1024], s[2048], g[768], m[768];
	int first = 1;
	size_t j;
	json_t *r;
	json_array_foreach(rows, j, r)
	{
		if (!report_commits_text(t, sizeof(t), r))
			continue;
		if (first)
			fprintf(f, "\nRows combining commits of one build "
				   "fingerprint (the same code):\n\n");
		first = 0;
		textsafe_md(s, sizeof(s), t);
		fprintf(f, "- %s %s: %s\n", md_str(g, sizeof(g), r, "group"),
			md_str(m, sizeof(m), r, "method"), s);
	}
}

/* The time-to-target table (report_target.c) of the rows with a valid
 * curve, when any has one. */
static void print_targets(FILE *f, const json_t *rows)
{
	char g[768], m[768], c[5][32];
	json_t *auto_s = json_string("auto");
	int first = 1;
	size_t j;
	json_t *r;
	json_array_foreach(rows, j, r)
	{
		const json_t *o = json_object_get(r, "to_target");
		if (!json_is_object(o))
			continue;
		if (first)
			fprintf(f,
				"\nTime to a valid perplexity (the first point "
				"of each run's valid curve at or below it; "
				"medians over the runs that reached it):\n\n"
				"| group | method | target ppl | reached | "
				"steps | train s | × unroll |\n"
				"|---|---|---:|---:|---:|---:|---:|\n");
		first = 0;
		fmt(c[0], 32, record_num(o, "target_ppl"), "%.4g");
		snprintf(c[1], 32, "%d/%d",
			 (int)json_integer_value(json_object_get(o, "reached")),
			 (int)json_integer_value(json_object_get(o, "runs")));
		fmt(c[2], 32, record_num(o, "steps"), "%.6g");
		fmt(c[3], 32, record_num(o, "train_s"), "%.4g");
		fmt(c[4], 32, record_num(o, "train_s_x_unroll"), "%.3f");
		fprintf(f, "| %s | %s | %s%s | %s | %s | %s | %s |\n",
			md_str(g, sizeof(g), r, "group"),
			md_str(m, sizeof(m), r, "method"), c[0],
			json_equal(json_object_get(o, "target"), auto_s)
			    ? " (auto)"
			    : "",
			c[1],
			json_integer_value(json_object_get(o, "reached"))
			    ? c[2]
			    : "not reached",
			c[3], c[4]);
	}
	json_decref(auto_s);
}

void report_print_md(FILE *f, const json_t *rows)
{
	size_t j;
	json_t *r;
	print_header(f);
	json_array_foreach(rows, j, r) print_row(f, r);
	print_peer_table(f, rows);
	print_cost_table(f, rows);
	print_eval_table(f, rows);
	print_commits(f, rows);
	print_targets(f, rows);
}

void record_summary(FILE *f, const json_t *records)
{
	json_t *rows = report_rows(records);
	if (rows)
		report_print_md(f, rows);
	json_decref(rows);
}
