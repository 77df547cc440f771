/* test_machines.c — runs of two machines in one comparison: CPU records
 * whose OpenBLAS kernels differ (host.blas.core) are two machines' runs.
 * report gives each core its own rows, its own unroll baseline and a
 * group naming it; compare pairs a NEW row with BASE's row of its own core
 * and refuses a pairing it cannot make; GPU records are not split by the
 * host's BLAS. Made-up records with fixed times (never timed runs). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "compare.h"
#include "record.h"
#include "report.h"
#include "test_rows.h"

/* A record of method m, seed s, mean (and median) step ms, on OpenBLAS core (NULL:
 * no host.blas, as before it existed) of device dev. */
static json_t *rec(const char *m, int s, double ms, const char *core,
		   const char *dev)
{
	char at[32];
	snprintf(at, sizeof(at), "2026-01-01T00:00:%02dZ", s);
	json_t *r = json_pack(
	    "{s:i, s:s, s:s, s:s, s:s, s:{s:s, s:i, s:s, s:i, s:s, s:s, s:s},"
	    " s:{s:{s:f, s:f}}, s:{s:I, s:I}, s:{s:f}, s:{s:s}}",
	    "schema", 1, "kind", "train", "status", "ok", "impl", "deqbench",
	    "started_at", at, "config", "method", m, "seed", s, "corpus",
	    "synthetic", "layers", 3, "device", dev, "out", "x.jsonl", "impl",
	    "deqbench", "timing", "step_ms", "median", ms, "mean", ms, "memory",
	    "peak_depth_solver_bytes", (json_int_t)1 << 20, "peak_total_bytes",
	    (json_int_t)8 << 20, "quality", "valid_ppl", 100.0, "host",
	    "hostname", "h");
	cr_assert_not_null(r);
	if (core)
		json_object_set_new(json_object_get(r, "host"), "blas",
				    json_pack("{s:s}", "core", core));
	return r;
}

/* 4 runs (seeds 1-4) each of unroll at u ms and deq at d ms on core. */
static void add_machine(json_t *a, const char *core, const char *dev, double u,
			double d)
{
	for (int s = 1; s <= 4; s++) {
		json_array_append_new(a, rec("unroll", s, u, core, dev));
		json_array_append_new(a, rec("deq", s, d, core, dev));
	}
}

/* Two cores in one file: four rows, each group named by its core, each
 * DEQ row over its own core's unroll (both 2x, though Prescott's times
 * are 3x Haswell's); one core: no blas in the group. */
Test(machines, report_splits_rows_by_blas_core)
{
	json_t *a = json_array(), *rows;
	add_machine(a, "Haswell", "cpu", 100, 200);
	add_machine(a, "Prescott", "cpu", 300, 600);
	rows = report_rows(a);
	cr_assert_eq(json_array_size(rows), 4);
	const json_t *dh = row_where(rows, "synthetic blas=Haswell", "deq");
	const json_t *dp = row_where(rows, "synthetic blas=Prescott", "deq");
	cr_assert(dh && dp, "groups: %s",
		  json_string_value(
		      json_object_get(json_array_get(rows, 0), "group")));
	cr_assert_float_eq(record_num(dh, "step_x_unroll.ratio"), 2, 1e-12);
	cr_assert_float_eq(record_num(dp, "step_x_unroll.ratio"), 2, 1e-12);
	cr_assert_str_eq(json_string_value(json_object_get(dp, "blas_core")),
			 "Prescott");
	cr_assert_eq(json_integer_value(json_object_get(dp, "runs")), 4);
	json_decref(rows);
	json_decref(a);
	a = json_array();
	add_machine(a, "Haswell", "cpu", 100, 200);
	rows = report_rows(a);
	cr_assert_eq(json_array_size(rows), 2);
	cr_assert_not_null(row_where(rows, "synthetic", "deq"));
	json_decref(rows);
	json_decref(a);
}

/* GPU runs are one machine whatever their hosts' BLAS. */
Test(machines, gpu_rows_not_split_by_host_blas)
{
	json_t *a = json_array(), *rows;
	add_machine(a, "Haswell", "cuda", 10, 20);
	add_machine(a, "Prescott", "cuda", 10, 20);
	rows = report_rows(a);
	cr_assert_eq(json_array_size(rows), 2);
	cr_assert(json_is_null(
	    json_object_get(json_array_get(rows, 0), "blas_core")));
	json_decref(rows);
	json_decref(a);
}

static json_t *cmp(const json_t *b, const json_t *n, char *err, size_t len)
{
	struct compare_opts o = {NULL, COMPARE_THRESHOLD, COMPARE_ALPHA};
	return compare_records(b, n, &o, err, len);
}

/* compare pairs NEW's Prescott rows with BASE's Prescott rows out of two
 * cores (no note: the same machine), and refuses a NEW core BASE has
 * several others of, naming them. */
Test(machines, compare_pairs_by_core)
{
	json_t *b = json_array(), *n = json_array(), *res;
	char err[600];
	size_t i;
	json_t *p;
	add_machine(b, "Haswell", "cpu", 100, 200);
	add_machine(b, "Prescott", "cpu", 300, 600);
	add_machine(n, "Prescott", "cpu", 300, 600);
	res = cmp(b, n, err, sizeof(err));
	cr_assert_not_null(res, "%s", err);
	cr_assert_eq(json_array_size(json_object_get(res, "pairs")), 2);
	json_array_foreach(json_object_get(res, "pairs"), i, p)
	{
		cr_assert_str_eq(
		    json_string_value(json_object_get(p, "verdict")), "SAME");
		cr_assert_eq(json_array_size(json_object_get(p, "notes")), 0);
	}
	cr_assert_eq(json_array_size(json_object_get(res, "unpaired_base")), 2);
	json_decref(res);
	json_decref(n);
	n = json_array();
	add_machine(n, "SkylakeX", "cpu", 50, 100);
	cr_assert_null(cmp(b, n, err, sizeof(err)));
	cr_assert(strstr(err, "several other cores (Haswell, Prescott)"), "%s",
		  err);
	json_decref(n);
	json_decref(b);
}
