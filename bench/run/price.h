/* price.h — `deqbench price`'s measurement of one configuration: the price
 * of each work unit (docs/methods.md's names: block_fwd_taped, block_fwd,
 * block_vjp, block_vjp_input, solver_update at three history lengths,
 * head_fwd, head_bwd, optimizer_step, host_bytes) at the shapes of a
 * config, timed round-robin in a random order each round until each
 * median's 95% interval is within ±rel or the time cap passes
 * (price_stats.h), written as price records (results/SCHEMA.md §Price
 * records). The command around it (arguments, records files, the table)
 * is bench/cmd/cmd_price.c.
 */
#ifndef DQ_BENCH_PRICE_H
#define DQ_BENCH_PRICE_H

#include <jansson.h>
#include <stddef.h>

#include "../config/config.h"

/* How to measure. */
struct price_opts {
	double cap_s;	/* time cap of one configuration's measurement */
	double rel;	/* the interval's half-width, relative (0.02) */
	int warmup;	/* untimed rounds first */
	int max_rounds; /* at most this many timed rounds */
	int core;	/* the core the process is pinned to; -1: not pinned */
	unsigned long long seed; /* of the round-robin order */
};

/* The unit names, in table order, NULL-terminated (SCHEMA.md's `unit`):
 * the validator's list, validate_price_units. */
extern const char *const *const price_unit_names;

/* Pins the calling process to CPU core (sched_setaffinity, as taskset -c
 * CORE). 0, or -1 with one line in err. */
int price_pin(int core, char *err, size_t errlen);

/* Measures cfg's units (vocabulary V: the head's width) and appends one
 * price record per unit, solver_update once per history length, to out
 * (source: "FILE:LINE" of the record priced, NULL for a config). 0, or -1
 * with one line in err (a backend or model that cannot be made, out of
 * memory). */
int price_config(const struct bench_config *cfg, int V, const char *source,
		 const struct price_opts *o, json_t *out, char *err,
		 size_t errlen);

#endif
