/* suite.h — a suite is a base config plus axes whose cartesian product gives
 * the runs (nvbench-style), with exclusions and repeats:
 *
 *   {"name": "default",
 *    "base": {...flat config...},
 *    "axes": {"method": ["unroll", {"method": "checkpoint", "k": 3}, "deq"],
 *             "layers": [12, 24]},
 *    "exclude": [{"method": "deq", "layers": 24}],
 *    "repeats": 1}
 *
 * An axis value is a scalar (sets the axis' key) or an object (sets several
 * keys together; the axis name is then only a label). The combinations are
 * made with the first axis varying slowest. An exclusion drops every run
 * whose resolved config matches all of its keys. Each remaining combination
 * runs `repeats` times. Command-line overrides apply last, over base and
 * axes. Two axes setting the same key are refused (as a key given twice in
 * one JSON object), and so is a suite of more than SUITE_MAX_RUNS runs.
 *
 * The runs then run in the suite's "order" (suite_order.c): by default
 * round-robin across configurations (the first seed and repeat of every
 * configuration, then the second, ...), so a drift of the machine's speed
 * falls on every configuration alike instead of on the one that ran while
 * it lasted; "random" with "order_seed" a permutation that seed fixes;
 * "axes" the order of the combinations above.
 */
#ifndef DQ_BENCH_SUITE_H
#define DQ_BENCH_SUITE_H

#include <jansson.h>

#include "../config/config.h"

/* Runs one suite may expand to: each holds its resolved config (a few KiB),
 * so this bounds the memory of expansion and --dry-run to a few hundred
 * MiB; a larger sweep is several suites (or shards of them). */
#define SUITE_MAX_RUNS 100000

struct suite_run {
	int index;		 /* position in the run order, 0-based */
	int combo;		 /* combination index (same for every repeat) */
	int repeat;		 /* 0 .. repeats-1 */
	struct bench_config cfg; /* fully resolved */
};

/* The order runs run in ("order" in the suite file). */
enum suite_order {
	SUITE_ORDER_ROUND_ROBIN = 0, /* "round-robin", the default */
	SUITE_ORDER_RANDOM,	     /* "random", with order_seed */
	SUITE_ORDER_AXES,	     /* "axes": the combinations' order */
};

struct suite {
	char name[256]; /* "name" (else the file), cut at 255 bytes between
			  UTF-8 characters */
	int eval; /* "command": "eval": each run is deqbench eval (params=) */
	int repeats;
	enum suite_order order;
	long long order_seed; /* "order_seed" of a random order; -1: none */
	struct suite_run *runs;
	int n_runs;
	/* runs expansion collapsed into an earlier run they duplicate (the
	 * same run once keys their method does not use are dropped, or once
	 * resolved), and a line saying which; "" when none */
	int n_collapsed;
	char collapsed_note[512];
};

/* Expands a suite from its JSON root; `source` names the file in messages.
 * overrides: n_over "key=value" strings applied to every run. Every run's
 * config is validated. A run that is the same run as an earlier one (of the
 * same repeat) once the keys its method does not use are dropped (the run
 * identity of the rest, record_run_identity: output-only keys aside,
 * data_dir counted for corpora read from it) is collapsed into it
 * (n_collapsed, collapsed_note: the commands print the note), so an f_tol
 * sweep over unroll runs unroll once. A "name" that is not a plain file
 * name ('/', '\\', ".", "..", empty, control characters) is refused. 0,
 * or -1 with one line in err. */
int suite_expand(struct suite *s, const json_t *root, const char *source,
		 int n_over, char *const *overrides, char *err, size_t errlen);
/* Loads and expands a suite file (jansson's line:column on bad JSON). */
int suite_load(struct suite *s, const char *path, int n_over,
	       char *const *overrides, char *err, size_t errlen);
void suite_free(struct suite *s);

/* The name of an order as the suite file and records spell it. */
const char *suite_order_name(enum suite_order o);
/* Reads "order" and "order_seed" of suite ROOT into s (absent: round-robin);
 * "order_seed" (an integer in 0..2^53) is required with "random" and
 * refused without it. 0, or -1 with one line. */
int suite_parse_order(struct suite *s, const json_t *root, const char *source,
		      char *err, size_t errlen);
/* Puts s->runs into s->order and numbers them (index) in it. Round-robin:
 * runs of one configuration (the run identity without seed and repeat) are
 * taken in (repeat, position among the combinations) order, and round k
 * holds the k-th run of every configuration, configurations in the order
 * they first appear; random: a Fisher-Yates shuffle driven by splitmix64
 * from order_seed, the same on every machine. 0, or -1 when out of
 * memory. */
int suite_order_runs(struct suite *s);

/* Parses "I/N" (0 <= I < N). 0 or -1 with one line. */
int suite_shard_parse(const char *arg, int *shard_i, int *shard_n, char *err,
		      size_t errlen);
/* 1 when run `index` belongs to shard I of N: every N-th run from I. */
static inline int suite_in_shard(int index, int shard_i, int shard_n)
{
	return index % shard_n == shard_i;
}

/* Writes the runs of the shard as "index  key=value ..." lines listing the
 * keys whose values differ between runs (--dry-run). */
void suite_print_runs(const struct suite *s, int shard_i, int shard_n, FILE *f);

#endif
