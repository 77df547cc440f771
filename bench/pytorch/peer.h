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
 *                       (bench/data/data_cache.c); progress on stderr; stdout:
 *                       one JSON line, the record without `suite`, `host`,
 *                       `build` and `schema`, with `impl`.
 *   deqtorch.py eval    stdin: as run, the config with params=P: evaluates
 *                       P on the valid and test splits (no training) and
 *                       prints the record of kind "eval" the same way.
 *
 * The interpreter is $DQ_PYTHON, else /usr/bin/python3 (Debian's, where
 * python3-torch installs); the script is $DQ_PYTORCH_SCRIPT, else the source
 * tree's bench/pytorch/deqtorch.py.
 *
 * The child runs in its own process group and dies with the process that
 * started it (proc.h); our first SIGINT or SIGTERM is passed on to it, and
 * deqtorch.py then stops after the current step or batch and prints its
 * record with status "interrupted", as deqbench's own runs do. The token
 * files live in $TMPDIR/deqbench-peer.HOST.PID.XXXXXX (TMPDIR unset: /tmp),
 * removed after the child; those of processes that were killed first are
 * removed by the next impl=pytorch run on the host. What the child prints
 * is used only when, merged with deqbench's part, it is a valid record
 * (validate.h, strict); anything else becomes an error record naming the
 * problem and ending with the child's stderr.
 */
#ifndef DQ_BENCH_PEER_H
#define DQ_BENCH_PEER_H

#include <jansson.h>
#include <stddef.h>

#include "../config/config.h"
#include "../run/run_ctx.h"

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

/* The `impl` of the records deqbench writes itself for a pytorch run (one
 * that failed before its child printed a usable record, a crashed suite
 * run): "pytorch-<torch version>" as peer_check's probe found it, or
 * "pytorch" before peer_check or when the version is unknown. Static
 * storage. */
const char *peer_impl_name(void);

/* Runs cfg in PyTorch (deqtorch.py run) and stores its record in *record
 * (always; status "error" with the reason when the child failed or printed
 * no valid record). Its stderr passes through to ours (progress). A params=
 * file is first loaded by deqbench's own loader (params_load), so
 * impl=pytorch refuses what deqbench refuses, with the same message.
 * Returns the record's status as runner_run does (runner.h);
 * RUN_SETUP_FAILED when the corpus cannot be loaded, the params= file is
 * refused or deqtorch.py refused the config (exit 2). dispatch_run
 * (dispatch.h) calls it for impl=pytorch. */
enum run_status peer_run(const struct bench_config *cfg,
			 const struct run_meta *meta, json_t **record);

/* As peer_run for `deqbench eval` (deqtorch.py eval): cfg's params= file
 * evaluated in PyTorch; the record's kind is "eval". */
enum run_status peer_eval(const struct bench_config *cfg,
			  const struct run_meta *meta, json_t **record);

#endif
