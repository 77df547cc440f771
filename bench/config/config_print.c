/* config_print.c — struct bench_config as JSON (the record's "config" and
 * "method" objects, the effective config without other methods' keys, and
 * the check that refuses such keys set away from their defaults) and the
 * key table as --help, --help-json and docs/configuration.md's markdown
 * table, all from the rows of config.c and the methods' key rows. */
#include "config.h"
#include "config_features.h"
#include "config_keys.h"
#include "../io/jsontext.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

json_t *config_key_json(const struct bench_config *c, const char *key)
{
	struct key_ref r = key_find(key);
	return r.d ? key_json(c, r) : NULL;
}

json_t *config_to_json(const struct bench_config *c)
{
	json_t *o = json_object();
	struct key_ref r;
	for (size_t i = 0; (r = key_at(i)).d; i++)
		json_object_set_new(o, r.d->name, key_json(c, r));
	return o;
}

json_t *config_method_json(const struct method_config *m)
{
	struct bench_config c;
	struct key_ref r;
	json_t *o = json_object();
	memset(&c, 0, sizeof(c));
	c.method = *m;
	for (size_t i = 0; (r = key_at(i)).d; i++)
		if (r.owner >= 0 || !strcmp(r.d->group, "method"))
			json_object_set_new(o, r.d->name, key_json(&c, r));
	return o;
}

json_t *config_method_record_json(const struct method_config *m)
{
	char label[128];
	json_t *o = config_method_json(m);
	method_label(m, label, sizeof(label));
	json_object_set_new(o, "label", json_string(label));
	return o;
}

/* Key r's value in c as text (as --dry-run prints it); malloc'd. */
static char *value_text(const struct bench_config *c, struct key_ref r)
{
	json_t *v = key_json(c, r);
	char *t = json_is_string(v) ? strdup(json_string_value(v))
				    : json_dumps(v, JSON_ENCODE_ANY);
	json_decref(v);
	return t;
}

int config_check_method_keys(const struct bench_config *c, char *err,
			     size_t errlen)
{
	struct bench_config d;
	struct key_ref r;
	config_defaults(&d);
	for (size_t i = 0; (r = key_at(i)).d; i++) {
		json_t *a, *b;
		int same;
		if (r.owner < 0 || r.owner == c->method.method)
			continue;
		a = key_json(c, r);
		b = key_json(&d, r);
		same = json_equal(a, b);
		json_decref(a);
		json_decref(b);
		if (!same) {
			char *t = value_text(c, r);
			snprintf(err, errlen,
				 "%s=%.60s has no effect with method=%s: it is "
				 "a key of method=%s; drop it, or use "
				 "method=%s",
				 r.d->name, t ? t : "?",
				 method_kind_name(c->method.method),
				 method_kind_name(r.owner),
				 method_kind_name(r.owner));
			free(t);
			return -1;
		}
	}
	return 0;
}

json_t *config_effective_json(const struct bench_config *c)
{
	json_t *o = config_to_json(c);
	struct key_ref r;
	for (size_t i = 0; (r = key_at(i)).d; i++)
		if (r.owner >= 0 && r.owner != c->method.method)
			json_object_del(o, r.d->name);
	return o;
}

const char *config_key_name(size_t i)
{
	return key_at(i).d ? key_at(i).d->name : NULL;
}

/* 1 when s is one of the ", "-separated names in list. */
static int in_list(const char *s, const char *list)
{
	size_t n = strlen(s);
	for (const char *p = list; p && *p;) {
		const char *e = strstr(p, ", ");
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && !strncmp(p, s, n))
			return 1;
		p = e ? e + 2 : NULL;
	}
	return 0;
}

/* The JSON type a key's value has in records: "int", "number", "bool" or
 * "string" (enums are written as their names). */
static const char *key_json_type(const struct key_desc *d)
{
	switch (d->type) {
	case KT_INT:
	case KT_LONG:
	case KT_U64:
		return "int";
	case KT_DOUBLE:
		return "number";
	case KT_BOOL:
		return "bool";
	default:
		return "string";
	}
}

int config_check_json(const char *key, const json_t *v, char *expected,
		      size_t n)
{
	struct key_ref r = key_find(key);
	const struct key_desc *d = r.d;
	const char *t;
	char buf[256];
	if (!d)
		return CONFIG_CHECK_UNKNOWN;
	t = key_json_type(d);
	snprintf(expected, n, "%s", t);
	if (!strcmp(t, "int")	   ? !json_is_integer(v)
	    : !strcmp(t, "number") ? !json_is_number(v)
	    : !strcmp(t, "bool")   ? !json_is_boolean(v)
				   : !json_is_string(v))
		return CONFIG_CHECK_TYPE;
	if (json_is_number(v) && d->type != KT_U64 &&
	    !key_in_range(d, json_number_value(v))) {
		key_range_text(d, buf, sizeof(buf));
		snprintf(expected, n, "%s in %s", t, buf);
		return CONFIG_CHECK_RANGE;
	}
	if (d->type == KT_U64 && json_integer_value(v) < 0) {
		snprintf(expected, n, "int in [0, 9223372036854775807]");
		return CONFIG_CHECK_RANGE;
	}
	key_choices(d, buf, sizeof(buf));
	if (json_is_string(v) && buf[0] &&
	    !in_list(json_string_value(v), buf)) {
		snprintf(expected, n, "one of %s", buf);
		return CONFIG_CHECK_CHOICE;
	}
	return 0;
}

/* Allowed values of a key, for --help and the docs/configuration.md table. */
static void key_allowed(const struct key_desc *d, char *buf, size_t n)
{
	switch (d->type) {
	case KT_INT:
	case KT_LONG:
		snprintf(buf, n, "integer %.0f..%.0f", d->min, d->max);
		break;
	case KT_U64:
		snprintf(buf, n, "integer 0..2^63-1");
		break;
	case KT_DOUBLE:
		snprintf(buf, n, "number %s %g, <= %g",
			 d->min_open ? ">" : ">=", d->min, d->max);
		break;
	case KT_BOOL:
		snprintf(buf, n, "true, false");
		break;
	default:
		key_choices(d, buf, n);
		if (!*buf)
			snprintf(buf, n, "a path");
	}
}

/* Prints one line per key with `fmt` (five %s: name, group, default,
 * allowed, meaning). */
static void print_key_lines(FILE *f, const char *fmt)
{
	struct bench_config c;
	struct key_ref r;
	config_defaults(&c);
	for (size_t i = 0; (r = key_at(i)).d; i++) {
		json_t *v = key_json(&c, r);
		char *s =
		    json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(6));
		char allowed[160];
		key_allowed(r.d, allowed, sizeof(allowed));
		fprintf(f, fmt, r.d->name, r.d->group, s ? s : "?", allowed,
			r.d->help);
		free(s);
		json_decref(v);
	}
}

void config_print_help(FILE *f)
{
	fprintf(f,
		"usage: deqbench run [FILE.json] [key=value ...]\n"
		"  FILE.json is a flat JSON object of the keys below; "
		"key=value arguments override it.\n\n"
		"  %-16s %-9s %-21s %-34s %s\n",
		"key", "group", "default", "allowed", "meaning");
	print_key_lines(f, "  %-16s %-9s %-21s %-34s %s\n");
}

static const char *const type_names[] = {"int",	 "int",	   "int", "number",
					 "bool", "string", "enum"};

/* One key's metadata for config_print_json (new reference). */
static json_t *key_meta(const struct bench_config *defaults, struct key_ref r)
{
	const struct key_desc *d = r.d;
	char allowed[256];
	json_t *o = json_object();
	key_allowed(d, allowed, sizeof(allowed));
	json_object_set_new(o, "name", json_string(d->name));
	json_object_set_new(o, "group", json_string(d->group));
	json_object_set_new(o, "type", json_string(type_names[d->type]));
	json_object_set_new(o, "default", key_json(defaults, r));
	json_object_set_new(o, "allowed", json_string(allowed));
	json_object_set_new(o, "help", json_string(d->help));
	json_object_set_new(o, "method",
			    json_boolean(config_key_is_method(d->name)));
	json_object_set_new(o, "output", json_boolean(d->role & KEY_OUTPUT));
	if (d->type == KT_INT || d->type == KT_LONG || d->type == KT_DOUBLE) {
		json_object_set_new(o, "min", json_real(d->min));
		json_object_set_new(o, "max", json_real(d->max));
		json_object_set_new(o, "min_open", json_boolean(d->min_open));
	}
	if (d->type == KT_ENUM || d->choices) {
		key_choices(d, allowed, sizeof(allowed));
		json_object_set_new(o, "choices", json_string(allowed));
	}
	json_object_set_new(o, "requires", config_features_json(d->name));
	return o;
}

void config_print_json(FILE *f)
{
	struct bench_config c;
	struct key_ref r;
	json_t *a = json_array();
	config_defaults(&c);
	for (size_t i = 0; (r = key_at(i)).d; i++)
		json_array_append_new(a, key_meta(&c, r));
	json_dumpf(a, f, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
	fputc('\n', f);
	json_decref(a);
}

void config_print_markdown(FILE *f)
{
	fprintf(f, "| key | group | default | allowed | meaning |\n"
		   "|---|---|---|---|---|\n");
	print_key_lines(f, "| `%s` | %s | `%s` | %s | %s |\n");
}
