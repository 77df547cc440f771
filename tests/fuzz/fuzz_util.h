/* fuzz_util.h — what the libFuzzer targets (tests/fuzz/fuzz_*.c) share.
 * Header-only: each target is one executable.
 *
 * The readers under test take a path, so an input is handed over as a file:
 * a memfd (memory only, no disk, nothing left behind) reached through
 * /proc/self/fd/N, rewritten for every input. */
#ifndef DQ_FUZZ_UTIL_H
#define DQ_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Stops the fuzzer with a message: a broken contract of the code under
 * test (libFuzzer keeps the input that got here) or of the harness. */
#define FUZZ_CHECK(cond)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			abort();                                               \
		}                                                              \
	} while (0)

/* The path of a regular file holding data[0..size): the same memfd each
 * call, truncated and rewritten. */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	size_t off = 0;
	if (fd < 0) {
		fd = memfd_create("dq-fuzz", MFD_CLOEXEC);
		FUZZ_CHECK(fd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	FUZZ_CHECK(ftruncate(fd, 0) == 0);
	while (off < size) {
		ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
		FUZZ_CHECK(w > 0);
		off += (size_t)w;
	}
	return path;
}

/* /dev/null for writing, opened once: what the code under test prints
 * goes there (its formatting still runs). */
static inline FILE *fuzz_devnull(void)
{
	static FILE *f;
	if (!f)
		FUZZ_CHECK((f = fopen("/dev/null", "w")) != NULL);
	return f;
}

/* Splits data[0..size) at its first NUL byte: the file part before it
 * (returned length) and the arguments after it, one per line, into args
 * (at most max; a line longer than the buffer is cut). buf (n bytes)
 * holds the arguments' text. *nargs: how many. */
static inline size_t fuzz_split_args(const uint8_t *data, size_t size,
				     char *buf, size_t n, char **args, int max,
				     int *nargs)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t flen = nul ? (size_t)(nul - data) : size, alen;
	char *p = buf;
	*nargs = 0;
	if (!nul)
		return flen;
	alen = size - flen - 1;
	if (alen > n - 1)
		alen = n - 1;
	memcpy(buf, nul + 1, alen);
	buf[alen] = 0;
	while (*nargs < max && p < buf + alen) {
		char *nl = strchr(p, '\n');
		args[(*nargs)++] = p;
		if (!nl)
			break;
		*nl = 0;
		p = nl + 1;
	}
	return flen;
}

#endif
