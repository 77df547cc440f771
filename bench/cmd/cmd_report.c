/* cmd_report.c — `deqbench report [--format table|md|csv|json] [--where
 * KEY=VALUE ...] [--sort COLUMN] [--html OUT.html] [--target-ppl P]
 * [--price PRICES.jsonl] FILE.jsonl ...`
 * (report.h; docs/commands.md): the summary of record files, one row per
 * configuration. Exit 0, or 2 for bad input (an unknown flag or one given
 * twice, a value its key cannot take, a file that cannot be read, no
 * usable records). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "cmd.h"
#include "../io/fileio.h"
#include "../config/config.h"
#include "../records/record.h"
#include "../records/record_usable.h"
#include "../report/report.h"

static const char USAGE[] =
    "usage: deqbench report [--format table|md|csv|json] [--where "
    "KEY=VALUE ...] [--sort COLUMN] [--html OUT.html] [--target-ppl P] "
    "[--price PRICES.jsonl] FILE.jsonl ...\n"
    "  --format  table (default: fits 100 columns, one heading per group),\n"
    "            md (the wide markdown table run and suite print), csv, or\n"
    "            json (the rows with every figure and its interval)\n"
    "  --where   keep the records whose config key KEY has VALUE (read\n"
    "            as run reads it: lr=1e-3 is 0.001); repeat for several\n"
    "  --sort    order the rows by step_ms, x_unroll, memory, ppl or "
    "method\n"
    "            (default: as the configurations first appear)\n"
    "  --html OUT.html  also write one self-contained page: per file its\n"
    "            table and the SVG figures drawn beside it (plots/plot.sh)\n"
    "  --target-ppl P  the valid perplexity whose steps and training time\n"
    "            to reach rows with a valid curve (eval_every) give\n"
    "            (default: per group, the best every such run reached)\n"
    "  --price PRICES.jsonl  price each run's work with these price\n"
    "            records (deqbench price out=): the measured mean step\n"
    "            time beside the priced one, x unroll from each\n";

#define MAX_WHERE 16

struct report_args {
	const char *format, *sort, *html, *target, *price;
	double target_ppl; /* --target-ppl; NAN: automatic */
	json_t *prices;	   /* --price's records, read by check_args */
	const char *where[MAX_WHERE];
	json_t *want[MAX_WHERE]; /* where[i]'s value as its key's JSON type */
	int n_where;
};

/* The flag at argv[*i] (value next or after '='), or 0 when it is not
 * one (an argument that does not start with '-', or "-"). 1 taken; -1
 * after bad input's message (*rc its status): an unknown flag, a flag
 * without a value, one given twice (the last would win silently). */
static int take(int argc, char **argv, int *i, struct report_args *a, int *rc)
{
	static const char *const flags[] = {"--format",	    "--where",
					    "--sort",	    "--html",
					    "--target-ppl", "--price"};
	const char *arg = argv[*i], *eq = strchr(arg, '='), *v, **slot;
	size_t len =
	    eq && !strncmp(arg, "--", 2) ? (size_t)(eq - arg) : strlen(arg);
	int k = -1;
	char e[400];
	for (int j = 0; j < 6; j++)
		if (strlen(flags[j]) == len && !strncmp(arg, flags[j], len))
			k = j;
	if (arg[0] != '-' || !arg[1])
		return 0;
	if (k < 0) {
		snprintf(e, sizeof(e),
			 "report: unknown flag %.100s; see deqbench report "
			 "--help (a file whose name starts with '-': ./%.100s)",
			 arg, arg);
		*rc = bad_input(e);
		return -1;
	}
	v = eq ? eq + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
	if (!v || !*v) {
		*rc = bad_input("report: a flag needs a value; see deqbench "
				"report --help");
		return -1;
	}
	slot = k == 0	? &a->format
	       : k == 2 ? &a->sort
	       : k == 4 ? &a->target
	       : k == 5 ? &a->price
			: &a->html;
	if (k != 1 && *slot) {
		snprintf(e, sizeof(e),
			 "report: %s is given twice (%.100s, then %.100s); "
			 "give it once",
			 flags[k], *slot, v);
		*rc = bad_input(e);
		return -1;
	}
	if (k != 1)
		*slot = v;
	else if (a->n_where < MAX_WHERE && strchr(v, '='))
		a->where[a->n_where++] = v;
	else {
		*rc = bad_input("report: --where takes KEY=VALUE, e.g. "
				"--where method=deq (at most 16)");
		return -1;
	}
	return 1;
}

/* The value text of --where KEY=TEXT as key's JSON type, read as `run`
 * reads key=value (layers=3.0 is the integer 3, lr=1e-3 the real 0.001,
 * tf32=0 false). New reference; NULL with one line in e when key cannot
 * take it. */
static json_t *where_value(const char *key, const char *text, char *e, size_t n)
{
	struct bench_config c;
	char why[300];
	config_defaults(&c);
	if (config_set(&c, key, text, why, sizeof(why)) != 0) {
		snprintf(e, n, "report: --where %s", why);
		return NULL;
	}
	return config_key_json(&c, key);
}

/* 1 when a record's config value v is want: numbers by value (an integer
 * and a real compare equal when their values do), else as JSON. */
static int same_value(const json_t *v, const json_t *want)
{
	if (json_is_integer(v) && json_is_integer(want))
		return json_integer_value(v) == json_integer_value(want);
	if (json_is_number(v) && json_is_number(want))
		return json_number_value(v) == json_number_value(want);
	return v && json_equal(v, want);
}

static int check_args(struct report_args *a)
{
	static const char *const sorts[] = {"step_ms", "x_unroll", "memory",
					    "ppl", "method"};
	int ok = 0;
	char e[400];
	if (!a->format)
		a->format = "table";
	if (strcmp(a->format, "table") && strcmp(a->format, "md") &&
	    strcmp(a->format, "csv") && strcmp(a->format, "json"))
		return bad_input("report: --format must be table, md, csv or "
				 "json");
	for (int i = 0; i < a->n_where; i++) {
		char key[128];
		snprintf(key, sizeof(key), "%.*s",
			 (int)(strchr(a->where[i], '=') - a->where[i]),
			 a->where[i]);
		if (!config_key_known(key)) {
			snprintf(
			    e, sizeof(e),
			    "report: --where %.100s: %.60s is not a config "
			    "key (deqbench run --help lists them)",
			    a->where[i], key);
			return bad_input(e);
		}
		a->want[i] = where_value(key, strchr(a->where[i], '=') + 1, e,
					 sizeof(e));
		if (!a->want[i])
			return bad_input(e);
	}
	if (a->price && !(a->prices = report_price_records(
			      a->price, "report --price", e, sizeof(e))))
		return bad_input(e);
	for (int i = 0; a->sort && i < 5; i++)
		ok |= !strcmp(a->sort, sorts[i]);
	if (a->sort && !ok)
		return bad_input("report: --sort takes step_ms, x_unroll, "
				 "memory, ppl or method");
	a->target_ppl = NAN;
	if (a->target) {
		char *end;
		double p = strtod(a->target, &end);
		if (*end || !(p >= 1) || !isfinite(p)) {
			snprintf(e, sizeof(e),
				 "report: --target-ppl %.60s: expected a "
				 "perplexity >= 1, e.g. --target-ppl 200",
				 a->target);
			return bad_input(e);
		}
		a->target_ppl = p;
	}
	return 0;
}

/* 1 when record r's config matches every --where. */
static int kept(const json_t *r, const struct report_args *a)
{
	const json_t *cfg = json_object_get(r, "config");
	for (int i = 0; i < a->n_where; i++) {
		char key[128];
		snprintf(key, sizeof(key), "%.*s",
			 (int)(strchr(a->where[i], '=') - a->where[i]),
			 a->where[i]);
		if (!same_value(json_object_get(cfg, key), a->want[i]))
			return 0;
	}
	return 1;
}

static const char *sort_path(const char *sort)
{
	return !strcmp(sort, "step_ms")	   ? "step_ms.gmean"
	       : !strcmp(sort, "x_unroll") ? "step_x_unroll.ratio"
	       : !strcmp(sort, "memory")   ? "total_mib"
					   : "valid_ppl.mean";
}

static const char *g_sort;

static int by_sort(const void *x, const void *y)
{
	const json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
	if (!strcmp(g_sort, "method"))
		return strcmp(json_string_value(json_object_get(a, "method")),
			      json_string_value(json_object_get(b, "method")));
	double p = record_num(a, sort_path(g_sort));
	double q = record_num(b, sort_path(g_sort));
	/* missing values last */
	return p == p && q == q ? (p > q) - (p < q) : (p != p) - (q != q);
}

/* rows sorted by a->sort (stable for equal keys: qsort on indices). */
static json_t *sorted(json_t *rows, const char *sort)
{
	size_t n = json_array_size(rows);
	json_t **v = malloc((n + 1) * sizeof(*v)), *out = json_array();
	for (size_t i = 0; v && i < n; i++)
		v[i] = json_array_get(rows, i);
	g_sort = sort;
	if (v)
		qsort(v, n, sizeof(*v), by_sort);
	for (size_t i = 0; v && i < n; i++)
		json_array_append(out, v[i]);
	free(v);
	json_decref(rows);
	return out;
}

/* load's state: what the files' usable records gave. */
struct load_ctx {
	struct report_acc *acc;
	const struct report_args *a;
	int kept;
};

/* A usable record (record_each_usable): into the accumulator when --where
 * keeps it; the reader frees it, so a file of any length is read in the
 * memory of its rows (G21). */
static int load_rec(void *ctx, json_t *rec)
{
	struct load_ctx *c = ctx;
	if (!kept(rec, c->a))
		return 0;
	if (report_acc_add(c->acc, rec) != 0)
		return -1;
	c->kept++;
	return 0;
}

/* The usable records of the files that --where keeps, into acc, read one
 * line at a time. 0, or bad input's status. */
static int load(int nf, char **files, const struct report_args *a,
		struct report_acc *acc)
{
	char err[1024];
	struct load_ctx c = {acc, a, 0};
	int skipped = 0;
	for (int k = 0; k < nf; k++)
		if (record_each_usable(files[k], load_rec, &c, &skipped, err,
				       sizeof(err)) != 0)
			return bad_input(err);
	if (c.kept)
		return 0;
	snprintf(err, sizeof(err),
		 "report: %s%s hold%s no %srecords%s; give JSONL files written "
		 "by deqbench run or suite",
		 files[0], nf > 1 ? " ..." : "", nf > 1 ? "" : "s",
		 skipped ? "usable " : "",
		 a->n_where ? " that --where keeps" : "");
	return bad_input(err);
}

/* The rows of the files' records that --where keeps (load). 0 with *rows
 * a new reference, or bad input's status (*rows NULL). */
static int rows_of(int nf, char **files, const struct report_args *a,
		   json_t **rows)
{
	struct report_acc *acc = report_acc_new();
	int rc;
	if (acc) {
		report_acc_target(acc, a->target_ppl);
		report_acc_set_prices(acc, a->prices);
	}
	rc = acc ? load(nf, files, a, acc) : bad_input("report: out of memory");
	*rows = rc == 0 ? report_acc_rows(acc) : NULL;
	report_acc_free(acc);
	if (rc == 0 && !*rows)
		rc = bad_input("report: out of memory");
	return rc;
}

/* --html: the page of the files' rows (each file apart), written by
 * temporary file and rename (fileio_replace). 0, or bad input's status. */
static int write_html(int nf, char **files, const struct report_args *a)
{
	json_t **rows = calloc((size_t)nf + 1, sizeof(*rows));
	char *buf = NULL, err[1200];
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	int rc = 0;
	for (int k = 0; rows && k < nf && !rc; k++)
		rc = rows_of(1, files + k, a, &rows[k]);
	if (!rc &&
	    (!rows || !m ||
	     report_write_html(m, nf, files, (const json_t *const *)rows) != 0))
		rc = bad_input("report: --html: out of memory");
	if (m)
		fclose(m);
	if (rc == 0) {
		struct iovec iov = {buf, len};
		if (fileio_replace(a->html, &iov, 1, err, sizeof(err)) != 0)
			rc = bad_input(err);
		else
			fprintf(stderr, "deqbench: report written to %s\n",
				a->html);
	}
	for (int k = 0; rows && k < nf; k++)
		json_decref(rows[k]);
	free(rows);
	free(buf);
	return rc;
}

int cmd_report(int argc, char **argv)
{
	struct report_args a = {0};
	json_t *rows;
	int nf = 0, rc = 0;
	for (int i = 0; i < argc; i++) {
		int t;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(USAGE, stdout);
			return 0;
		}
		if ((t = take(argc, argv, &i, &a, &rc)) < 0)
			return rc;
		if (!t)
			argv[nf++] = argv[i];
	}
	if ((rc = check_args(&a)))
		goto done;
	if (nf == 0) {
		rc = bad_input("report: give one or more FILE.jsonl, e.g. "
			       "deqbench report results/cpu/default.jsonl");
		goto done;
	}
	if (a.html) {
		char err[1200];
		if (report_html_check_out(a.html, nf, argv, err, sizeof(err))) {
			rc = bad_input(err);
			goto done;
		}
	}
	if ((rc = rows_of(nf, argv, &a, &rows)) == 0) {
		if (a.sort)
			rows = sorted(rows, a.sort);
		if (!strcmp(a.format, "json")) {
			json_dumpf(rows, stdout,
				   JSON_INDENT(1) | JSON_REAL_PRECISION(17));
			fputc('\n', stdout);
		} else if (!strcmp(a.format, "csv"))
			report_print_csv(stdout, rows);
		else if (!strcmp(a.format, "md"))
			report_print_md(stdout, rows);
		else
			report_print_term(stdout, rows);
		json_decref(rows);
	}
	if (rc == 0 && a.html)
		rc = write_html(nf, argv, &a);
done:
	for (int i = 0; i < a.n_where; i++)
		json_decref(a.want[i]);
	json_decref(a.prices);
	return rc;
}
