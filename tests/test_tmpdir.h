/* test_tmpdir.h — a temp directory per test for the file tests that do
 * not run the binary (test_data.c, test_safetensors.c): mk_tmp as Criterion
 * .init makes it (tmpdir names it), rm_tmp as .fini removes it; file_size
 * of a path. Header-only, static inline. (The tests that run deqbench use
 * test_cli.h's cli_setup, which also points $TMPDIR at the directory.) */
#ifndef DQ_TEST_TMPDIR_H
#define DQ_TEST_TMPDIR_H

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* The current test's directory ("" outside one). */
static char tmpdir[256];

/* Criterion .init: a fresh directory under /tmp in tmpdir. */
static inline void mk_tmp(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/dq_test_data_XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static inline int rm_one(const char *p, const struct stat *st, int flag,
			 struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* Criterion .fini: removes tmpdir and what it holds. */
static inline void rm_tmp(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	tmpdir[0] = 0;
}

/* Size in bytes of the file at path, -1 when it cannot be stat'ed. */
static inline long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

#endif
