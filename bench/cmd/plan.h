/* plan.h — what cmd_plan.c (candidates, memory, the table, --run) and
 * plan_price.c (their step times: work × price) share; private to
 * `deqbench plan` (docs/ARCHITECTURE.md §Plan). */
#ifndef DQ_BENCH_PLAN_H
#define DQ_BENCH_PLAN_H

#include <jansson.h>
#include <stddef.h>

#include "../config/config.h"

struct cand {
	struct bench_config cfg; /* resolved */
	char label[64];
	int chunk; /* head_chunk on */
	int deq;   /* its work depends on the solves (method_evals_per_step
		      refuses it) */
	size_t peak, host;
	double fwd, vjp; /* block forwards and VJPs a step */
	double ms;	 /* predicted step */
	double meas_ms;	 /* measured mean step of meas (NAN: none) */
	/* borrowed from plan.runs: the run the deq's iterations come from
	 * (NULL: none, priced at its caps) and the run measured */
	const json_t *iters, *meas;
	const char *iters_how; /* run_work_from_record's how */
	char unpriced[96];     /* units counted without a price, or "" */
	int order;	       /* place in the enumeration: breaks ties */
};

/* The micro-batches of plan's micro-batched candidates (unroll and every
 * checkpoint k with microbatches = PLAN_MICRO, labelled "... mb2") where
 * batch_size allows it. */
#define PLAN_MICRO 2

struct plan {
	struct bench_config base;
	double budget_mib;
	int chunk; /* head_chunk of the "with" variants */
	struct cand *c;
	int n, cap;		/* candidates, and room for cap (enumerate) */
	int V;			/* vocabulary */
	const char *price_file; /* --price (NULL: measured here) */
	const char *records;	/* --records (NULL: DQ_SOURCE_ROOT/results) */
	double price_cap_s;	/* measuring here */
	json_t *runs;		/* record_find_load of records */
	json_t *cited;		/* the runs the table names, r1 first */
	json_t *prices;		/* price records */
	json_t *m;		/* report_cost_match of the base's shape */
	/* the prices of the micro-batched candidates' shape (batch_size /
	 * PLAN_MICRO rows); NULL: none (those candidates are dropped) */
	json_t *m2;
	int micro_dropped; /* micro-batched candidates dropped: no prices */
	double fixed;	   /* step_fixed's price: the cost a step */
	int stages;	   /* stages=P: the pipeline model (0: off) */
	double link_gbps;  /* its link, GB/s */
	int clamped;	   /* predictions raised to PLAN_MIN_MS */
};

/* The committed runs (--records, or DQ_SOURCE_ROOT/results without
 * local/), the prices (--price, or measured here at the base's shape),
 * then every candidate's step time and its sources. 0, or -1 with err;
 * *setup 1 when it is bad input (a --price or --records that cannot be
 * read, a --price without prices of this shape, a configuration price
 * cannot set up). */
int plan_price(struct plan *p, int *setup, char *err, size_t errlen);

/* The pipeline model (plan_pipe.h) of p's base on stages devices linked
 * at link_gbps GB/s, printed: GPipe and 1F1B beside one device. 0, or -1
 * with err (prices without a unit it needs). */
int plan_pipe_print(const struct plan *p, int stages, double link_gbps,
		    char *err, size_t errlen);

/* A copy of base with n strings kv = key, value, ... set and the config
 * finished (resolved again). 0, or -1 with err. */
int plan_derive(struct bench_config *out, const struct bench_config *base,
		const char *const *kv, int n, char *err, size_t errlen);

/* The sources of the table (the runs named r1, r2, ..., the prices, the
 * step_fixed, the deq candidates' iterations, unpriced units). */
void plan_price_notes(const struct plan *p);

/* r<i> of run r in the notes (1-based), 0 when r is NULL. */
int plan_run_index(const struct plan *p, const json_t *r);

void plan_price_free(struct plan *p);

#endif
