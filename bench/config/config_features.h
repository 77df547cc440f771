/* config_features.h — the feature matrix: for each feature (a key set to
 * anything but its default, or to one value), the devices, implementations
 * and precisions it needs and the setting it cannot go with, declared once
 * as rows (config_features.c). config_check_features writes every such
 * refusal from the rows; --help-json exports each key's rows as its
 * "requires" (docs/configuration.md). */
#ifndef DQ_BENCH_CONFIG_FEATURES_H
#define DQ_BENCH_CONFIG_FEATURES_H

#include <jansson.h>
#include <stddef.h>

struct bench_config;

struct feature {
	const char *key;
	const char *value; /* NULL: any value but the key's default */
	/* what it needs, a bit per enum config_device, enum config_impl,
	 * enum dq_precision; 0: any */
	unsigned devices, impls, precisions;
	/* "key=value" (or "key": any value but its default) it cannot go
	 * with; NULL: none */
	const char *conflicts;
	const char *why; /* what the feature is, for the message */
	const char *fix; /* how to fix a refusal */
};

/* Row i of the matrix, in the order they are checked; NULL past the end. */
const struct feature *config_feature(size_t i);

/* 0 when c meets every row; else -1 with one line in err, for the first
 * row it misses: "KEY=VALUE WHY: it needs device=cuda and impl=deqbench;
 * FIX", or "KEY=VALUE contradicts K=V (WHY); FIX". */
int config_check_features(const struct bench_config *c, char *err,
			  size_t errlen);

/* The rows of key as a JSON array of {value, devices, impls, precisions,
 * conflicts, why, fix} (names, not bits); [] for a key without rows. New
 * reference. */
json_t *config_features_json(const char *key);

#endif
