/* validate_cross.h — the rules of results/SCHEMA.md that tie a record's
 * fields to each other (validate.h's walk checks each field alone): the
 * health verdict against the status and its own figures, the solver
 * sections against the method, the method, data, model and device
 * against the config, trace arrays of one length, ppl = exp(loss), totals
 * against per-step figures, peaks against each other, the times in
 * order. Internal to bench/records (validate.c calls it).
 *
 * Float equalities hold within VALIDATE_TOL relative to the larger
 * magnitude (absolute below 1): every such pair is computed from the same
 * doubles and written exactly (SCHEMA.md: shortest round-trip text), so
 * only the last bits of a division or exp can differ; orders (a <= b)
 * allow the same slack.
 */
#ifndef DQ_BENCH_VALIDATE_CROSS_H
#define DQ_BENCH_VALIDATE_CROSS_H

#include <jansson.h>

#include "validate_report.h"

#define VALIDATE_TOL 1e-9

/* validate_cross — checks the rules above on rec (an object whose fields
 * validate_record's walk has checked one by one: a field of the wrong type
 * is skipped here, never reported twice). Rules that records written
 * before a field's meaning settled break (the method's keys against the
 * resolved config, inference.batches >= 1, health's converged fraction
 * equal to the solver's) apply only under VALIDATE_STRICT. Calls report
 * (may be NULL) once per problem; returns the number of problems. */
int validate_cross(const json_t *rec, enum validate_mode mode,
		   validate_report_fn report, void *ctx);

#endif
