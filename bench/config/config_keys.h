/* config_keys.h — the whole key table of struct bench_config as one sequence
 * (config.c's head rows, each registered method's rows, config.c's tail
 * rows), shared by config.c (parsing, checks) and config_print.c (JSON,
 * --help). Private to bench/config*.c. docs/ARCHITECTURE.md §Config and
 * records. */
#ifndef DEQBENCH_CONFIG_KEYS_H
#define DEQBENCH_CONFIG_KEYS_H

#include <jansson.h>
#include <stddef.h>

/* Only pointers here, so this header needs neither config.h nor
 * methods/keys.h (where struct key_desc is). */
struct bench_config;
struct key_desc;

/* A key row and the struct its offset is relative to: bench_config for
 * config.c's own rows, a method's options slot for that method's rows. */
struct key_ref {
	const struct key_desc *d;
	int owner; /* -1: bench_config; else the method's registry index */
};

/* Key i of the whole table, in its order (head, methods', tail); d is NULL
 * past the end. */
struct key_ref key_at(size_t i);

/* The key called `name`; d is NULL when there is none. */
struct key_ref key_find(const char *name);

/* Address of key r's field in c (in c->method's options for method rows). */
void *key_field(const struct bench_config *c, struct key_ref r);

/* Key r's value in c as JSON, typed by its row (enums as their names);
 * new reference. */
json_t *key_json(const struct bench_config *c, struct key_ref r);

#endif
