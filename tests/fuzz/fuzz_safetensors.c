/* fuzz_safetensors.c — libFuzzer target: st_read (bench/io/safetensors.c) on
 * any bytes, as `deqbench eval params=FILE` and `deqbench params` read a
 * parameter file. An accepted file must keep st_read's promises: tensors
 * sorted by offset, each of numel x dtype-size bytes, readable to the end
 * and aligned to its element size, found again by name with its own dtype
 * and shape. */
#include "fuzz_util.h"

#include "bench/io/safetensors.h"

/* every tensor byte is read into it, so the reads are not optimised out */
static volatile unsigned char sink;

/* Reads every byte of t (AddressSanitizer checks the span) and checks what
 * st_read promises about it. */
static void check_tensor(const struct st_file *f, const struct st_tensor *t)
{
	const unsigned char *p = t->data;
	char err[512];
	size_t numel = 1;
	FUZZ_CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS);
	for (int d = 0; d < t->ndim; d++)
		numel *= (size_t)t->shape[d];
	FUZZ_CHECK(numel == t->numel);
	FUZZ_CHECK(t->nbytes == numel * st_dtype_size(t->dtype));
	FUZZ_CHECK((uintptr_t)p % st_dtype_size(t->dtype) == 0);
	for (size_t i = 0; i < t->nbytes; i++)
		sink ^= p[i];
	FUZZ_CHECK(st_get(f, t->name, t->dtype, t->ndim, t->shape, err,
			  sizeof(err)) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_file f;
	char err[1024] = "";

	if (st_read(&f, fuzz_file(data, size), err, sizeof(err)) != 0) {
		FUZZ_CHECK(err[0]);
		FUZZ_CHECK(f.tensors == NULL && f.n_tensors == 0);
		return 0;
	}
	for (size_t i = 0; i < f.n_tensors; i++)
		check_tensor(&f, &f.tensors[i]);
	(void)st_metadata(&f, "model");
	st_close(&f);
	return 0;
}
