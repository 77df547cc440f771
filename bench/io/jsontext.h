/* jsontext.h — text from outside (paths, suite names, environment
 * variables, messages that quote them) as JSON strings. JSON strings are
 * UTF-8, and jansson's json_string returns NULL for anything else, so a
 * field set from such text with json_object_set_new would silently vanish
 * from a record. These helpers always give a string, and cut texts only
 * between characters.
 */
#ifndef DQ_BENCH_JSONTEXT_H
#define DQ_BENCH_JSONTEXT_H

#include <jansson.h>
#include <stddef.h>

/* jsontext_string — s as a JSON string (new reference; NULL only when out
 * of memory). Valid UTF-8 (RFC 3629) is kept as it is; each byte that does
 * not belong to a valid UTF-8 character becomes the four characters
 * "\xNN" (NN its value in lowercase hex, as Python's backslashreplace),
 * so r<0xff>.jsonl is stored as "r\\xff.jsonl". NULL gives "". */
json_t *jsontext_string(const char *s);

/* jsontext_buf — jsontext_string of the text in buf[0..size), which
 * snprintf may have cut at size - 1 bytes: when it fills the buffer, a
 * character cut at its end is left out instead of becoming "\xNN". */
json_t *jsontext_buf(const char *buf, size_t size);

/* jsontext_fit — the length of the longest prefix of s of at most max
 * bytes that does not end inside a UTF-8 character: strlen(s) when that
 * is at most max. For "%.*s" with (int)jsontext_fit(s, N), s in place of
 * "%.Ns", which may cut a character in two. */
size_t jsontext_fit(const char *s, size_t max);

/* jsontext_trim — removes from the end of s a UTF-8 character that a cut
 * left incomplete (a lead byte followed by fewer continuation bytes than
 * it announces); s is otherwise unchanged. */
void jsontext_trim(char *s);

#endif
