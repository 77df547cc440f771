/* record_num.c — see record_num.h. */
#include "record_num.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double record_num(const json_t *o, const char *path)
{
	char buf[256], *save = NULL, *tok;
	const json_t *cur = o;
	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && cur;
	     tok = strtok_r(NULL, ".", &save))
		cur = json_object_get(cur, tok);
	return json_is_number(cur) ? json_number_value(cur) : NAN;
}
