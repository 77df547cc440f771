/* errmsg.c — errmsg_set; see errmsg.h. */
#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>

#include "jsontext.h"

void errmsg_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n;
	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	n = vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n >= errlen)
		jsontext_trim(err);
}
