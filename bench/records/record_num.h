/* record_num.h — what every reader of a record needs first: the schema
 * version it carries and a number at a dotted path. Below record.c (which
 * writes records) and validate.c (which checks them), so neither needs
 * the other for these. */
#ifndef DQ_BENCH_RECORD_NUM_H
#define DQ_BENCH_RECORD_NUM_H

#include <jansson.h>

/* The `schema` a record written by this build carries. */
#define RECORD_SCHEMA 1

/* record_num — the number at dotted PATH of a record (or any JSON
 * object), e.g. "timing.step_ms.median"; NAN when a member on the way is
 * absent or the value is null or not a number (PATH is cut at 255
 * bytes). */
double record_num(const json_t *o, const char *path);

#endif
