/* jsontext.c — text as JSON strings, cut between characters; see
 * jsontext.h. */
#include "jsontext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bytes a lead byte announces: 1 for ASCII, 2 to 4 for a lead byte of
 * RFC 3629, 0 for a continuation byte or a byte never valid in UTF-8
 * (0xc0, 0xc1, 0xf5..0xff). */
static size_t lead_len(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return 2;
	if (c >= 0xe0 && c <= 0xef)
		return 3;
	if (c >= 0xf0 && c <= 0xf4)
		return 4;
	return 0;
}

/* The length of the valid UTF-8 character at s (avail bytes left), or 0
 * when the bytes there are not one: RFC 3629's table (no overlong forms,
 * no surrogates, nothing past U+10FFFF), what jansson accepts. */
static size_t char_len(const unsigned char *s, size_t avail)
{
	size_t n = lead_len(s[0]);
	unsigned char lo = 0x80, hi = 0xbf;
	if (n == 0 || n > avail)
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	for (size_t i = 1; i < n; i++, lo = 0x80, hi = 0xbf)
		if (s[i] < lo || s[i] > hi)
			return 0;
	return n;
}

json_t *jsontext_string(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len, i = 0, o = 0;
	char *buf;
	json_t *j;
	if (!s)
		return json_string("");
	j = json_string(s);
	if (j)
		return j;
	len = strlen(s);
	buf = malloc(4 * len + 1);
	if (!buf)
		return NULL;
	while (i < len) {
		size_t n = char_len(u + i, len - i);
		if (n) {
			memcpy(buf + o, s + i, n);
			o += n;
			i += n;
		} else {
			snprintf(buf + o, 5, "\\x%02x", u[i++]);
			o += 4;
		}
	}
	buf[o] = 0;
	j = json_stringn(buf, o);
	free(buf);
	return j;
}

json_t *jsontext_buf(const char *buf, size_t size)
{
	size_t len = strnlen(buf, size);
	char *c;
	json_t *j;
	if (size == 0 || len + 1 < size)
		return jsontext_string(len < size ? buf : "");
	c = malloc(size);
	if (!c)
		return NULL;
	memcpy(c, buf, size - 1);
	c[size - 1] = 0;
	jsontext_trim(c);
	j = jsontext_string(c);
	free(c);
	return j;
}

size_t jsontext_fit(const char *s, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strnlen(s, max + 1);
	if (n <= max)
		return n;
	/* u[max] is the first byte left out; when it continues a character,
	 * that character's lead byte (at most 3 back) goes too */
	n = max;
	while (n > 0 && max - n < 3 && (u[n] & 0xc0) == 0x80)
		n--;
	return lead_len(u[n]) > max - n ? n : max;
}

void jsontext_trim(char *s)
{
	unsigned char *u = (unsigned char *)s;
	size_t len = strlen(s), p = len;
	while (p > 0 && len - p < 3 && (u[p - 1] & 0xc0) == 0x80)
		p--;
	/* u[p - 1]: the lead byte of the last character, if it has one */
	if (p > 0 && lead_len(u[p - 1]) > len - (p - 1))
		u[p - 1] = 0;
}
