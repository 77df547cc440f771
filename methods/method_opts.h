/* method_opts.h — every registered method's options struct, side by side
 * in struct method_config (method.h): one line per method that has
 * options, beside its line in registry.c. A method's key rows address its
 * struct by offsetof(struct method_opts, <member>) (method_desc). */
#ifndef DQ_METHOD_OPTS_H
#define DQ_METHOD_OPTS_H

#include "checkpoint.h"
#include "deq.h"
#include "managed.h"
#include "revolve.h"

struct method_opts {
	struct checkpoint_config checkpoint;
	struct deq_config deq;
	struct revolve_config revolve;
	struct managed_config managed;
};

#endif
