/*
 * textsafe.h — record strings (method labels, config values: any text a
 * record file holds, and validate lets through) made inert for the text
 * formats report and compare print:
 * - CSV: RFC 4180 quoting, and a cell that a spreadsheet would run as a
 *   formula (first character =, +, -, @, tab or CR) starts with ' instead
 *   (OWASP's rule against CSV injection);
 * - markdown: | and \ escaped (the row keeps its columns), line breaks and
 *   tabs as spaces (it keeps its line), <, > and & as HTML entities (no
 *   markup reaches a renderer), control characters as '?';
 * - terminal: control characters (C0 but none kept, DEL, C1, the bidi
 *   overrides that reorder a line) and bytes that are not UTF-8 as '?', so
 *   a record cannot clear the screen, retitle the window or colour the
 *   rest of the table; cut to a number of display columns.
 * The HTML page escapes its own text (report_html.c).
 */
#ifndef DQ_BENCH_TEXTSAFE_H
#define DQ_BENCH_TEXTSAFE_H

#include <stddef.h>
#include <stdio.h>

/* Writes s to f as one CSV field: quoted, inner quotes doubled, a leading
 * ' before a first character of =, +, -, @, tab or CR. NULL writes "". */
void textsafe_csv(FILE *f, const char *s);

/* s as markdown table cell text into buf (n bytes, NUL-terminated; cut
 * between characters, never inside an escape, when it does not fit).
 * NULL gives "". */
void textsafe_md(char *buf, size_t n, const char *s);

/* s for a terminal into buf (n bytes, NUL-terminated), at most w display
 * columns (wide East Asian characters count 2, combining marks 0; w < 0:
 * no limit): a cut text ends in '~'. Returns the columns written. NULL
 * gives "". */
int textsafe_term(char *buf, size_t n, const char *s, int w);

/* Display columns of UTF-8 text s as textsafe_term counts them. */
int textsafe_columns(const char *s);

#endif
