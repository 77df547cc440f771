/* bench_block.h — `deqbench bench-block [key=value ...]`: times forward +
 * vjp of one transformer (or, with model=trellisnet, TrellisNet) block
 * application and the backend GEMM on the block's own GEMM shapes, in one
 * run, and prints both rates and their ratio (how close the block gets to
 * the GEMM roofline of this device); with vocab > 0 also the LM head's
 * GEMMs and the GEMM rate of one training step's shapes (layers x the
 * block's + the head's). */
#ifndef DQ_BENCH_BLOCK_H
#define DQ_BENCH_BLOCK_H

/* argv[0] is the command name ("bench-block"); key=value arguments: the
 * config keys model d_model n_heads d_ff seq_len batch_size layers device
 * threads seed, parsed and checked as `deqbench run`'s (config_set), and
 * its own iters warmup vocab; defaults: the bench-block preset (`--help`
 * prints it). Returns 0, or 2 on bad input / 1 on a run-time failure with
 * one line on stderr. */
int bench_block_main(int argc, char **argv);

#endif
