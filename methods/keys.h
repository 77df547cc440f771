/* keys.h — typed key rows: the one description of a configuration key
 * (name, type, field, range, choices, meaning) that parsing, range checks,
 * records, `deqbench run --help` and --help-json all read
 * (docs/ARCHITECTURE.md §Config and records).
 *
 * A row's `offset` is relative to the struct that holds the key: struct
 * bench_config for the bench's own rows (bench/config/config.c), a method's
 * options struct for the rows a method exports (struct deq_config for
 * deq's, methods/deq.c). A method's rows thus live in the method's file
 * and the bench finds them through the method registry (method.h).
 */
#ifndef DQ_METHODS_KEYS_H
#define DQ_METHODS_KEYS_H

#include <stddef.h>

enum key_type { KT_INT, KT_LONG, KT_U64, KT_DOUBLE, KT_BOOL, KT_STR, KT_ENUM };

/* What a key is for, beyond its value (flags, or-ed). */
enum key_role {
	KEY_PLAIN = 0,
	/* chooses or tunes the method: the keys that differ between the rows
	 * of one summary group (method, k, the solver keys, pretraining) */
	KEY_METHOD = 1,
	/* says where results or inputs go, not what is measured (out,
	 * trace, data_dir): runs differing only here are the same run */
	KEY_OUTPUT = 2,
	/* a string key whose empty value means "none" (params,
	 * save_params); other string keys refuse "" */
	KEY_EMPTY_OK = 4,
};

struct key_desc {
	const char *name;
	const char *group; /* model, method, deq, data, training, ... */
	enum key_type type;
	size_t offset;		       /* in the struct that holds it */
	double min, max;	       /* numeric range, inclusive */
	int (*parse)(const char *);    /* KT_ENUM: index, -1 unknown */
	const char *(*enum_name)(int); /* KT_ENUM */
	const char *choices;	       /* allowed values, for messages */
	size_t size;		       /* KT_STR buffer size */
	const char *help;
	int min_open; /* 1: min itself is excluded, the range is (min, max] */
	int role;     /* enum key_role flags */
};

/* Row constructors; S is the struct type that holds the field, r the
 * role flags. KT_ENUM rows list their allowed values from enum_name
 * (key_choices), so a new solver or method needs no second list. */
#define KEY_OFF(S, f) offsetof(S, f)
#define KEY_INT(S, n, g, f, lo, hi, h, r)                                      \
	{                                                                      \
		n, g, KT_INT, KEY_OFF(S, f), lo, hi, NULL, NULL, NULL, 0, h,   \
		    0, r                                                       \
	}
#define KEY_DBL(S, n, g, f, lo, hi, h, r)                                      \
	{                                                                      \
		n, g, KT_DOUBLE, KEY_OFF(S, f), lo, hi, NULL, NULL, NULL, 0,   \
		    h, 0, r                                                    \
	}
/* a number with an exclusive lower bound: (lo, hi] */
#define KEY_DBL_GT(S, n, g, f, lo, hi, h, r)                                   \
	{                                                                      \
		n, g, KT_DOUBLE, KEY_OFF(S, f), lo, hi, NULL, NULL, NULL, 0,   \
		    h, 1, r                                                    \
	}
#define KEY_ENUM(S, n, g, f, p, nm, h, r)                                      \
	{                                                                      \
		n, g, KT_ENUM, KEY_OFF(S, f), 0, 0, p, nm, NULL, 0, h, 0, r    \
	}
#define KEY_STR(S, n, g, f, ch, h, r)                                          \
	{                                                                      \
		n, g, KT_STR, KEY_OFF(S, f), 0, 0, NULL, NULL, ch,             \
		    sizeof(((S *)0)->f), h, 0, r                               \
	}
#define KEY_BOOL(S, n, g, f, h, r)                                             \
	{                                                                      \
		n, g, KT_BOOL, KEY_OFF(S, f), 0, 1, NULL, NULL, NULL, 0, h, 0, \
		    r                                                          \
	}

/* The allowed values of an enum row, "broyden, anderson, fixed_point"
 * (the names of 0, 1, ... up to the first index without one); for a
 * string row its `choices` ("" when free). */
void key_choices(const struct key_desc *d, char *buf, size_t n);

/* Index of s in names[0..n), -1 when absent (or s NULL); the name of
 * index i, "?" out of range: the parse/enum_name pair of an enum row. */
int key_name_index(const char *s, const char *const *names, int n);
const char *key_index_name(int i, const char *const *names, int n);

/* Defines the parse/enum_name pair of an enum key over the array of its
 * names: int PARSE(const char *), const char *NAME(int). */
#define KEY_NAME_FUNCS(PARSE, NAME, NAMES)                                     \
	int PARSE(const char *s)                                               \
	{                                                                      \
		return key_name_index(                                         \
		    s, NAMES, (int)(sizeof(NAMES) / sizeof(NAMES[0])));        \
	}                                                                      \
	const char *NAME(int i)                                                \
	{                                                                      \
		return key_index_name(                                         \
		    i, NAMES, (int)(sizeof(NAMES) / sizeof(NAMES[0])));        \
	}

/* 1 when the value v lies in the numeric range of row d. */
int key_in_range(const struct key_desc *d, double v);
/* The range of a numeric row as an interval, "[1, 100000]" or "(0, 1]". */
void key_range_text(const struct key_desc *d, char *buf, size_t n);
/* The numeric value of row d's field in the struct at base (KT_INT, KT_LONG,
 * KT_DOUBLE, KT_BOOL, KT_ENUM; NAN for strings and u64). */
double key_number(const struct key_desc *d, const void *base);

/* Checks the numeric fields of rows[0..n) in the struct at base against
 * their ranges and every enum field against its names: 0, or -1 with
 * "KEY=VALUE is out of range; use a value in [lo, hi]" (or "... is not a
 * known value; use one of: ...") — the messages config_set gives for the
 * same values, so a struct filled in code is held to the rules a config
 * file is. */
int keys_check(const struct key_desc *rows, size_t n, const void *base,
	       char *err, size_t errlen);

#endif
