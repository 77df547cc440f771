/* errmsg.c — errmsg_set and errmsg_brief; see errmsg.h. */
#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

const char *errmsg_brief(const char *s, char *buf, size_t n)
{
	size_t len = strlen(s), head, tail;
	if (len < n || n < 16)
		return s;
	/* keep both ends: the start says where, the end names the file;
	 * both cut between UTF-8 characters, never inside one */
	head = (n - 4) / 2;
	tail = n - 4 - head;
	while (head > 0 && ((unsigned char)s[head] & 0xc0) == 0x80)
		head--;
	while (tail > 0 && ((unsigned char)s[len - tail] & 0xc0) == 0x80)
		tail--;
	memcpy(buf, s, head);
	memcpy(buf + head, "...", 3);
	memcpy(buf + head + 3, s + len - tail, tail);
	buf[head + 3 + tail] = 0;
	return buf;
}
