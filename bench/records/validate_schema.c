/* validate_schema.c — results/SCHEMA.md as a table: one row per documented
 * field, section by section in the document's order (validate_schema.h
 * describes the columns). A field that the code starts to write is added here and in
 * SCHEMA.md in the same commit: `deqbench validate` calls an unlisted field
 * a problem, and tests/test_validate.c compares this table with the
 * document's tables.
 */
#include "validate_schema.h"

#include <stddef.h>

/* The date of the fields that older records lack (SCHEMA.md: "Added"). */
#define ADDED "2026-11-23"
/* The health object and the quartiles of `stats`. */
#define ADDED_HEALTH "2026-11-25"
/* method.label; optional even for --strict: some committed results/
 * records were made before it, and every reader makes the label from the
 * other fields where it is absent */
#define ADDED_LABEL "2026-11-25"
/* the managed category and its prediction (method=managed);
 * optional even for --strict, as the label: records before them lack
 * them, and a reader takes an absent one as 0 */
#define ADDED_MANAGED "2026-11-26"
/* host.blas: which BLAS kernels ran */
#define ADDED_BLAS "2026-11-27"
/* build.fingerprint: a hash of the code that ran; optional even for
 * --strict, as host.blas: the committed records before it lack it */
#define ADDED_FINGERPRINT "2026-11-27"
/* health's trends, backward convergence and flags; optional even for
 * --strict: the committed records before them lack them */
#define ADDED_TRENDS "2026-11-27"
/* compile: what torch.compile made of an impl=pytorch compile=true run;
 * optional even for --strict: deqbench's records, and pytorch records
 * before it, lack it */
#define ADDED_COMPILE "2026-11-27"
/* checkpoint's selective (segments with selective tapes); optional even
 * for --strict: the records before it lack it, and absent means false */
#define ADDED_CKPT_SELECTIVE "2026-11-28"
/* the suite's order and shard, and `beside`: what ran beside the run;
 * optional even for --strict: the committed records before them lack
 * them */
#define ADDED_BESIDE "2026-11-27"
/* work: what a run computed, by unit; optional even for --strict, as
 * build.fingerprint: the committed records before it lack it, and
 * impl=pytorch records carry null */
#define ADDED_WORK "2026-11-27"

/* quality.valid_curve: the valid evaluations during training (eval_every);
 * optional even for --strict: the committed records before it lack it */
#define ADDED_CURVE "2026-11-27"
/* work.attn_recompute: method=selective's attention recomputations;
 * optional even for --strict: the committed records before it lack it */
#define ADDED_SELECTIVE "2026-11-27"

/* inference.body_ms and inference.head_ms: the head timed apart from the
 * rest of the forward; optional even for --strict: the committed records
 * before them lack them */
#define ADDED_HEAD "2026-11-27"

/* A row: name, types (enum vtype), then any other member by name. */
#define F(n, t, ...)                                                           \
	{                                                                      \
		.name = n, .types = t, __VA_ARGS__                             \
	}
/* A method field checked like the config key of the same name. */
#define KEYED(n, t) F(n, t, .key = n)
#define NUM_OR_NULL (VT_NUM | VT_NULL)
#define INT_OR_NULL (VT_INT | VT_NULL)
#define STR_OR_NULL (VT_STR | VT_NULL)
#define OBJ_OR_NULL (VT_OBJ | VT_NULL)

static const char *const kinds[] = {"train", "eval", NULL};
static const char *const statuses[] = {"ok", "diverged", "interrupted", "error",
				       NULL};
static const char *const splits[] = {"valid", NULL};
static const char *const cpus_sources[] = {"hwloc", "sysfs", NULL};
/* float32 or float64 (device.elem_bytes) */
static const int elem_bytes[] = {4, 8, 0};

const char *const validate_config_added[] = {
    "impl",
    "init",
    "init_std",
    "embed_std",
    "head_chunk",
    "slots",
    "solver_batching",
    "f_stop_scope",
    "b_stop_scope",
    "protect_thres",
    "stall_window",
    "sync_every",
    "jac_loss_weight",
    "jac_loss_freq",
    "jac_fd_eta",
    "phantom_steps",
    "phantom_tau",
    "spectral_radius_iters",
    "pretrain_steps",
    "pretrain_layers",
    "eval_warmup",
    "params",
    "save_params",
    NULL,
};

const char *const validate_config_defaulted[] = {
    "precision",   "compile",	 "device_mem_cap_mib", "managed_prefetch",
    "cuda_graphs", "eval_every", "microbatches",       "curve_tokens",
    "selective",   NULL,
};

/* {median, mean, p10, p90, min, max, p25, p75}: SCHEMA.md's `stats` */
static const struct vfield stats_f[] = {
    F("median", NUM_OR_NULL),
    F("mean", NUM_OR_NULL),
    F("p10", NUM_OR_NULL),
    F("p90", NUM_OR_NULL),
    F("min", NUM_OR_NULL),
    F("max", NUM_OR_NULL),
    F("p25", NUM_OR_NULL, .added = ADDED_HEALTH),
    F("p75", NUM_OR_NULL, .added = ADDED_HEALTH),
    {.name = NULL},
};
#define STATS(n)                                                               \
	F(n, VT_OBJ, .members = stats_f, .doc_type = "stats", .flags = VF_PROSE)

static const char *const orders[] = {"round-robin", "random", "axes", NULL};

static const struct vfield suite_f[] = {
    F("name", VT_STR),
    F("index", VT_INT),
    F("combo", VT_INT),
    F("repeat", VT_INT),
    F("order", VT_STR, .values = orders, .added = ADDED_BESIDE,
      .flags = VF_OPTIONAL),
    F("order_seed", INT_OR_NULL, .added = ADDED_BESIDE, .flags = VF_OPTIONAL),
    F("shard", VT_STR, .added = ADDED_BESIDE, .flags = VF_OPTIONAL),
    {.name = NULL},
};

static const struct vfield beside_f[] = {
    F("runs", INT_OR_NULL),   F("at_start", INT_OR_NULL),
    F("at_end", INT_OR_NULL), F("lanes", INT_OR_NULL, .flags = VF_FROM_1),
    {.name = NULL},
};

static const struct vfield method_f[] = {
    KEYED("method", VT_STR),
    F("label", VT_STR, .added = ADDED_LABEL, .flags = VF_OPTIONAL),
    KEYED("layers", VT_INT),
    KEYED("k", VT_INT),
    F("selective", VT_BOOL, .key = "selective", .added = ADDED_CKPT_SELECTIVE,
      .flags = VF_OPTIONAL),
    F("slots", VT_INT, .key = "slots", .added = ADDED),
    KEYED("f_solver", VT_STR),
    KEYED("b_solver", VT_STR),
    KEYED("f_tol", VT_NUM),
    KEYED("b_tol", VT_NUM),
    KEYED("f_max_iter", VT_INT),
    KEYED("b_max_iter", VT_INT),
    KEYED("f_history", VT_INT),
    KEYED("b_history", VT_INT),
    KEYED("f_stop_mode", VT_STR),
    KEYED("b_stop_mode", VT_STR),
    KEYED("b_mode", VT_STR),
    KEYED("anderson_m", VT_INT),
    KEYED("anderson_lambda", VT_NUM),
    KEYED("anderson_beta", VT_NUM),
    F("solver_batching", VT_STR, .key = "solver_batching", .added = ADDED),
    F("f_stop_scope", VT_STR, .key = "f_stop_scope", .added = ADDED),
    F("b_stop_scope", VT_STR, .key = "b_stop_scope", .added = ADDED),
    F("protect_thres", VT_NUM, .key = "protect_thres", .added = ADDED),
    F("stall_window", VT_INT, .key = "stall_window", .added = ADDED),
    F("sync_every", VT_INT, .key = "sync_every", .added = ADDED),
    F("jac_loss_weight", VT_NUM, .key = "jac_loss_weight", .added = ADDED),
    F("jac_loss_freq", VT_NUM, .key = "jac_loss_freq", .added = ADDED),
    F("jac_fd_eta", VT_NUM, .key = "jac_fd_eta", .added = ADDED),
    F("phantom_steps", VT_INT, .key = "phantom_steps", .added = ADDED),
    F("phantom_tau", VT_NUM, .key = "phantom_tau", .added = ADDED),
    F("spectral_radius_iters", VT_INT, .key = "spectral_radius_iters",
      .added = ADDED),
    F("managed_prefetch", VT_BOOL, .key = "managed_prefetch",
      .added = ADDED_MANAGED, .flags = VF_OPTIONAL),
    {.name = NULL},
};

/* model.params[i]: {name, shape}, shape 1 to 3 ints */
static const struct vfield int_elem = F("", VT_INT);
static const struct vfield param_f[] = {
    F("name", VT_STR),
    F("shape", VT_ARR, .elem = &int_elem, .min_items = 1, .max_items = 3),
    {.name = NULL},
};
static const struct vfield param_elem = F("", VT_OBJ, .members = param_f);

static const struct vfield model_f[] = {
    F("kind", VT_STR, .key = "model"),
    F("vocab_size", VT_INT),
    F("n_params", VT_INT),
    F("block_flops", VT_NUM),
    F("params", VT_ARR, .elem = &param_elem, .flags = VF_PROSE),
    {.name = NULL},
};

static const struct vfield data_f[] = {
    F("corpus", VT_STR, .key = "corpus"),
    F("source_dir", STR_OR_NULL),
    F("from_cache", VT_BOOL),
    F("vocab_size", VT_INT),
    F("train_tokens", VT_INT),
    F("valid_tokens", VT_INT),
    F("test_tokens", VT_INT),
    F("train_batches_per_epoch", VT_INT),
    F("epochs", VT_NUM),
    {.name = NULL},
};

static const struct vfield timing_f[] = {
    F("steps_timed", VT_INT),
    STATS("step_ms"),
    STATS("forward_ms"),
    STATS("backward_ms"),
    F("tokens_per_s", NUM_OR_NULL),
    F("step_gflop", NUM_OR_NULL, .added = ADDED),
    F("gflops", NUM_OR_NULL, .added = ADDED),
    F("setup_s", VT_NUM),
    F("train_s", VT_NUM),
    F("eval_s", VT_NUM),
    {.name = NULL},
};

/* the memory categories (kernels/backend.h) */
static const struct vfield cats_f[] = {
    F("params", VT_INT),
    F("grads", VT_INT),
    F("optimizer", VT_INT),
    F("head", VT_INT),
    F("depth", VT_INT),
    F("solver", VT_INT),
    F("workspace", INT_OR_NULL),
    F("host", VT_INT, .added = ADDED),
    F("managed", VT_INT, .added = ADDED_MANAGED, .flags = VF_OPTIONAL),
    {.name = NULL},
};

static const struct vfield pool_f[] = {
    F("used_high_bytes", VT_INT),
    F("reserved_high_bytes", VT_INT),
    F("device_free_bytes", VT_INT),
    F("device_total_bytes", VT_INT),
    {.name = NULL},
};

/* memory.offload (method=offload) */
static const struct vfield offload_f[] = {
    F("bytes_per_step", VT_NUM),
    STATS("copy_ms"),
    STATS("stall_ms"),
    F("overlap", NUM_OR_NULL, .flags = VF_SIGNED),
    {.name = NULL},
};

static const struct vfield memory_f[] = {
    F("peak_bytes", VT_OBJ, .members = cats_f),
    F("peak_depth_solver_bytes", VT_INT),
    F("peak_total_bytes", VT_INT),
    F("setup_live_bytes", VT_OBJ, .members = cats_f),
    F("setup_live_total_bytes", VT_INT),
    F("predicted_depth_bytes", INT_OR_NULL),
    F("predicted_solver_bytes", INT_OR_NULL),
    F("predicted_host_bytes", INT_OR_NULL, .added = ADDED),
    F("predicted_managed_bytes", INT_OR_NULL, .added = ADDED_MANAGED,
      .flags = VF_OPTIONAL),
    F("offload", OBJ_OR_NULL, .members = offload_f, .added = ADDED),
    F("max_rss_bytes", VT_INT),
    F("pool", OBJ_OR_NULL, .members = pool_f),
    {.name = NULL},
};

/* solver.forward, solver.backward, inference.forward_solve */
static const struct vfield solve_f[] = {
    F("steps", VT_INT),
    F("iters_mean", NUM_OR_NULL),
    F("iters_max", NUM_OR_NULL),
    F("residual_mean", NUM_OR_NULL),
    F("residual_max", NUM_OR_NULL),
    F("converged_fraction", NUM_OR_NULL, .flags = VF_FRACTION),
    F("nonfinite_steps", VT_INT, .added = ADDED),
    F("protect_break_steps", VT_INT, .added = ADDED),
    F("stall_break_steps", VT_INT, .added = ADDED),
    {.name = NULL},
};

static const struct vfield solver_f[] = {
    F("forward", OBJ_OR_NULL, .members = solve_f),
    F("backward", OBJ_OR_NULL, .members = solve_f),
    F("host_reads_per_step", NUM_OR_NULL),
    F("jac_loss_mean", NUM_OR_NULL, .added = ADDED),
    F("jac_loss_steps", VT_INT, .added = ADDED),
    {.name = NULL},
};

static const struct vfield evals_f[] = {
    F("steps", VT_INT),
    F("forward_evals_per_step", NUM_OR_NULL),
    F("forward_evals_total", VT_INT),
    F("vjp_evals_per_step", NUM_OR_NULL),
    F("vjp_evals_total", VT_INT),
    {.name = NULL},
};

/* one unit of `work`: SCHEMA.md's `work_unit` */
static const struct vfield work_unit_f[] = {
    F("total", VT_INT),
    F("per_step", NUM_OR_NULL),
    F("per_step_timed", NUM_OR_NULL, .flags = VF_OPTIONAL),
    F("per_step_first", NUM_OR_NULL),
    F("per_step_last", NUM_OR_NULL),
    {.name = NULL},
};
#define UNIT(n)                                                                \
	F(n, VT_OBJ, .members = work_unit_f, .doc_type = "work_unit",          \
	  .flags = VF_PROSE)

static const struct vfield work_f[] = {
    F("steps", VT_INT),
    F("edge_steps", VT_INT),
    UNIT("block_fwd_taped"),
    UNIT("block_fwd"),
    UNIT("block_fwd_recompute"),
    UNIT("block_vjp"),
    UNIT("block_vjp_input"),
    UNIT("solver_update"),
    UNIT("solver_history_sum"),
    UNIT("head_fwd"),
    UNIT("head_bwd"),
    UNIT("optimizer_step"),
    UNIT("host_bytes"),
    F("attn_recompute", VT_OBJ, .members = work_unit_f, .doc_type = "work_unit",
      .added = ADDED_SELECTIVE, .flags = VF_PROSE | VF_OPTIONAL),
    {.name = NULL},
};

/* an entry of quality.valid_curve.points */
static const struct vfield curve_point_f[] = {
    F("step", VT_INT, .flags = VF_FROM_1),
    F("valid_loss", NUM_OR_NULL, .flags = VF_SIGNED),
    F("valid_ppl", NUM_OR_NULL),
    F("train_s", VT_NUM),
    F("tokens", VT_INT),
    {.name = NULL},
};
static const struct vfield curve_point_elem =
    F("", VT_OBJ, .members = curve_point_f);

static const struct vfield valid_curve_f[] = {
    F("every", VT_INT, .flags = VF_FROM_1),
    F("eval_s", VT_NUM),
    F("points", VT_ARR, .elem = &curve_point_elem, .flags = VF_PROSE),
    {.name = NULL},
};

static const struct vfield quality_f[] = {
    F("train_loss_first", NUM_OR_NULL, .flags = VF_SIGNED),
    F("train_loss_final", NUM_OR_NULL, .flags = VF_SIGNED),
    F("tokens_trained", VT_INT),
    F("valid_loss", NUM_OR_NULL, .flags = VF_SIGNED),
    F("valid_ppl", NUM_OR_NULL),
    F("valid_eval_tokens", VT_INT),
    F("test_loss", NUM_OR_NULL, .flags = VF_SIGNED),
    F("test_ppl", NUM_OR_NULL),
    F("test_eval_tokens", VT_INT),
    F("valid_spectral_radius", NUM_OR_NULL, .added = ADDED),
    F("valid_curve", OBJ_OR_NULL, .members = valid_curve_f,
      .added = ADDED_CURVE, .flags = VF_OPTIONAL),
    {.name = NULL},
};

static const struct vfield inference_memory_f[] = {
    F("peak_bytes", VT_OBJ, .members = cats_f, .flags = VF_PROSE),
    F("peak_depth_solver_bytes", VT_INT),
    F("peak_total_bytes", VT_INT),
    {.name = NULL},
};

static const struct vfield inference_f[] = {
    F("split", VT_STR, .values = splits),
    F("batches", VT_INT),
    F("batches_timed", VT_INT),
    STATS("step_ms"),
    F("body_ms", VT_OBJ, .members = stats_f, .doc_type = "stats",
      .added = ADDED_HEAD, .flags = VF_PROSE | VF_OPTIONAL),
    F("head_ms", VT_OBJ, .members = stats_f, .doc_type = "stats",
      .added = ADDED_HEAD, .flags = VF_PROSE | VF_OPTIONAL),
    F("tokens_per_s", NUM_OR_NULL),
    F("forward_evals_per_batch", NUM_OR_NULL),
    F("host_reads_per_batch", NUM_OR_NULL),
    F("forward_solve", OBJ_OR_NULL, .members = solve_f, .flags = VF_PROSE),
    F("memory", OBJ_OR_NULL, .members = inference_memory_f),
    F("eval_s", VT_NUM),
    {.name = NULL},
};

/* host.caches.<level>: {size_bytes, count}, present where the machine has
 * that level */
static const struct vfield cache_f[] = {
    F("size_bytes", VT_INT),
    F("count", VT_INT),
    {.name = NULL},
};
static const struct vfield caches_f[] = {
    F("l1d_bytes", VT_OBJ, .members = cache_f, .flags = VF_OPTIONAL),
    F("l1i_bytes", VT_OBJ, .members = cache_f, .flags = VF_OPTIONAL),
    F("l2_bytes", VT_OBJ, .members = cache_f, .flags = VF_OPTIONAL),
    F("l3_bytes", VT_OBJ, .members = cache_f, .flags = VF_OPTIONAL),
    {.name = NULL},
};

static const struct vfield os_f[] = {
    F("sysname", VT_STR), F("release", VT_STR), F("version", VT_STR),
    F("machine", VT_STR), {.name = NULL},
};

/* host.blas (kernels/blas_info.h) */
static const struct vfield blas_f[] = {
    F("library", VT_STR),	  F("core", STR_OR_NULL),
    F("threads", VT_INT),	  F("coretype_env", STR_OR_NULL),
    F("cpu_allows", STR_OR_NULL), F("generic", VT_BOOL),
    F("warning", STR_OR_NULL),	  {.name = NULL},
};

static const struct vfield host_f[] = {
    F("cpu_model", STR_OR_NULL),
    F("packages", INT_OR_NULL),
    F("cores", INT_OR_NULL),
    F("pus", INT_OR_NULL),
    F("numa_nodes", INT_OR_NULL),
    F("memory_bytes", INT_OR_NULL),
    F("caches", VT_OBJ, .members = caches_f, .flags = VF_PROSE),
    F("online_cpus", VT_INT),
    F("os", VT_OBJ, .members = os_f),
    F("hostname", VT_STR),
    F("hwloc_api_version", VT_INT),
    F("blas", VT_OBJ, .members = blas_f, .added = ADDED_BLAS,
      .flags = VF_OPTIONAL),
    {.name = NULL},
};

static const struct vfield device_f[] = {
    F("device", VT_STR, .key = "device"),
    F("backend", VT_STR),
    F("name", VT_STR),
    F("elem_bytes", VT_INT, .ints = elem_bytes),
    F("total_mem_bytes", VT_INT),
    F("compute_capability", STR_OR_NULL),
    F("sm_count", VT_INT),
    F("driver_version", VT_INT),
    F("runtime_version", VT_INT),
    F("tf32", VT_BOOL | VT_NULL),
    F("pci_bus_id", STR_OR_NULL),
    F("local_cpus", STR_OR_NULL),
    F("local_cpus_source", STR_OR_NULL, .values = cpus_sources),
    F("local_cpus_note", STR_OR_NULL),
    {.name = NULL},
};

static const struct vfield build_f[] = {
    F("version", VT_STR),
    F("git_commit", VT_STR, .flags = VF_COMMIT),
    F("compiler", VT_STR),
    F("buildtype", VT_STR),
    F("flags", VT_STR),
    F("blas", VT_STR),
    F("sanitize", VT_STR),
    F("cuda_build", VT_BOOL),
    F("omp_wait_policy", STR_OR_NULL, .added = ADDED),
    F("fingerprint", VT_STR, .added = ADDED_FINGERPRINT,
      .flags = VF_OPTIONAL | VF_FINGERPRINT),
    {.name = NULL},
};

static const struct vfield pretrain_f[] = {
    F("steps", VT_INT),
    F("layers", VT_INT),
    F("steps_done", VT_INT),
    F("steps_timed", VT_INT),
    STATS("step_ms"),
    STATS("forward_ms"),
    STATS("backward_ms"),
    F("tokens_per_s", NUM_OR_NULL),
    F("forward_evals_per_step", NUM_OR_NULL),
    F("vjp_evals_per_step", NUM_OR_NULL),
    F("train_loss_last", NUM_OR_NULL, .flags = VF_SIGNED),
    F("depth_bytes", VT_INT),
    F("work", VT_OBJ, .members = work_f, .added = ADDED_WORK,
      .flags = VF_OPTIONAL | VF_PROSE),
    {.name = NULL},
};

/* trace arrays: one entry per step, a number or null (non-finite), or a
 * boolean for the converged flags */
static const struct vfield num_elem = F("", NUM_OR_NULL);
static const struct vfield loss_elem = F("", NUM_OR_NULL, .flags = VF_SIGNED);
static const struct vfield bool_elem = F("", VT_BOOL);
#define NUMS(n) F(n, VT_ARR, .elem = &num_elem, .flags = VF_PROSE)
static const struct vfield trace_f[] = {
    F("loss", VT_ARR, .elem = &loss_elem, .flags = VF_PROSE),
    NUMS("step_ms"),
    NUMS("forward_ms"),
    NUMS("backward_ms"),
    NUMS("grad_norm"),
    NUMS("lr"),
    NUMS("fwd_iters"),
    NUMS("fwd_residual"),
    NUMS("bwd_iters"),
    NUMS("bwd_residual"),
    F("fwd_converged", VT_ARR, .elem = &bool_elem, .added = ADDED,
      .flags = VF_PROSE),
    F("bwd_converged", VT_ARR, .elem = &bool_elem, .added = ADDED,
      .flags = VF_PROSE),
    NUMS("host_reads"),
    F("jac_loss", VT_ARR, .elem = &num_elem, .added = ADDED, .flags = VF_PROSE),
    NUMS("last_fwd_residual_trace"),
    NUMS("last_bwd_residual_trace"),
    {.name = NULL},
};

/* health: did the run train (bench/records/health.h) */
static const char *const verdicts[] = {"healthy", "unstable", "diverged", NULL};
static const char *const health_flags[] = {
    "norm growth",     "norm peak",	    "clip-bound",
    "loss regression", "solver non-finite", NULL};
static const struct vfield health_flag_elem =
    F("", VT_STR, .values = health_flags);
static const struct vfield health_f[] = {
    F("verdict", VT_STR, .values = verdicts),
    F("unconverged", VT_BOOL | VT_NULL),
    F("steps", VT_INT),
    F("grad_norm_median", NUM_OR_NULL),
    F("grad_norm_max", NUM_OR_NULL),
    F("spike_steps", VT_INT),
    F("loss_final", NUM_OR_NULL),
    F("loss_min", NUM_OR_NULL),
    F("fwd_converged", NUM_OR_NULL, .flags = VF_FRACTION),
    F("fwd_converged_last", NUM_OR_NULL, .flags = VF_FRACTION),
    F("bwd_converged", NUM_OR_NULL, .added = ADDED_TRENDS,
      .flags = VF_FRACTION | VF_OPTIONAL),
    F("bwd_converged_last", NUM_OR_NULL, .added = ADDED_TRENDS,
      .flags = VF_FRACTION | VF_OPTIONAL),
    F("norm_growth", NUM_OR_NULL, .added = ADDED_TRENDS, .flags = VF_OPTIONAL),
    F("norm_peak", NUM_OR_NULL, .added = ADDED_TRENDS, .flags = VF_OPTIONAL),
    F("clip_share_early", NUM_OR_NULL, .added = ADDED_TRENDS,
      .flags = VF_FRACTION | VF_OPTIONAL),
    F("clip_share_last", NUM_OR_NULL, .added = ADDED_TRENDS,
      .flags = VF_FRACTION | VF_OPTIONAL),
    F("nonfinite_solves", VT_INT, .added = ADDED_TRENDS, .flags = VF_OPTIONAL),
    F("flags", VT_ARR, .elem = &health_flag_elem, .added = ADDED_TRENDS,
      .flags = VF_OPTIONAL),
    {.name = NULL},
};

/* plan (deqbench plan --run) */
static const struct vfield plan_f[] = {
    F("budget_mib", VT_NUM),
    F("rank", VT_INT, .flags = VF_FROM_1),
    F("candidate", VT_STR),
    F("predicted_peak_total_bytes", VT_INT),
    F("predicted_host_bytes", VT_INT),
    F("predicted_step_ms", VT_NUM),
    F("predicted_forward_evals", VT_NUM),
    F("predicted_vjp_evals", VT_NUM),
    {.name = NULL},
};

/* compile (impl=pytorch, compile=true) */
static const char *const compile_modes[] = {"max-autotune", "reduce-overhead",
					    "max-autotune-no-cudagraphs",
					    "default", NULL};
static const char *const compile_scopes[] = {"step", "block", NULL};
static const struct vfield str_elem = F("", VT_STR);
static const struct vfield compile_f[] = {
    F("mode", VT_STR, .values = compile_modes),
    F("scope", VT_STR, .values = compile_scopes),
    F("compile_s", NUM_OR_NULL),
    F("graphs", INT_OR_NULL),
    F("graph_breaks", INT_OR_NULL),
    F("recompiles", INT_OR_NULL),
    F("cudagraph_skips", INT_OR_NULL),
    F("break_reasons", VT_ARR, .elem = &str_elem),
    {.name = NULL},
};

static const struct vfield top_f[] = {
    F("schema", VT_INT, .flags = VF_VERSION),
    F("kind", VT_STR, .values = kinds, .added = ADDED),
    F("impl", VT_STR, .added = ADDED, .flags = VF_IMPL),
    F("status", VT_STR, .values = statuses),
    F("message", VT_STR),
    F("started_at", STR_OR_NULL, .flags = VF_TIME),
    F("finished_at", STR_OR_NULL, .flags = VF_TIME),
    F("suite", OBJ_OR_NULL, .members = suite_f),
    F("beside", OBJ_OR_NULL, .members = beside_f, .added = ADDED_BESIDE,
      .flags = VF_OPTIONAL),
    F("config", VT_OBJ, .flags = VF_CONFIG),
    F("method", OBJ_OR_NULL, .members = method_f),
    F("model", OBJ_OR_NULL, .members = model_f),
    F("data", OBJ_OR_NULL, .members = data_f),
    F("timing", OBJ_OR_NULL, .members = timing_f),
    F("memory", OBJ_OR_NULL, .members = memory_f),
    F("solver", OBJ_OR_NULL, .members = solver_f),
    F("evals", OBJ_OR_NULL, .members = evals_f),
    F("work", OBJ_OR_NULL, .members = work_f, .added = ADDED_WORK,
      .flags = VF_OPTIONAL),
    F("health", OBJ_OR_NULL, .members = health_f, .added = ADDED_HEALTH),
    F("quality", OBJ_OR_NULL, .members = quality_f),
    F("inference", OBJ_OR_NULL, .members = inference_f, .added = ADDED),
    F("host", OBJ_OR_NULL, .members = host_f),
    F("device", OBJ_OR_NULL, .members = device_f),
    F("build", OBJ_OR_NULL, .members = build_f),
    F("trace", OBJ_OR_NULL, .members = trace_f),
    F("pretrain", OBJ_OR_NULL, .members = pretrain_f, .added = ADDED),
    F("plan", OBJ_OR_NULL, .members = plan_f, .added = ADDED),
    F("compile", OBJ_OR_NULL, .members = compile_f, .added = ADDED_COMPILE,
      .flags = VF_OPTIONAL),
    {.name = NULL},
};

const struct vfield *validate_schema(void)
{
	return top_f;
}

/* ---- price records (kind "price", `deqbench price`; SCHEMA.md §Price
 * records) ---- */

static const char *const price_kinds[] = {"price", NULL};
const char *const validate_price_units[] = {"block_fwd_taped",
					    "block_fwd",
					    "block_vjp",
					    "block_vjp_input",
					    "solver_update",
					    "head_fwd",
					    "head_bwd",
					    "head_train",
					    "optimizer_step",
					    "step_fixed",
					    "host_bytes",
					    "attn_recompute",
					    NULL};
static const char *const price_solvers[] = {"broyden", "anderson", NULL};
static const char *const price_pers[] = {"call", "byte", NULL};
static const char *const price_intervals[] = {"order-statistic", NULL};

static const struct vfield price_fit_f[] = {
    F("a_ms", VT_NUM, .flags = VF_SIGNED),
    F("b_ms", VT_NUM, .flags = VF_SIGNED),
    {.name = NULL},
};

static const struct vfield price_shape_f[] = {
    F("model", VT_STR, .key = "model"),
    F("d_model", VT_INT),
    F("n_heads", VT_INT),
    F("d_ff", VT_INT),
    F("seq_len", VT_INT),
    F("batch_size", VT_INT),
    F("vocab_size", VT_INT),
    F("n_params", VT_INT),
    F("state_elems", VT_INT),
    F("samples", VT_INT),
    F("parts", VT_INT),
    F("precision", VT_STR, .key = "precision"),
    {.name = NULL},
};

static const struct vfield price_measure_f[] = {
    F("cap_s", VT_NUM),
    F("rel", VT_NUM, .flags = VF_FRACTION),
    F("warmup_rounds", VT_INT),
    F("min_rounds", VT_INT),
    F("interval", VT_STR, .values = price_intervals),
    F("seed", VT_INT),
    F("units", VT_INT),
    F("core", INT_OR_NULL),
    {.name = NULL},
};

static const struct vfield price_top_f[] = {
    F("schema", VT_INT, .flags = VF_VERSION),
    F("kind", VT_STR, .values = price_kinds),
    F("impl", VT_STR, .flags = VF_IMPL),
    F("started_at", VT_STR, .flags = VF_TIME),
    F("finished_at", VT_STR, .flags = VF_TIME),
    F("unit", VT_STR, .values = validate_price_units),
    F("h", INT_OR_NULL, .flags = VF_FROM_1),
    F("solver", STR_OR_NULL, .values = price_solvers),
    F("per", VT_STR, .values = price_pers),
    F("call_bytes", INT_OR_NULL),
    F("timed", VT_BOOL),
    F("median_ms", VT_NUM),
    F("lo_ms", NUM_OR_NULL),
    F("hi_ms", NUM_OR_NULL),
    F("rounds", VT_INT),
    F("converged", VT_BOOL),
    F("fit", OBJ_OR_NULL, .members = price_fit_f),
    F("source", STR_OR_NULL),
    F("config", VT_OBJ, .flags = VF_CONFIG),
    F("shape", VT_OBJ, .members = price_shape_f),
    F("measure", VT_OBJ, .members = price_measure_f),
    F("host", VT_OBJ, .members = host_f),
    F("device", VT_OBJ, .members = device_f),
    F("build", VT_OBJ, .members = build_f),
    {.name = NULL},
};

const struct vfield *validate_price_schema(void)
{
	return price_top_f;
}
