/* validate_schema_rows.h — what the three files of the schema table share
 * (validate_schema.c: the top level and the sections up to `evals`;
 * validate_schema_run.c: `work` to `compile`; validate_schema_price.c:
 * `host`, `device`, `build` and the price records): the row macros, the
 * dates of the *Added* fields, and the member tables one file defines and
 * another points to. Private to those files and validate_schema_md.c.
 */
#ifndef DQ_BENCH_VALIDATE_SCHEMA_ROWS_H
#define DQ_BENCH_VALIDATE_SCHEMA_ROWS_H

#include <stddef.h>

#include "validate_schema.h"

/* The dates of the fields that older records lack (SCHEMA.md: "Added").
 * Those marked "optional" may be absent even under --strict: the committed
 * records made before them lack them. */
#define ADDED "2026-11-23"
/* the health object and the quartiles of `stats` */
#define ADDED_HEALTH "2026-11-25"
/* method.label; optional: every reader makes the label from the other
 * fields where it is absent */
#define ADDED_LABEL "2026-11-25"
/* the managed category and its prediction (method=managed); optional: a
 * reader takes an absent one as 0 */
#define ADDED_MANAGED "2026-11-26"
/* host.blas: which BLAS kernels ran */
#define ADDED_BLAS "2026-11-27"
/* build.fingerprint: a hash of the code that ran; optional */
#define ADDED_FINGERPRINT "2026-11-27"
/* health's trends, backward convergence and flags; optional */
#define ADDED_TRENDS "2026-11-27"
/* compile: what torch.compile made of an impl=pytorch compile=true run;
 * optional: deqbench's records lack it too */
#define ADDED_COMPILE "2026-11-27"
/* checkpoint's selective (segments with selective tapes); optional:
 * absent means false */
#define ADDED_CKPT_SELECTIVE "2026-11-28"
/* deq's solver_kernels (the fused Broyden/Anderson iterations); optional:
 * absent
 * means ops */
#define ADDED_FUSED_SOLVER "2026-11-28"
/* the suite's order and shard, and `beside`: what ran beside the run;
 * optional */
#define ADDED_BESIDE "2026-11-27"
/* work: what a run computed, by unit; optional (impl=pytorch records
 * carry null) */
#define ADDED_WORK "2026-11-27"
/* quality.valid_curve: the valid evaluations during training
 * (eval_every); optional */
#define ADDED_CURVE "2026-11-27"
/* work.attn_recompute: method=selective's attention recomputations;
 * optional */
#define ADDED_SELECTIVE "2026-11-27"
/* inference.body_ms and inference.head_ms: the head timed apart from the
 * rest of the forward; optional */
#define ADDED_HEAD "2026-11-27"

/* A row: name, types (enum vtype), then any other member by name. */
#define F(n, t, ...)                                                           \
	{                                                                      \
		.name = n, .types = t, __VA_ARGS__                             \
	}
/* A method field checked like the config key of the same name. */
#define KEYED(n, t, ...) F(n, t, .key = n, __VA_ARGS__)
#define NUM_OR_NULL	 (VT_NUM | VT_NULL)
#define INT_OR_NULL	 (VT_INT | VT_NULL)
#define STR_OR_NULL	 (VT_STR | VT_NULL)
#define OBJ_OR_NULL	 (VT_OBJ | VT_NULL)
#define STATS(n, ...)                                                          \
	F(n, VT_OBJ, .members = vrows_stats, .doc_type = "stats",              \
	  .flags = VF_PROSE, __VA_ARGS__)

/* Member tables shared between the files, each ending with a row whose
 * name is NULL. */
extern const struct vfield vrows_stats[];
extern const struct vfield vrows_solve[];
extern const struct vfield vrows_cats[];
extern const struct vfield vrows_work[];
extern const struct vfield vrows_health[];
extern const struct vfield vrows_quality[];
extern const struct vfield vrows_inference[];
extern const struct vfield vrows_host[];
extern const struct vfield vrows_device[];
extern const struct vfield vrows_build[];
extern const struct vfield vrows_trace[];
extern const struct vfield vrows_pretrain[];
extern const struct vfield vrows_plan[];
extern const struct vfield vrows_compile[];

#endif
