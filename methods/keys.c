/* keys.c — see keys.h. */
#include "keys.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int key_name_index(const char *s, const char *const *names, int n)
{
	for (int i = 0; s && i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

const char *key_index_name(int i, const char *const *names, int n)
{
	return i >= 0 && i < n ? names[i] : "?";
}

int key_in_range(const struct key_desc *d, double v)
{
	return (d->min_open ? v > d->min : v >= d->min) && v <= d->max;
}

void key_range_text(const struct key_desc *d, char *buf, size_t n)
{
	if (d->type == KT_U64)
		snprintf(buf, n, "[0, 9223372036854775807]");
	else
		snprintf(buf, n, "%c%.10g, %.10g]", d->min_open ? '(' : '[',
			 d->min, d->max);
}

double key_number(const struct key_desc *d, const void *base)
{
	const void *f = (const char *)base + d->offset;
	switch (d->type) {
	case KT_INT:
	case KT_BOOL:
	case KT_ENUM:
		return *(const int *)f;
	case KT_LONG:
		return (double)*(const long *)f;
	case KT_DOUBLE:
		return *(const double *)f;
	default:
		return NAN;
	}
}

/* An enum field holds a valid index when its name parses back to it. */
static int enum_valid(const struct key_desc *d, int v)
{
	const char *s = d->enum_name(v);
	return v >= 0 && s && d->parse(s) == v;
}

void key_choices(const struct key_desc *d, char *buf, size_t n)
{
	size_t len = 0;
	if (n)
		buf[0] = 0;
	if (d->type != KT_ENUM) {
		snprintf(buf, n, "%s", d->choices ? d->choices : "");
		return;
	}
	for (int i = 0; enum_valid(d, i) && len < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s%s",
					i ? ", " : "", d->enum_name(i));
}

int keys_check(const struct key_desc *rows, size_t n, const void *base,
	       char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		const struct key_desc *d = &rows[i];
		double v = key_number(d, base);
		char r[256];
		if (d->type == KT_ENUM) {
			if (enum_valid(d, (int)v))
				continue;
			snprintf(err, errlen,
				 "%s=%d is not a known value; use one of: %s",
				 d->name, (int)v,
				 (key_choices(d, r, sizeof(r)), r));
			return -1;
		}
		if (d->type == KT_BOOL || d->type == KT_STR ||
		    d->type == KT_U64 || key_in_range(d, v))
			continue;
		key_range_text(d, r, sizeof(r));
		snprintf(err, errlen,
			 "%s=%.10g is out of range; use a value in %s", d->name,
			 v, r);
		return -1;
	}
	return 0;
}
