/* test_safetensors.c — bench/io/safetensors.c on files the tests write into a
 * temp dir: a round trip of every dtype and shape, broken files rejected
 * with one line naming the file, foreign files with misaligned offsets, and
 * a failed write that leaves nothing behind. */
#include "safetensors.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_tmpdir.h"

static void write_raw(const char *path, const char *json, const void *data,
		      size_t n)
{
	FILE *f = fopen(path, "wb");
	uint64_t hl = strlen(json);
	fwrite(&hl, 8, 1, f);
	fwrite(json, 1, hl, f);
	if (n)
		fwrite(data, 1, n, f);
	fclose(f);
}

static void expect_reject(const char *path, const char *what)
{
	struct st_file f;
	char err[512] = "";
	cr_assert_eq(st_read(&f, path, err, sizeof(err)), -1, "%s accepted",
		     what);
	cr_assert_not_null(strstr(err, path), "%s: %s", what, err);
	cr_assert_null(strchr(err, '\n'), "%s", err);
	cr_assert_eq(f.n_tensors, 0u);
}

Test(safetensors, roundtrip, .init = mk_tmp, .fini = rm_tmp)
{
	float a[15], s0 = 2.5f;
	int32_t b[7];
	double c[12];
	int64_t sa[] = {3, 5}, sb[] = {7}, sc[] = {2, 3, 2}, sz[] = {0, 4};
	char path[400], tmp[420], err[512] = "";
	struct st_writer *w = st_writer_new();
	struct st_file f;
	const struct st_tensor *t;
	for (int i = 0; i < 15; i++)
		a[i] = 0.25f * i - 1;
	for (int i = 0; i < 7; i++)
		b[i] = -3 * i + 1000000;
	for (int i = 0; i < 12; i++)
		c[i] = 1.0 / (i + 1);
	snprintf(path, sizeof(path), "%s/p.safetensors", tmpdir);
	cr_assert_eq(
	    st_writer_add(w, "a.weight", ST_F32, 2, sa, a, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(st_writer_add(w, "b", ST_I32, 1, sb, b, err, sizeof(err)),
		     0);
	cr_assert_eq(st_writer_add(w, "c", ST_F64, 3, sc, c, err, sizeof(err)),
		     0);
	cr_assert_eq(
	    st_writer_add(w, "scalar", ST_F32, 0, NULL, &s0, err, sizeof(err)),
	    0);
	cr_assert_eq(
	    st_writer_add(w, "empty", ST_F32, 2, sz, NULL, err, sizeof(err)),
	    0);
	cr_assert_eq(st_writer_add(w, "b", ST_I32, 1, sb, b, err, sizeof(err)),
		     -1);
	cr_assert_eq(st_writer_add(w, "__metadata__", ST_I32, 1, sb, b, err,
				   sizeof(err)),
		     -1);
	cr_assert_eq(st_writer_set_metadata(w, "format", "pt"), 0);
	cr_assert_eq(st_writer_write(w, path, err, sizeof(err)), 0, "%s", err);
	st_writer_free(w);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	cr_assert_eq(access(tmp, F_OK), -1, "no .tmp left behind");

	cr_assert_eq(st_read(&f, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(f.n_tensors, 5u);
	cr_assert_str_eq(st_metadata(&f, "format"), "pt");
	cr_assert_null(st_metadata(&f, "nope"));
	t = st_get(&f, "a.weight", ST_F32, 2, sa, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(t->numel, 15u);
	cr_assert_eq(memcmp(t->data, a, sizeof(a)), 0);
	cr_assert_eq((uintptr_t)t->data % 4, 0);
	t = st_get(&f, "b", ST_I32, 1, sb, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(memcmp(t->data, b, sizeof(b)), 0);
	t = st_get(&f, "c", ST_F64, 3, sc, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq((uintptr_t)t->data % 8, 0);
	cr_assert_eq(memcmp(t->data, c, sizeof(c)), 0);
	t = st_get(&f, "scalar", ST_F32, 0, NULL, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(*(const float *)t->data, 2.5f);
	t = st_get(&f, "empty", ST_F32, -1, NULL, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(t->nbytes, 0u);
	cr_assert_eq(t->ndim, 2);

	cr_assert_null(st_get(&f, "a.weight", ST_F32, 2, (int64_t[]){5, 3}, err,
			      sizeof(err)));
	cr_assert_not_null(strstr(err,
				  "tensor 'a.weight': expected F32 [5, 3], "
				  "found F32 [3, 5]"),
			   "%s", err);
	cr_assert_not_null(strstr(err, path));
	cr_assert_null(st_get(&f, "b", ST_F32, 1, sb, err, sizeof(err)));
	cr_assert_null(st_get(&f, "zz", ST_F32, -1, NULL, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "tensor 'zz': missing"), "%s", err);
	st_close(&f);
	st_close(&f); /* idempotent */
}

Test(safetensors, rejects_broken_files, .init = mk_tmp, .fini = rm_tmp)
{
	char path[400], err[512];
	float a[6] = {1, 2, 3, 4, 5, 6};
	int64_t sa[] = {2, 3};
	struct st_writer *w = st_writer_new();
	long sz;
	FILE *f;
	snprintf(path, sizeof(path), "%s/x.safetensors", tmpdir);

	/* truncated: drop the last byte */
	st_writer_add(w, "a", ST_F32, 2, sa, a, err, sizeof(err));
	cr_assert_eq(st_writer_write(w, path, err, sizeof(err)), 0, "%s", err);
	sz = file_size(path);
	cr_assert_eq(truncate(path, sz - 1), 0);
	expect_reject(path, "truncated");
	cr_assert_eq(truncate(path, 5), 0);
	expect_reject(path, "5-byte file");

	/* trailing garbage */
	cr_assert_eq(st_writer_write(w, path, err, sizeof(err)), 0);
	f = fopen(path, "ab");
	fputc(0, f);
	fclose(f);
	expect_reject(path, "trailing byte");

	/* bad JSON: break the header's first quote */
	cr_assert_eq(st_writer_write(w, path, err, sizeof(err)), 0);
	f = fopen(path, "r+b");
	fseek(f, 9, SEEK_SET);
	fputc('#', f);
	fclose(f);
	expect_reject(path, "bad JSON");
	st_writer_free(w);

	/* header length beyond the file */
	f = fopen(path, "wb");
	fwrite(&(uint64_t){1000}, 8, 1, f);
	fputs("{}", f);
	fclose(f);
	expect_reject(path, "header length");

	/* a header that is not an object / duplicate keys / bad dtype */
	write_raw(path, "[1, 2]", NULL, 0);
	expect_reject(path, "array header");
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
	    a, 8);
	expect_reject(path, "duplicate key");
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,"
	    "4]}}",
	    a, 4);
	expect_reject(path, "BF16");

	/* wrong offsets: overlap, gap, size mismatch, out of range */
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}"
	    "}",
	    a, 12);
	expect_reject(path, "overlap");
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}"
	    "}",
	    a, 12);
	expect_reject(path, "gap");
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,"
	    "20]}}",
	    a, 20);
	expect_reject(path, "shape x dtype != bytes");
	write_raw(path,
		  "{\"a\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[0,"
		  "12]}}",
		  a, 8);
	expect_reject(path, "offsets past the end");
	write_raw(
	    path,
	    "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,"
	    "0]}}",
	    NULL, 0);
	expect_reject(path, "negative dim");
	write_raw(path,
		  "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,"
		  "0]}}",
		  a, 4);
	expect_reject(path, "reversed offsets");
	write_raw(path, "{\"__metadata__\":{\"k\":1}}", NULL, 0);
	expect_reject(path, "non-string metadata");
}

Test(safetensors, foreign_misaligned_offsets, .init = mk_tmp, .fini = rm_tmp)
{
	/* Another writer may put an F64 at a 4-byte offset; the reader must
	 * still hand out pointers aligned for the dtype. */
	char path[400], err[512] = "";
	unsigned char raw[12];
	float x = 0.5f;
	double d = -2.25;
	const char *js =
	    "{\"x\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
	    "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[4,12]}}";
	struct st_file f;
	const struct st_tensor *t;
	memcpy(raw, &x, 4);
	memcpy(raw + 4, &d, 8);
	snprintf(path, sizeof(path), "%s/m.safetensors", tmpdir);
	write_raw(path, js, raw, sizeof(raw));
	cr_assert_eq(st_read(&f, path, err, sizeof(err)), 0, "%s", err);
	t = st_get(&f, "d", ST_F64, 1, (int64_t[]){1}, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq((uintptr_t)t->data % 8, 0);
	cr_assert_eq(*(const double *)t->data, -2.25);
	t = st_get(&f, "x", ST_F32, 0, NULL, err, sizeof(err));
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(*(const float *)t->data, 0.5f);
	st_close(&f);
}

Test(safetensors, write_failure_leaves_nothing, .init = mk_tmp, .fini = rm_tmp)
{
	char path[400], err[512] = "";
	int32_t x = 1;
	struct st_writer *w = st_writer_new();
	snprintf(path, sizeof(path), "%s/no/such/dir/p.safetensors", tmpdir);
	st_writer_add(w, "x", ST_I32, 1, (int64_t[]){1}, &x, err, sizeof(err));
	cr_assert_eq(st_writer_write(w, path, err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, path), "%s", err);
	st_writer_free(w);
}
