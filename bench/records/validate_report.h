/* validate_report.h — how the record checker reports: what it demands
 * (validate_mode), the callback a problem goes to (validate_report_fn),
 * and problem text made safe for a terminal. Shared by validate.c (each
 * field alone) and validate_cross.c (the rules between fields), below
 * both. */
#ifndef DQ_BENCH_VALIDATE_REPORT_H
#define DQ_BENCH_VALIDATE_REPORT_H

#include <stddef.h>

/* What to demand of a record. */
enum validate_mode {
	/* the fields every record of the schema has: a field with an
	 * `added` date, or a config key of validate_config_added, may be
	 * absent (an older record) */
	VALIDATE_ALL_AGES = 0,
	/* every field of the current schema: what this build writes */
	VALIDATE_STRICT = 1,
};

/* Called for each problem: path is the field ("timing.step_ms.p10",
 * "model.params[2].shape"; "" for the record as a whole), what is the
 * problem as a phrase ("expected int, got string", "missing (expected
 * object or null)", "unknown field", "expected one of ok, diverged,
 * interrupted, error, got \"okay\""). */
typedef void (*validate_report_fn)(void *ctx, const char *path,
				   const char *what);

/* s into buf (n bytes) with each control character (C0, DEL; C1 encoded
 * as c2 80..9f: what a terminal acts on) written as the text \xNN or
 * \u00NN, cut at a character before n: a problem line never carries the
 * escape sequences it reports. */
void validate_safe_text(char *buf, size_t n, const char *s);

/* report(ctx, path, what) with both through validate_safe_text. */
void validate_report_safe(validate_report_fn report, void *ctx,
			  const char *path, const char *what);

/* A check's state: what it demands, where its problems go, how many. */
struct validate_walk {
	enum validate_mode mode;
	validate_report_fn report; /* NULL: count only */
	void *ctx;
	int problems;
};

/* Counts a problem at path (a printf format for the phrase) and reports
 * it through validate_report_safe. */
void validate_problem(struct validate_walk *w, const char *path,
		      const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
