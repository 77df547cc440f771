/* block_units.h — the block's four work units on buffers of their own,
 * shared by `deqbench bench-block` (bench/cmd/cmd_bench_block.c) and
 * `deqbench price` (price.c), so that both time the same calls
 * (docs/methods.md's work units):
 *   BLOCK_FWD_TAPED  model_block_forward writing a tape (unroll's forward)
 *   BLOCK_FWD        model_block_forward without a tape (a forward solver
 *                    iteration's evaluation)
 *   BLOCK_VJP        model_block_vjp with parameter gradients (the input,
 *                    injection and weight gradients)
 *   BLOCK_VJP_INPUT  model_block_vjp input-only: gu NULL, no parameter
 *                    gradients (an implicit backward iteration)
 * The vjps read the tape the buffers hold (written once at allocation by
 * a taped forward); their gradients accumulate (+=) into the model's,
 * whose values the timing does not need.
 */
#ifndef DQ_BENCH_BLOCK_UNITS_H
#define DQ_BENCH_BLOCK_UNITS_H

#include <stddef.h>

#include "../../models/model.h"

enum block_unit { BLOCK_FWD_TAPED, BLOCK_FWD, BLOCK_VJP, BLOCK_VJP_INPUT };

/* A block's input, output, cotangents and tape (n_state elements each;
 * tape model_tape_bytes), MEM_DEPTH. */
struct block_bufs {
	size_t nd;
	void *z, *zo, *g, *gi, *tape;
};

/* Deterministic O(1) values in x[0..n) (a cheap LCG, the same every
 * call). */
void block_fill_host(double *x, size_t n);

/* Allocates b for model m, uploads O(1) values to z and g, computes the
 * injection u (from whatever batch m holds) and writes the tape with one
 * taped forward. 0, or -1 when out of memory (free with block_bufs_free
 * all the same). */
int block_bufs_alloc(struct backend *be, struct model *m, struct block_bufs *b);
void block_bufs_free(struct backend *be, struct block_bufs *b);

/* One application of unit u on b (the calls above). */
void block_unit_run(struct model *m, struct block_bufs *b, enum block_unit u);

#endif
