/* dispatch.c — see dispatch.h: the one place that tells impl=pytorch runs
 * (peer.c) from deqbench's own (runner.c), and that registers each run as
 * running (beside.h) so its record says what ran beside it. */
#include "dispatch.h"

#include <stdio.h>

#include "../pytorch/peer.h"
#include "../run/beside.h"
#include "../run/runner.h"

/* What the registry file of a run says about it, for a person. */
static void run_label(char *buf, size_t n, const char *what,
		      const struct run_meta *meta)
{
	if (meta && meta->suite)
		snprintf(buf, n,
			 "deqbench %s: suite %.100s index %d shard %d/%d", what,
			 meta->suite, meta->index, meta->shard_i,
			 meta->shard_n > 0 ? meta->shard_n : 1);
	else
		snprintf(buf, n, "deqbench %s", what);
}

/* The run in the registry (beside_enter) from before its setup to after
 * its record's last measurement; its record's `beside` from the counts. */
static enum run_status registered(const struct bench_config *cfg,
				  const struct run_meta *meta, json_t **record,
				  int eval)
{
	char label[200];
	struct beside *b;
	enum run_status st;
	run_label(label, sizeof(label), eval ? "eval" : "run", meta);
	b = beside_enter(label);
	if (eval)
		st = peer_wanted(cfg) && cfg->params[0]
			 ? peer_eval(cfg, meta, record)
			 : runner_eval(cfg, meta, record);
	else
		st = peer_wanted(cfg) ? peer_run(cfg, meta, record)
				      : runner_run(cfg, meta, record);
	json_object_set_new(*record, "beside",
			    beside_leave(b, meta ? meta->lanes : 0));
	return st;
}

enum run_status dispatch_run(const struct bench_config *cfg,
			     const struct run_meta *meta, json_t **record)
{
	return registered(cfg, meta, record, 0);
}

enum run_status dispatch_eval(const struct bench_config *cfg,
			      const struct run_meta *meta, json_t **record)
{
	return registered(cfg, meta, record, 1);
}

int dispatch_precheck(const struct bench_config *cfg, int eval, char *err,
		      size_t errlen)
{
	if (peer_wanted(cfg))
		return peer_check(&cfg, 1, err, errlen);
	return eval ? 0 : run_ctx_precheck(cfg, err, errlen);
}
