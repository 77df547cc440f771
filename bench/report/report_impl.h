/* report_impl.h — what report.c (records into rows), report_rows.c (rows
 * as JSON, the figures with their intervals) and report_print.c (the
 * markdown tables) share. Internal to the report (report.h). */
#ifndef DQ_BENCH_REPORT_IMPL_H
#define DQ_BENCH_REPORT_IMPL_H

#include <jansson.h>
#include <stddef.h>

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
	NCOL
};

/* One row: the runs of one configuration. */
struct agg {
	char *key, *group;   /* report_key with and without the method keys */
	const json_t *first; /* the first record (borrowed) */
	int n, n_ok, cap;
	double *v; /* column c of run i at v[c * cap + i] */
	json_t *seeds;
	const char *status; /* "ok", or the last status that was not */
	int healthy, unstable, diverged, unconverged, noisy, no_health;
	int error, interrupted; /* runs of those statuses */
};

struct table {
	struct agg *rows; /* nrow, at most one per record */
	size_t nrow;
	json_t *varying;  /* non-method keys that differ between groups */
	json_t *vary_deq; /* deq keys that differ between deq records */
	const json_t *first_group_cfg, *first_deq_cfg;
};

/* The rows of records; 0, or -1 when out of memory (free t either way). */
int report_table_build(struct table *t, const json_t *records);
void report_table_free(struct table *t);

/* Column c of row r: r->n values. */
double *agg_col(const struct agg *r, enum col c);

/* The unroll row of r's group, or NULL. */
const struct agg *report_unroll_row(const struct table *t, const struct agg *r);

/* cfg without output-only keys and seed (and method keys when
 * drop_method), as compact sorted JSON; malloc'd. */
char *report_key(const json_t *cfg, int drop_method);

/* The string member k of o, or dflt. */
const char *report_str(const json_t *o, const char *k, const char *dflt);

#endif
