/* validate_report.c — see validate_report.h. */
#include "validate_report.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../io/jsontext.h"

void validate_safe_text(char *buf, size_t n, const char *s)
{
	size_t o = 0;
	size_t len = strlen(s);
	for (size_t i = 0; i < len && o + 7 < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
		else if (c == 0xc2 && i + 1 < len &&
			 (unsigned char)s[i + 1] >= 0x80 &&
			 (unsigned char)s[i + 1] <= 0x9f)
			o += (size_t)snprintf(buf + o, n - o, "\\u00%02x",
					      (unsigned char)s[++i]);
		else
			buf[o++] = (char)c;
	}
	if (n) {
		buf[o < n ? o : n - 1] = 0;
		jsontext_trim(buf);
	}
}

void validate_report_safe(validate_report_fn report, void *ctx,
			  const char *path, const char *what)
{
	char p[400], t[1024];
	validate_safe_text(p, sizeof(p), path);
	validate_safe_text(t, sizeof(t), what);
	report(ctx, p, t);
}

void validate_problem(struct validate_walk *w, const char *path,
		      const char *fmt, ...)
{
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	w->problems++;
	if (w->report)
		validate_report_safe(w->report, w->ctx, path, what);
}
