/* textsafe.c — see textsafe.h: record strings escaped for CSV, markdown
 * and the terminal. */
#include "textsafe.h"

#include <string.h>

/* The character at s: its code point, or -1 for a byte that does not start
 * a well-formed UTF-8 sequence (overlong forms and surrogates included);
 * *len its bytes (1 for such a byte). */
static long utf8_next(const unsigned char *s, int *len)
{
	unsigned c = s[0];
	int n = c < 0x80	 ? 1
		: (c >> 5) == 6	 ? 2
		: (c >> 4) == 14 ? 3
		: (c >> 3) == 30 ? 4
				 : 0;
	long cp = c & (0x3f >> (n - 1));
	*len = 1;
	if (n <= 1)
		return n ? (long)c : -1;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80) /* a NUL stops here too */
			return -1;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
	    (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
	    (cp >= 0xD800 && cp <= 0xDFFF))
		return -1;
	*len = n;
	return cp;
}

/* Characters a terminal acts on instead of showing: C0, DEL, C1 (U+009B
 * is CSI), the line and paragraph separators, and the bidi controls,
 * which reorder what follows them on the line. */
static int is_control(long cp)
{
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) ||
	       cp == 0x061c || cp == 0x200e || cp == 0x200f ||
	       (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Display columns of code point cp (not a control): 0 for combining marks
 * and zero-width characters, 2 for East Asian wide and fullwidth forms and
 * the emoji blocks, else 1. An approximation of wcwidth that needs no
 * locale. */
static int cp_width(long cp)
{
	static const long zero[][2] = {{0x0300, 0x036F}, {0x1AB0, 0x1AFF},
				       {0x1DC0, 0x1DFF}, {0x200B, 0x200D},
				       {0x20D0, 0x20FF}, {0xFE00, 0xFE0F},
				       {0xFE20, 0xFE2F}};
	static const long wide[][2] = {
	    {0x1100, 0x115F},	{0x2E80, 0x303E},  {0x3041, 0x33FF},
	    {0x3400, 0x4DBF},	{0x4E00, 0x9FFF},  {0xA000, 0xA4CF},
	    {0xAC00, 0xD7A3},	{0xF900, 0xFAFF},  {0xFE30, 0xFE4F},
	    {0xFF00, 0xFF60},	{0xFFE0, 0xFFE6},  {0x1F300, 0x1F64F},
	    {0x1F900, 0x1F9FF}, {0x20000, 0x3FFFD}};
	for (size_t i = 0; i < sizeof(zero) / sizeof(*zero); i++)
		if (cp >= zero[i][0] && cp <= zero[i][1])
			return 0;
	for (size_t i = 0; i < sizeof(wide) / sizeof(*wide); i++)
		if (cp >= wide[i][0] && cp <= wide[i][1])
			return 2;
	return 1;
}

void textsafe_csv(FILE *f, const char *s)
{
	fputc('"', f);
	if (s && *s && strchr("=+-@\t\r", *s))
		fputc('\'', f);
	for (; s && *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

void textsafe_md(char *buf, size_t n, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t l = 0;
	if (!n)
		return;
	while (*p) {
		int len;
		long cp = utf8_next(p, &len);
		const char *piece = NULL;
		size_t pl;
		if (cp == '|')
			piece = "\\|";
		else if (cp == '\\')
			piece = "\\\\";
		else if (cp == '<')
			piece = "&lt;";
		else if (cp == '>')
			piece = "&gt;";
		else if (cp == '&')
			piece = "&amp;";
		else if (cp == '\n' || cp == '\r' || cp == '\t' ||
			 cp == 0x2028 || cp == 0x2029)
			piece = " ";
		else if (cp < 0 || is_control(cp))
			piece = "?";
		pl = piece ? strlen(piece) : (size_t)len;
		if (l + pl >= n)
			break;
		memcpy(buf + l, piece ? piece : (const char *)p, pl);
		l += pl;
		p += len;
	}
	buf[l] = 0;
}

/* The columns of the character at p as textsafe_term writes it (a control
 * or a stray byte as '?'); *len its bytes, *safe 0 when it is written as
 * '?'. */
static int char_cols(const unsigned char *p, int *len, int *safe)
{
	long cp = utf8_next(p, len);
	*safe = cp >= 0 && !is_control(cp);
	return *safe ? cp_width(cp) : 1;
}

int textsafe_columns(const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	int cols = 0, len, safe;
	for (; *p; p += len)
		cols += char_cols(p, &len, &safe);
	return cols;
}

int textsafe_term(char *buf, size_t n, const char *s, int w)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	int total = textsafe_columns(s), cols = 0, len, safe;
	size_t l = 0, room;
	if (!n)
		return 0;
	/* room for the whole text, or for a cut one and its '~' */
	int cut = (w >= 0 && total > w) || strlen((const char *)p) >= n;
	int limit = !cut ? total : w >= 0 ? w - 1 : total;
	room = cut ? n - 2 : n - 1;
	if (n < 2 || limit < 0) {
		buf[0] = 0;
		return 0;
	}
	for (; *p; p += len) {
		int c = char_cols(p, &len, &safe);
		size_t bytes = safe ? (size_t)len : 1;
		if (cols + c > limit || l + bytes > room)
			break;
		memcpy(buf + l, safe ? (const char *)p : "?", bytes);
		l += bytes;
		cols += c;
	}
	if (cut) {
		buf[l++] = '~';
		cols++;
	}
	buf[l] = 0;
	return cols;
}
