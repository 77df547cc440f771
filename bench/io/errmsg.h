/* errmsg.h — the one-line error messages of bench/: functions that can fail
 * take (char *err, size_t errlen) and fill it with one line naming the
 * problem and the fix. */
#ifndef DQ_BENCH_ERRMSG_H
#define DQ_BENCH_ERRMSG_H

#include <stddef.h>

/* errmsg_set — printf-style FMT into err[0..errlen) (truncated to fit,
 * between UTF-8 characters, always NUL-terminated); does nothing when err
 * is NULL or errlen is 0, so callers may pass no buffer. */
void errmsg_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* errmsg_brief — s for a message: s itself when shorter than n, else its
 * first and last characters around "..." in buf (n bytes; cut between
 * UTF-8 characters), so a long path or value leaves room for the cause
 * that follows it. Returns s or buf. */
const char *errmsg_brief(const char *s, char *buf, size_t n);

#endif
