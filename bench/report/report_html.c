/* report_html.c — see report.h: `deqbench report --html OUT.html`, one
 * self-contained page (no server, no script, no file it links to) with,
 * per record file, its summary table and the figures plots/plot.py drew
 * beside it (FILE-stem.*.svg), embedded as data: URI images — in the spirit
 * of asv's pages. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/fileio.h"
#include "../records/record.h"
#include "report.h"

/* Text with &, <, >, " escaped. */
static void esc(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '&')
			fputs("&amp;", f);
		else if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '"')
			fputs("&quot;", f);
		else
			fputc(*s, f);
	}
}

static const char STYLE[] =
    "body{font-family:sans-serif;margin:2em;max-width:1400px}"
    "table{border-collapse:collapse;font-size:90%;margin:1em 0}"
    "th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    "th:nth-child(-n+2),td:nth-child(-n+2){text-align:left}"
    "td.warn{color:#a40}figure{display:inline-block;margin:1em}"
    "figure img{max-width:640px;height:auto}";

static void cell_num(FILE *f, const json_t *row, const char *path, int d)
{
	double x = record_num(row, path);
	if (isfinite(x))
		fprintf(f, "<td>%.*f</td>", d, x);
	else
		fputs("<td>-</td>", f);
}

/* "x [lo, hi]" of an interval object at path (center: its member), or why
 * it has none (report_few_runs). */
static void cell_ci(FILE *f, const json_t *row, const char *path,
		    const char *center)
{
	const json_t *o = json_object_get(row, path);
	double x = record_num(o, center), lo = record_num(o, "lo");
	double hi = record_num(o, "hi");
	if (!isfinite(x))
		fputs("<td>-</td>", f);
	else if (json_is_true(json_object_get(o, "self")))
		fputs("<td>1</td>", f);
	else if (isfinite(lo) && isfinite(hi))
		fprintf(f, "<td>%.2f [%.2f, %.2f]</td>", x, lo, hi);
	else if (report_few_runs(o))
		fprintf(f, "<td>%.2f (n=%d: no interval)</td>", x,
			report_few_runs(o));
	else
		fprintf(f, "<td>%.2f</td>", x);
}

static void table(FILE *f, const json_t *rows)
{
	size_t i, j;
	json_t *r, *l;
	fputs("<table><tr><th>group</th><th>method</th><th>runs</th>"
	      "<th>step ms [95% CI]</th><th>&times; unroll [95% CI]</th>"
	      "<th>depth+solver MiB</th><th>&times; unroll</th>"
	      "<th>total peak MiB</th><th>&times; unroll</th>"
	      "<th>fwd converged</th><th>bwd converged</th>"
	      "<th>valid ppl</th><th>health</th></tr>\n",
	      f);
	json_array_foreach(rows, i, r)
	{
		const json_t *labels =
		    json_object_get(json_object_get(r, "health"), "labels");
		fputs("<tr><td>", f);
		esc(f, json_string_value(json_object_get(r, "group")));
		fputs("</td><td>", f);
		esc(f, json_string_value(json_object_get(r, "method")));
		fprintf(
		    f, "</td><td>%lld</td>",
		    (long long)json_integer_value(json_object_get(r, "runs")));
		cell_ci(f, r, "step_ms", "gmean");
		cell_ci(f, r, "step_x_unroll", "ratio");
		cell_num(f, r, "depth_solver_mib", 2);
		cell_num(f, r, "depth_solver_x_unroll", 3);
		cell_num(f, r, "total_mib", 2);
		cell_num(f, r, "total_x_unroll", 3);
		cell_num(f, r, "fwd_converged", 3);
		cell_num(f, r, "bwd_converged", 3);
		cell_num(f, r, "valid_ppl.mean", 2);
		fputs(json_array_size(labels) ? "<td class=\"warn\">"
					      : "<td>healthy",
		      f);
		json_array_foreach(labels, j, l)
		{
			fputs(j ? ", " : "", f);
			esc(f, json_string_value(l));
		}
		fputs("</td></tr>\n", f);
	}
	fputs("</table>\n", f);
}

/* Writes n bytes at p as standard base64 (RFC 4648, padded). */
static void base64(FILE *f, const unsigned char *p, size_t n)
{
	static const char a[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789+/";
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)p[i] << 16 |
			     (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
			     (i + 2 < n ? p[i + 2] : 0);
		fputc(a[v >> 18 & 63], f);
		fputc(a[v >> 12 & 63], f);
		fputc(i + 1 < n ? a[v >> 6 & 63] : '=', f);
		fputc(i + 2 < n ? a[v & 63] : '=', f);
	}
}

/* The SVG file path as an image, <img src="data:image/svg+xml;base64,...">:
 * a browser shows an SVG image but never runs its scripts or event
 * handlers nor loads what it refers to, and the page stays one file
 * (inlining its markup would run them: G14). Nothing when it cannot be
 * read or holds no <svg. 1 when one was written. */
static int embed_svg(FILE *f, const char *path, const char *name)
{
	FILE *in = fopen(path, "rb");
	char *buf;
	long n;
	int ok;
	if (!in)
		return 0;
	fseek(in, 0, SEEK_END);
	n = ftell(in);
	fseek(in, 0, SEEK_SET);
	buf = n > 0 ? malloc((size_t)n + 1) : NULL;
	ok = buf && fread(buf, 1, (size_t)n, in) == (size_t)n;
	fclose(in);
	if (ok) {
		buf[n] = 0;
		ok = strstr(buf, "<svg") != NULL;
	}
	if (ok) {
		fputs("<img src=\"data:image/svg+xml;base64,", f);
		base64(f, (const unsigned char *)buf, (size_t)n);
		fputs("\" alt=\"", f);
		esc(f, name);
		fputs("\">", f);
	}
	free(buf);
	return ok;
}

/* Every STEM.*.svg beside the record file path, in name order, as images
 * in the page. */
static void figures(FILE *f, const char *path)
{
	char dir[4096], stem[1024];
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	struct dirent **ents;
	int n;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1,
		 slash ? path : ".");
	snprintf(stem, sizeof(stem), "%.*s.", (int)strcspn(base, "."), base);
	n = scandir(dir, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		const char *nm = ents[i]->d_name;
		size_t l = strlen(nm);
		char p[8192];
		if (!strncmp(nm, stem, strlen(stem)) && l > 4 &&
		    !strcmp(nm + l - 4, ".svg")) {
			snprintf(p, sizeof(p), "%s/%s", dir, nm);
			fputs("<figure>", f);
			if (embed_svg(f, p, nm)) {
				fputs("<figcaption>", f);
				esc(f, nm);
				fputs("</figcaption>", f);
			}
			fputs("</figure>\n", f);
		}
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
}

int report_write_html(FILE *f, int n, char *const *paths,
		      const json_t *const *rows)
{
	fprintf(f,
		"<!DOCTYPE html>\n<html lang=\"en\"><head><meta "
		"charset=\"utf-8\"><title>deqbench report</title><style>%s"
		"</style></head><body>\n<h1>deqbench report</h1>\n<p>One "
		"table per record file (deqbench report: seeds aggregated, "
		"95%% intervals, health labels) and the figures drawn "
		"beside it (plots/plot.py).</p>\n",
		STYLE);
	for (int i = 0; i < n; i++) {
		fputs("<section><h2>", f);
		esc(f, paths[i]);
		fputs("</h2>\n", f);
		table(f, rows[i]);
		figures(f, paths[i]);
		fputs("</section>\n", f);
	}
	fputs("</body></html>\n", f);
	return ferror(f) ? -1 : 0;
}

/* ---- the output path ---- */

/* How every page report_write_html writes begins. */
static const char PAGE_HEAD[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<title>deqbench report</title>";

static int is_report_page(const unsigned char *head, size_t n, long long size)
{
	(void)size;
	return n >= sizeof(PAGE_HEAD) - 1 &&
	       !memcmp(head, PAGE_HEAD, sizeof(PAGE_HEAD) - 1);
}

static const struct fileio_kind report_page = {
    "a page deqbench report --html wrote", is_report_page};

int report_html_check_out(const char *out, int n, char *const *paths, char *err,
			  size_t errlen)
{
	char e[900];
	for (int i = 0; i < n; i++) {
		const struct fileio_named f[2] = {
		    {"--html ", out, 1}, {"the records file ", paths[i], 0}};
		if (fileio_distinct(f, 2, e, sizeof(e)) != 0) {
			snprintf(err, errlen, "report: %s", e);
			return -1;
		}
	}
	if (fileio_check_replace(out, &report_page, e, sizeof(e)) == 0)
		return 0;
	snprintf(err, errlen, "report --html %s", e);
	return -1;
}
