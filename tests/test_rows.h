/* test_rows.h — helpers of the tests that read report's rows
 * (report_table_rows' JSON objects) and their printed forms. */
#ifndef DQ_TEST_ROWS_H
#define DQ_TEST_ROWS_H

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* What printer p writes of rows, as a string the caller frees. Static
 * buffer pointers: gcc takes a local that open_memstream writes through
 * for a pointer that dangles once inlined. */
static inline char *printed(void (*p)(FILE *, const json_t *),
			    const json_t *rows)
{
	static char *buf;
	static size_t len;
	FILE *f;
	buf = NULL;
	f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	p(f, rows);
	fclose(f);
	return buf;
}

/* The first row of group whose method label starts with method_prefix,
 * or NULL. */
static inline const json_t *row_where(const json_t *rows, const char *group,
				      const char *method_prefix)
{
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r)
	{
		const char *g = json_string_value(json_object_get(r, "group"));
		const char *m = json_string_value(json_object_get(r, "method"));
		if (!strcmp(g, group) &&
		    !strncmp(m, method_prefix, strlen(method_prefix)))
			return r;
	}
	return NULL;
}

#endif
