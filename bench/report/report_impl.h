/* report_impl.h — what report.c (records into rows), report_acc.c (the
 * records one at a time, duplicates left out), report_rows.c (rows as
 * JSON, the figures with their intervals) and report_print.c (the
 * markdown tables) share. Internal to the report (report.h). */
#ifndef DQ_BENCH_REPORT_IMPL_H
#define DQ_BENCH_REPORT_IMPL_H

#include <jansson.h>
#include <stddef.h>

#include "report_cost.h"

/* Per-run columns of a row: NAN where a run lacks the figure, and for
 * every column of an error run (a failed run's figures are not a
 * measurement of its configuration). */
enum col {
	C_STEP, /* median step ms of each ok run */
	C_INF,	/* median inference ms per valid batch of each ok run */
	C_DS,	/* depth+solver peak bytes */
	C_TOT,	/* total peak bytes */
	C_FIT,	/* mean forward iterations */
	C_BIT,	/* mean backward iterations */
	C_FCV,	/* forward converged fraction */
	C_BCV,	/* backward converged fraction */
	C_PPL,	/* valid perplexity */
	C_FEV,	/* block forward evaluations per step (eval: per batch) */
	C_VEV,	/* block VJPs per step */
	C_LATE, /* the training loss's late improvement (report_late_gain) */
	C_MEAN, /* mean step ms of each ok run (what a user pays) */
	C_EARLY,
	C_END, /* mean trace step ms of the first, last 10% */
	C_PU,
	C_PUF,
	C_PUL, /* priced units ms per step: mean, first, last
			       10% (report_cost.h; with --price only) */
	C_PR,
	C_PRF,
	C_PRL,	/* the same with the fixed cost (step_fixed) added */
	C_HEAD, /* median head ms per valid batch (inference.head_ms) */
	C_BODY, /* median ms per valid batch up to z (inference.body_ms) */
	C_TPPL, /* test perplexity */
	NCOL
};

/* One row: the runs of one configuration. Nothing of a record is kept but
 * its figures (v) and, of the row's first, its config, method and kind:
 * a report of any number of records holds its rows, not the records. */
/* health.h's flags: norm growth ... solver non-finite */
#define REPORT_HEALTH_FLAGS 5

struct agg {
	char *key, *group; /* report_key with and without the method keys */
	char *blas;	   /* the runs' OpenBLAS core (record_blas_core), NULL
			      for GPU runs: part of key and group */
	char *fp;	   /* the runs' build.fingerprint, NULL for records
			      before it: part of key and group */
	json_t *commits;   /* the runs' build.git_commit values, once each */
	json_t *first;	   /* {config, method, kind} of the first record */
	int n, n_ok, cap;
	double *v;     /* column c of run i at v[c * cap + i] */
	json_t *seeds; /* the seeds, in the order they first appear */
	json_t *seen;  /* each seed's JSON text as a key: O(1) to test */
	char *status;  /* "ok", or the last status that was not */
	int healthy, unstable, diverged, unconverged, noisy, no_health;
	/* runs whose health.flags name each rule (health.h's enum
	 * health_flag, bit i at [i]) */
	int flagged[REPORT_HEALTH_FLAGS];
	int beside;		/* ok runs that ran beside others (report.h) */
	int error, interrupted; /* runs of those statuses */
	int duplicates;		/* records left out as second readings */
	int superseded; /* interrupted runs left out: rerun to the end */
	/* per run, its quality.valid_curve as [[step, ppl, train_s], ...],
	 * null for a run without one (report_target_add) */
	json_t *curves;
	json_t *price;	  /* report_cost_match of the first record, or
				   NULL: no --price, or none matched */
	json_t *unpriced; /* units counted that had no price */
	/* the sums over its priced runs of each run's priced step by part
	 * (report_cost_units_ms and _fixed_ms, the timed steps' means), and their count:
	 * the prices' share of the priced figures' uncertainty */
	struct cost_parts parts;
	int n_parts;
	int no_work; /* ok runs whose record has no work */
};

struct table {
	struct agg *rows; /* nrow of cap */
	size_t nrow, cap;
	json_t *index;	  /* row key -> its index in rows */
	json_t *unroll;	  /* group -> the index of its first unroll row */
	json_t *varying;  /* non-method keys that differ between groups */
	json_t *vary_deq; /* deq keys that differ between deq records */
	const json_t *first_group_cfg, *first_deq_cfg; /* in rows[].first */
	const char *first_blas, *first_fp; /* rows[0].blas, rows[0].fp */
	int blas_varies;      /* rows of two BLAS cores: groups name theirs */
	int fp_varies;	      /* rows of two fingerprints: groups name theirs */
	double target_ppl;    /* report --target-ppl; NAN: each group's auto */
	const json_t *prices; /* the --price records (borrowed), or NULL */
};

/* An empty table; 0, or -1 when out of memory (free t either way). */
int report_table_init(struct table *t);
/* Adds record rec (borrowed, not kept; one without a config object is
 * left out) to its row. 0, or -1 when out of memory. */
int report_table_add(struct table *t, const json_t *rec);
/* Counts record rec, a second reading of a run already added, as a
 * duplicate of its row. 0, or -1 when out of memory. */
int report_table_dup(struct table *t, const json_t *rec);
/* Makes record rec's row if there is none yet, adding nothing to it, so
 * that a record held back (report_acc's interrupted ones) keeps its row's
 * place. 0, or -1 when out of memory. */
int report_table_open(struct table *t, const json_t *rec);
/* Counts record rec, an interrupted run whose rerun finished (status ok,
 * same report_run_key), as left out of its row. 0, or -1 when out of
 * memory. */
int report_table_superseded(struct table *t, const json_t *rec);
/* The identity of record rec's run: its row's key and its config's seed.
 * malloc'd; NULL without a config object or when out of memory. */
char *report_run_key(const json_t *rec);
/* The rows of t as report_rows gives them (report.h). New reference, NULL
 * when out of memory. */
json_t *report_table_rows(const struct table *t);
void report_table_free(struct table *t);

/* Prices the rows of t added after it with the price records prices
 * (borrowed; kept until the table is freed). */
void report_table_set_prices(struct table *t, const json_t *prices);

/* Column c of row r: r->n values. */
double *agg_col(const struct agg *r, enum col c);

/* A row whose mean valid loss (ln of its mean perplexity) is more than
 * REPORT_SUSPECT_GAP nats above the best row of its group while its runs'
 * training loss has plateaued (median late gain below REPORT_PLATEAU) is
 * labelled "suspect baseline": a net stuck early (the d_model 512 unroll
 * of c4c0f56, valid ppl 421.9 against the DEQ's 227.0, that its health
 * read as healthy) rather than a method's cost. */
#define REPORT_SUSPECT_GAP 0.1
#define REPORT_PLATEAU	   0.05

/* The training loss's late gain of a record with a trace: the mean loss
 * of the w steps before the middle step less that of the last w, w =
 * clamp(steps/10, 1, 50), in nats (below REPORT_PLATEAU: plateaued); NAN
 * without a trace of at least 4w steps. */
double report_late_gain(const json_t *rec);

/* The unroll row of r's group, or NULL. */
const struct agg *report_unroll_row(const struct table *t, const struct agg *r);

/* Whether row r holds eval records (deqbench eval: kind "eval"). Eval rows
 * are keyed without `params`, so the evaluations of the seeds'
 * parameter files of one configuration are one row's runs, and grouped
 * without `layers` either, so a DEQ's evaluations and the unrolled net's
 * at every depth share a group: each row's x unroll is against its
 * matched unroll row (report_rows.c). */
int report_is_eval(const struct agg *r);

/* cfg without output-only keys and seed (and method keys when
 * drop_method), as compact sorted JSON, then the BLAS core blas and the
 * build fingerprint fp when either is not NULL; malloc'd. */
char *report_key(const json_t *cfg, const char *blas, const char *fp,
		 int drop_method);

/* report_target.c: run k's valid curve (a record's
 * quality.valid_curve.points; none for a run not ok) appended to row r.
 * 0, or -1 when out of memory. */
int report_target_add(struct agg *r, const json_t *rec, int ok);
/* Sets each row's "to_target" (docs/commands.md) of rows, t's rows as
 * JSON: the steps and training seconds its runs took to reach
 * t->target_ppl, or where that is NAN the group's automatic target. */
void report_target_rows(const struct table *t, json_t *rows);

/* The string member k of o, or dflt. */
const char *report_str(const json_t *o, const char *k, const char *dflt);

#endif
