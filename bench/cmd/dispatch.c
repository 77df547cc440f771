/* dispatch.c — see dispatch.h: the one place that tells impl=pytorch runs
 * (peer.c) from deqbench's own (runner.c). */
#include "dispatch.h"

#include "../pytorch/peer.h"
#include "../run/runner.h"

enum run_status dispatch_run(const struct bench_config *cfg,
			     const struct run_meta *meta, json_t **record)
{
	if (peer_wanted(cfg))
		return peer_run(cfg, meta, record);
	return runner_run(cfg, meta, record);
}

enum run_status dispatch_eval(const struct bench_config *cfg,
			      const struct run_meta *meta, json_t **record)
{
	if (peer_wanted(cfg) && cfg->params[0])
		return peer_eval(cfg, meta, record);
	return runner_eval(cfg, meta, record);
}

int dispatch_precheck(const struct bench_config *cfg, int eval, char *err,
		      size_t errlen)
{
	if (peer_wanted(cfg))
		return peer_check(&cfg, 1, err, errlen);
	return eval ? 0 : run_ctx_precheck(cfg, err, errlen);
}
