/*
 * safetensors.h — read and write safetensors files (F32, F64, I32).
 *
 * Format (https://github.com/huggingface/safetensors): u64 little-endian
 * header length N, N bytes of JSON {"NAME": {"dtype": "F32", "shape": [..],
 * "data_offsets": [BEGIN, END]}, ..., "__metadata__": {"k": "v"}}, then the
 * raw little-endian tensor bytes; offsets are relative to the byte after
 * the header. The JSON is parsed and written with jansson.
 *
 * The reader is as strict as the reference implementation: header length
 * at most ST_MAX_HEADER and inside the file, valid JSON without duplicate
 * keys, known dtype, shape of non-negative integers with product x dtype
 * size == END - BEGIN, offsets that tile the data section exactly (sorted by
 * BEGIN: first at 0, each starting where the previous ended, last ending at
 * the end of the file) — so no overlap, no gap, no trailing bytes.
 *
 * Every error is one line naming the file, and the tensor where there is
 * one: "P.safetensors: tensor 'embed.weight': shape [4, 3] needs 48 bytes,
 * data_offsets give 40".
 */
#ifndef DQ_SAFETENSORS_H
#define DQ_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS   8
#define ST_MAX_HEADER (100u << 20) /* bytes, as the reference reader */

enum st_dtype { ST_F32, ST_F64, ST_I32 };

/* "F32", "F64", "I32". */
const char *st_dtype_name(enum st_dtype dt);
/* Bytes per element: 4, 8, 4. */
size_t st_dtype_size(enum st_dtype dt);

/* ---- writer -------------------------------------------------------------- */

struct st_writer;

/* st_writer_new — empty writer; NULL when out of memory. */
struct st_writer *st_writer_new(void);

/*
 * st_writer_add — adds tensor NAME of DTYPE and shape SHAPE[0..ndim)
 * (0 <= ndim <= ST_MAX_DIMS; ndim 0 is a scalar). DATA holds
 * prod(shape) elements, row-major, host memory; it is borrowed, not copied,
 * and must stay valid until st_writer_write returns. Returns 0, or -1 with
 * a message (empty or duplicate name, "__metadata__", bad ndim or shape).
 */
int st_writer_add(struct st_writer *w, const char *name, enum st_dtype dtype,
		  int ndim, const int64_t *shape, const void *data, char *err,
		  size_t errlen);

/* st_writer_set_metadata — string entry KEY: VALUE of "__metadata__"
 * (replaces an earlier KEY). Returns 0, or -1 when out of memory. */
int st_writer_set_metadata(struct st_writer *w, const char *key,
			   const char *value);

/*
 * st_writer_write — writes the file to a temporary file next to PATH,
 * flushes it to disk and renames it to PATH, so PATH is either the old file
 * or the whole new one (fileio_replace: only a new path or a regular file
 * is replaced, a symbolic link's regular target is replaced in its place,
 * anything else is refused; stale temporary files of dead writers are
 * removed first). Tensors are laid out 8-byte-aligned (F64 first, then the
 * others in the order added) after a header padded with spaces to a
 * multiple of 8. Returns 0, or -1 with "PATH: <reason>" or "PATH is a ..."
 * in err (no temporary file left).
 */
int st_writer_write(struct st_writer *w, const char *path, char *err,
		    size_t errlen);

/* st_writer_free — frees the writer (not the borrowed data); NULL is fine. */
void st_writer_free(struct st_writer *w);

/* ---- reader -------------------------------------------------------------- */

struct st_tensor {
	const char *name;
	enum st_dtype dtype;
	int ndim;
	int64_t shape[ST_MAX_DIMS];
	size_t numel; /* prod(shape); 1 for a scalar */
	size_t nbytes;
	const void *data; /* aligned to the dtype's size; owned by st_file */
};

struct st_file {
	char *path;
	size_t n_tensors;
	struct st_tensor *tensors; /* in file (offset) order */
	void *json_;		   /* parsed header (jansson json_t *) */
	unsigned char *data_;	   /* data section */
	void **copies_;		   /* realigned copies of misaligned tensors */
	size_t n_copies_;
};

/*
 * st_read — reads and validates PATH (see above) into *f; PATH must be a
 * regular file (a FIFO is refused, not waited on: fileio_open_read).
 * Returns 0, or -1 with *f zeroed and a one-line message in err.
 */
int st_read(struct st_file *f, const char *path, char *err, size_t errlen);

/* st_find — tensor NAME, or NULL. O(n_tensors). */
const struct st_tensor *st_find(const struct st_file *f, const char *name);

/*
 * st_get — tensor NAME checked against DTYPE and SHAPE[0..ndim) (ndim < 0:
 * any shape). Returns it, or NULL with "PATH: tensor 'NAME': missing" /
 * "...: expected F32 [4, 3], found F32 [3, 4]" in err.
 */
const struct st_tensor *st_get(const struct st_file *f, const char *name,
			       enum st_dtype dtype, int ndim,
			       const int64_t *shape, char *err, size_t errlen);

/* st_metadata — value of KEY in "__metadata__", or NULL. */
const char *st_metadata(const struct st_file *f, const char *key);

/* st_close — frees *f and zeroes it; safe on a zeroed st_file. */
void st_close(struct st_file *f);

#endif
