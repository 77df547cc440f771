/* dispatch.h — where a run of the command layer goes: deqbench's own
 * runner (runner.h) or, for impl=pytorch, deqtorch.py as a child process
 * (peer.h). `run` and `eval` (main.c), a suite's runs (cmd_suite.c) and
 * plan's calibration runs and --run (cmd_plan.c) call these, never
 * runner_run or peer_run themselves: the choice is made here once, and the
 * runner knows nothing of the peer.
 */
#ifndef DQ_BENCH_DISPATCH_H
#define DQ_BENCH_DISPATCH_H

#include <jansson.h>
#include <stddef.h>

#include "../config/config.h"
#include "../run/run_ctx.h"

/* Runs cfg, peer_run for impl=pytorch and runner_run otherwise, and stores
 * its record in *record (always). Returns the run's status. */
enum run_status dispatch_run(const struct bench_config *cfg,
			     const struct run_meta *meta, json_t **record);

/* deqbench eval of cfg's params= file: peer_eval for impl=pytorch with
 * params=, else runner_eval (which refuses a config without params=). The
 * record in *record (always); returns its status. */
enum run_status dispatch_eval(const struct bench_config *cfg,
			      const struct run_meta *meta, json_t **record);

/* The checks of `run` (eval 0) or `eval` (eval 1) before anything is
 * written: deqtorch.py check for impl=pytorch (peer_check); for deqbench's
 * own runs the memory check of a training run (run_ctx_precheck; an
 * eval's comes when it creates its context). 0, or -1 with one line (bad
 * input). */
int dispatch_precheck(const struct bench_config *cfg, int eval, char *err,
		      size_t errlen);

#endif
