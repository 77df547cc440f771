/* peer.h — impl=pytorch: the same run in PyTorch, as a child process.
 *
 * deqbench runs bench/pytorch/deqtorch.py (Debian's python3-torch) with the
 * resolved config and the corpus written as token-id files, and turns what
 * it prints into a record of results/SCHEMA.md whose `impl` is
 * "pytorch-<torch version>"; `suite`, `config`, `host` and `build` come from
 * deqbench, as for its own runs, so a pytorch row and a deqbench row of one
 * config differ only in what was measured. The contract with deqtorch.py
 * (bench/pytorch/README.md):
 *
 *   deqtorch.py check   stdin: a JSON array of resolved configs (a record's
 *                       `config`); exit 0 when every one is supported, else
 *                       2 and one line on stderr naming the key and the fix.
 *   deqtorch.py run     stdin: {"config": {...}, "data": {"corpus": NAME,
 *                       "vocab_size": V, "train": P, "valid": P, "test": P}}
 *                       with P token-id files in the corpus cache format
 *                       (bench/data_cache.c); progress on stderr; stdout:
 *                       one JSON line, the record without `suite`, `host`,
 *                       `build` and `schema`, with `impl`.
 *   deqtorch.py eval    stdin: as run, the config with params=P: evaluates
 *                       P on the valid and test splits (no training) and
 *                       prints the record of kind "eval" the same way.
 *
 * The interpreter is $DQ_PYTHON, else /usr/bin/python3 (Debian's, where
 * python3-torch installs); the script is $DQ_PYTORCH_SCRIPT, else the source
 * tree's bench/pytorch/deqtorch.py.
 */
#ifndef DQ_BENCH_PEER_H
#define DQ_BENCH_PEER_H

#include <jansson.h>
#include <stddef.h>

#include "config.h"
#include "runner.h"

/* 1 when cfg asks for impl=pytorch. */
int peer_wanted(const struct bench_config *cfg);

/* Checks, before anything runs or is written, that the n configs cfgs[i]
 * (those with impl=pytorch; others are skipped) can run: python3 with torch
 * is installed and deqtorch.py check accepts every one. 0, or -1 with one
 * line in err (bad input: exit 2). */
int peer_check(const struct bench_config *const *cfgs, int n, char *err,
	       size_t errlen);

/* Refuses impl=pytorch for a command other than run, eval and suite
 * (grad, params, plan). 0, or -1 with one line in err naming the command. */
int peer_refuse(const struct bench_config *cfg, const char *command, char *err,
		size_t errlen);

/* Runs cfg in PyTorch (deqtorch.py run) and stores its record in *record
 * (always; status "error" with the reason when the child failed). Its
 * stderr passes through to ours (progress). Returns the record's status as
 * runner_run does; RUN_SETUP_FAILED when the corpus cannot be loaded or
 * deqtorch.py refused the config (exit 2). */
enum run_status peer_run(const struct bench_config *cfg,
			 const struct run_meta *meta, json_t **record);

/* As peer_run for `deqbench eval` (deqtorch.py eval): cfg's params= file
 * evaluated in PyTorch; the record's kind is "eval". */
enum run_status peer_eval(const struct bench_config *cfg,
			  const struct run_meta *meta, json_t **record);

#endif
