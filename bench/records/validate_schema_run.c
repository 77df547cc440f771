/* validate_schema_run.c — the schema table's sections `work` to
 * `compile` (validate_schema.c has the top level and the rest).
 */
#include "validate_schema_rows.h"

static const char *const splits[] = {"valid", NULL};

/* one unit of `work`: SCHEMA.md's `work_unit` */
static const struct vfield work_unit_f[] = {
    F("total", VT_INT),
    F("per_step", NUM_OR_NULL),
    F("per_step_timed", NUM_OR_NULL, .flags = VF_OPTIONAL),
    F("per_step_first", NUM_OR_NULL),
    F("per_step_last", NUM_OR_NULL),
    {.name = NULL},
};
#define UNIT(n, ...)                                                           \
	F(n, VT_OBJ, .members = work_unit_f, .doc_type = "work_unit",          \
	  .flags = VF_PROSE, __VA_ARGS__)

const struct vfield vrows_work[] = {
    F("steps", VT_INT,
      .doc = "steps (eval: valid batches) counted: `evals.steps` "
	     "(`inference.batches`)"),
    F("edge_steps", VT_INT,
      .doc = "steps in each of the first and last means: `steps / 10` rounded "
	     "down, at least 1 (0 when `steps` is 0)"),
    UNIT("block_fwd_taped",
	 .doc = "block forwards that write a tape in the forward pass: "
		"unroll's, offload's, managed's and selective's L, "
		"checkpoint's last segment, revolve's last layer, a DEQ's "
		"application at z* (phantom: its k steps) and the Jacobian "
		"regulariser's two forwards"),
    UNIT("block_fwd",
	 .doc =
	     "block forwards without a tape: forward solver iterations, the "
	     "untaped passes of checkpoint and revolve (revolve's untaped "
	     "advances in the backward too), every forward of an evaluation"),
    UNIT("block_fwd_recompute",
	 .doc = "block forwards that write a tape in the backward pass, "
		"recomputing what the forward ran untaped: checkpoint's "
		"segments but the last, revolve's layers but the last; priced "
		"as `block_fwd_taped`"),
    UNIT("block_vjp",
	 .doc = "block VJPs with the parameter and injection gradients"),
    UNIT("block_vjp_input",
	 .doc = "block VJPs of the input alone: the IFT backward solve's "
		"iterations, the Jacobian regulariser's w = εᵀJ"),
    UNIT("solver_update",
	 .doc = "the solvers' own iterations between evaluations: Broyden's "
		"steps Δx = −B g (each with its rank-1 update but the solve's "
		"last), Anderson's mixings; evaluations − 1 per solve, 0 for "
		"`fixed_point`"),
    UNIT("solver_history_sum",
	 .doc = "the history in use summed over those iterations (pairs or "
		"iterates, per sample): their cost is linear in it"),
    UNIT("head_fwd", .doc = "LM head forwards with the loss: 1 per step or "
			    "batch (M with `microbatches` = M)"),
    UNIT("head_bwd", .doc = "LM head backwards: 1 per training step (M with "
			    "`microbatches` = M), 0 in evaluation"),
    UNIT("optimizer_step",
	 .doc = "optimizer steps (gradient norm, clipping, Adam over every "
		"parameter): 1 per training step, 0 in evaluation"),
    UNIT("host_bytes", .doc = "bytes copied between device and host memory by "
			      "the method: offload's tapes, managed's "
			      "prefetches (as `memory.offload.bytes_per_step`, "
			      "which covers the timed steps only)"),
    F("attn_recompute", VT_OBJ, .members = work_unit_f, .doc_type = "work_unit",
      .added = ADDED_SELECTIVE, .flags = VF_PROSE | VF_OPTIONAL,
      .doc = "attention forwards (q kᵀ, causal softmax, att v: 4·B·T²·d FLOPs) "
	     "recomputed inside block VJPs from a selective tape: "
	     "method=selective's L; 0 for every other method; priced as "
	     "`attn_recompute` (absent from records before it). Added "
	     "2026-11-27: optional even for `--strict`"),
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
    F("every", VT_INT, .flags = VF_FROM_1, .doc = "`eval_every`"),
    F("eval_s", VT_NUM,
      .doc = "wall seconds of these evaluations, left out of `timing.train_s` "
	     "and of every point's `train_s`"),
    F("points", VT_ARR, .elem = &curve_point_elem, .flags = VF_PROSE,
      .doc = "one object per evaluation, after steps `every`, 2·`every`, …, up "
	     "to `steps` (a run that stopped early: those of the steps done): "
	     "`step` (int), `valid_loss` and `valid_ppl` (number \\| null, as "
	     "`valid_loss` and `valid_ppl`), `train_s` (number: the training "
	     "loop's wall seconds up to the end of that step, warmup steps "
	     "included, the evaluations before it left out; the clock of "
	     "`timing.train_s`), `tokens` (int: as `valid_eval_tokens`). With "
	     "`steps` a multiple of `every` and `curve_tokens` 0 (or equal to "
	     "`eval_tokens`), the last point's loss equals `valid_loss` (the "
	     "same parameters, batches and forward)"),
    {.name = NULL},
};

const struct vfield vrows_quality[] = {
    F("train_loss_first", NUM_OR_NULL, .flags = VF_SIGNED,
      .doc = "loss of step 1"),
    F("train_loss_final", NUM_OR_NULL, .flags = VF_SIGNED,
      .doc = "mean training loss of the last 10 steps (fewer when the run is "
	     "shorter)"),
    F("tokens_trained", VT_INT,
      .doc = "`batch_size * seq_len *` completed steps"),
    F("valid_loss", NUM_OR_NULL, .flags = VF_SIGNED,
      .doc = "mean per-token loss over the first `valid_eval_tokens` tokens of "
	     "the valid split, read in batches like the training data, method "
	     "forward with `train=0`; `ppl = exp(loss)`. `null` when "
	     "`eval_tokens=0`, when the run did not finish, or when the split "
	     "is too short for one batch (fewer than `batch_size * (seq_len + "
	     "1)` tokens)"),
    F("valid_ppl", NUM_OR_NULL),
    F("valid_eval_tokens", VT_INT,
      .doc = "tokens the mean is over: `eval_tokens` rounded down to whole "
	     "batches of `batch_size * seq_len`, at most the split"),
    F("test_loss", NUM_OR_NULL, .flags = VF_SIGNED,
      .doc = "same for the test split"),
    F("test_ppl", NUM_OR_NULL),
    F("test_eval_tokens", VT_INT, .doc = "same for the test split"),
    F("valid_spectral_radius", NUM_OR_NULL, .added = ADDED,
      .doc = "estimate of the spectral radius ρ(J_f(z*)) of the block's "
	     "Jacobian at the fixed point of the first valid batch (the whole "
	     "batch: the largest of its samples'), by `spectral_radius_iters` "
	     "power iterations on VJPs (`method_spectral_radius`, "
	     "methods/method.h), as the DEQ code measures at validation; null "
	     "unless `method=deq` with `spectral_radius_iters` > 0 and a valid "
	     "evaluation ran. Added 2026-11-23"),
    F("valid_curve", OBJ_OR_NULL, .members = valid_curve_f,
      .added = ADDED_CURVE, .flags = VF_OPTIONAL,
      .doc = "the valid split evaluated during training, every `eval_every` "
	     "steps (config key; null when it is 0 and in eval records; absent "
	     "from impl=pytorch records, which refuse `eval_every` > 0, and "
	     "from records before it): the same mean loss as `valid_loss` over "
	     "the first `curve_tokens` tokens of the split (config key, added "
	     "2026-11-27; 0, the default, and records without it: the same "
	     "`eval_tokens` as `valid_loss`), the method forward with "
	     "`train=0` as it is at that step (the unrolled net during a deq "
	     "run's `pretrain_steps`), untimed. It changes no training number: "
	     "the losses of `trace.loss` are those of the same run without it. "
	     "Added 2026-11-27: optional even for `--strict`"),
    {.name = NULL},
};

static const struct vfield inference_memory_f[] = {
    F("peak_bytes", VT_OBJ, .members = vrows_cats, .flags = VF_PROSE,
      .doc = "peak bytes per category, as `memory.peak_bytes`"),
    F("peak_depth_solver_bytes", VT_INT, .doc = "peak of depth + solver"),
    F("peak_total_bytes", VT_INT,
      .doc = "peak of every category together (the model's gradient buffer "
	     "included: the model allocates it whatever the method)"),
    {.name = NULL},
};

const struct vfield vrows_inference[] = {
    F("split", VT_STR, .values = splits, .doc = "`valid`"),
    F("batches", VT_INT,
      .doc = "valid batches evaluated (an interrupted evaluation's: those "
	     "done; at least 1)"),
    F("batches_timed", VT_INT, .doc = "`batches` − `eval_warmup` (at least 0)"),
    STATS("step_ms", .doc = "time per batch, ms"),
    F("body_ms", VT_OBJ, .members = vrows_stats, .doc_type = "stats",
      .added = ADDED_HEAD, .flags = VF_PROSE | VF_OPTIONAL,
      .doc =
	  "the part of `step_ms` up to the method's output z, ms: batch "
	  "upload, injection and the method's forward (the blocks, and a DEQ's "
	  "solver); the same timer, marked between it and the head. Added "
	  "2026-11-27: optional even for `--strict` (earlier records lack it)"),
    F("head_ms", VT_OBJ, .members = vrows_stats, .doc_type = "stats",
      .added = ADDED_HEAD, .flags = VF_PROSE | VF_OPTIONAL,
      .doc = "the head's part of `step_ms`, ms: its logits and the loss over "
	     "the batch (per batch `step_ms` = `body_ms` + `head_ms`; the "
	     "statistics, medians included, need not add up). A cost both "
	     "methods pay once per batch, which a DEQ-against-unroll ratio of "
	     "`step_ms` dilutes. Added 2026-11-27: optional even for "
	     "`--strict` (earlier records lack it)"),
    F("tokens_per_s", NUM_OR_NULL,
      .doc = "`batch_size * seq_len` × timed batches / their time"),
    F("forward_evals_per_batch", NUM_OR_NULL,
      .doc = "`model_block_forward` calls per batch (L for unroll, checkpoint "
	     "and revolve; the solver's iterations + 1 for deq)"),
    F("host_reads_per_batch", NUM_OR_NULL,
      .doc = "values the method read back to the host per batch (as "
	     "`solver.host_reads_per_step`)"),
    F("forward_solve", OBJ_OR_NULL, .members = vrows_solve, .flags = VF_PROSE,
      .doc = "the fields of `solver.forward` over the batches (`steps` = "
	     "batches); null for methods without a solve"),
    F("memory", OBJ_OR_NULL, .members = inference_memory_f,
      .doc = "kind `eval` only (null in training records, whose method holds "
	     "its training buffers): the allocator over the valid evaluation "
	     "of a method created for inference (no tapes, checkpoints or "
	     "backward solver; methods/method.h `inference`)"),
    F("eval_s", VT_NUM,
      .doc = "wall seconds of the whole evaluation (valid and test)"),
    {.name = NULL},
};

const struct vfield vrows_pretrain[] = {
    F("steps", VT_INT, .doc = "`pretrain_steps`, `pretrain_layers`"),
    F("layers", VT_INT),
    F("steps_done", VT_INT,
      .doc = "pretraining steps completed (P unless the run stopped earlier)"),
    F("steps_timed", VT_INT,
      .doc = "steps in the statistics: `steps_done - warmup_steps` when "
	     "positive, else 0"),
    STATS("step_ms", .doc = "as in `timing`, over the timed pretraining steps"),
    STATS("forward_ms"),
    STATS("backward_ms"),
    F("tokens_per_s", NUM_OR_NULL, .doc = "as in `timing`"),
    F("forward_evals_per_step", NUM_OR_NULL,
      .doc = "block applications and VJPs per pretraining step "
	     "(`pretrain_layers` each)"),
    F("vjp_evals_per_step", NUM_OR_NULL),
    F("train_loss_last", NUM_OR_NULL, .flags = VF_SIGNED,
      .doc = "loss of the last pretraining step"),
    F("depth_bytes", VT_INT,
      .doc = "bytes the unroll method allocated (`depth`): `method_memory`'s "
	     "unroll formula at `layers=pretrain_layers`, included in the "
	     "`memory` peaks"),
    F("work", VT_OBJ, .members = vrows_work, .added = ADDED_WORK,
      .flags = VF_OPTIONAL | VF_PROSE,
      .doc = "the fields of `work` over the pretraining steps done (`steps` = "
	     "`steps_done`, warmup included). Added 2026-11-27: optional even "
	     "for `--strict`"),
    {.name = NULL},
};

/* trace arrays: one entry per step, a number or null (non-finite), or a
 * boolean for the converged flags */
static const struct vfield num_elem = F("", NUM_OR_NULL);
static const struct vfield loss_elem = F("", NUM_OR_NULL, .flags = VF_SIGNED);
static const struct vfield bool_elem = F("", VT_BOOL);
#define NUMS(n, ...)                                                           \
	F(n, VT_ARR, .elem = &num_elem, .flags = VF_PROSE, __VA_ARGS__)
const struct vfield vrows_trace[] = {
    F("loss", VT_ARR, .elem = &loss_elem, .flags = VF_PROSE,
      .doc = "training loss per step, the diverged step's included"),
    NUMS("step_ms", .doc = "step time and its split, per completed step"),
    NUMS("forward_ms"),
    NUMS("backward_ms"),
    NUMS("grad_norm",
	 .doc = "global gradient norm before clipping, per completed step (so "
		"one entry fewer than `loss` in a diverged run: that step's "
		"norm was never computed, or was not finite)"),
    NUMS("lr", .doc = "learning rate used"),
    NUMS("fwd_iters",
	 .doc = "solver iterations and final residual per step (0 for methods "
		"without a solve; for the pretraining steps of a deq run "
		"iterations 0 and residuals null)"),
    NUMS("fwd_residual"),
    NUMS("bwd_iters"),
    NUMS("bwd_residual"),
    F("fwd_converged", VT_ARR, .elem = &bool_elem, .added = ADDED,
      .flags = VF_PROSE,
      .doc = "booleans: the step's solve reached its tolerance (what "
	     "`solver.forward.converged_fraction` and "
	     "`solver.backward.converged_fraction` count; false for methods "
	     "without a solve). Added 2026-11-23: earlier traces lack them, "
	     "and readers (plots/plot.py) take `residual <= f_tol` (`b_tol`) "
	     "instead, the solvers' definition of converged when those records "
	     "were written"),
    F("bwd_converged", VT_ARR, .elem = &bool_elem, .added = ADDED,
      .flags = VF_PROSE),
    NUMS("host_reads", .doc = "host reads of the method per step (see "
			      "`solver.host_reads_per_step`)"),
    F("jac_loss", VT_ARR, .elem = &num_elem, .added = ADDED, .flags = VF_PROSE,
      .doc = "R of each step that applied the Jacobian regulariser, null for "
	     "the others (see `solver.jac_loss_mean`). Added 2026-11-23"),
    NUMS("last_fwd_residual_trace",
	 .doc = "residual after each solver iteration of the last training "
		"step (at most 256 entries; empty without a solve)"),
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
const struct vfield vrows_health[] = {
    F("verdict", VT_STR, .values = verdicts,
      .doc = "`healthy`, `unstable` or `diverged` (above)"),
    F("unconverged", VT_BOOL | VT_NULL,
      .doc = "a DEQ run whose forward solves reached their tolerance in less "
	     "than 90% of the deq phase's steps, overall or in its last 10%: "
	     "its numbers measure a truncated solver, not the DEQ; null for "
	     "methods without a forward solve"),
    F("steps", VT_INT, .doc = "training steps assessed"),
    F("grad_norm_median", NUM_OR_NULL,
      .doc = "the global gradient norm before clipping over those steps, the "
	     "diverged step's left out: it stopped before computing one "
	     "(records written before 2026-11-27 took it as 0)"),
    F("grad_norm_max", NUM_OR_NULL),
    F("spike_steps", VT_INT, .doc = "steps that were spikes (above)"),
    F("loss_final", NUM_OR_NULL,
      .doc = "mean training loss of the last w = clamp(steps/10, 1, 50) steps, "
	     "nats"),
    F("loss_min", NUM_OR_NULL,
      .doc = "the lowest mean training loss of w consecutive steps, nats"),
    F("fwd_converged", NUM_OR_NULL, .flags = VF_FRACTION,
      .doc = "fraction of the deq phase's steps whose forward solve converged, "
	     "as `solver.forward.converged_fraction` counts them (reached its "
	     "tolerance: a solve that a stall or protective break or a "
	     "non-finite residual ended did not); null without a forward "
	     "solve. Records written before 2026-11-27 counted those solves as "
	     "converged too, so their figure can exceed `converged_fraction`"),
    F("fwd_converged_last", NUM_OR_NULL, .flags = VF_FRACTION,
      .doc = "the same over the last 10% of those steps (at least one)"),
    F("bwd_converged", NUM_OR_NULL, .added = ADDED_TRENDS,
      .flags = VF_FRACTION | VF_OPTIONAL,
      .doc =
	  "the same for the backward solves (a DEQ with an IFT backward); "
	  "`unconverged` is true when either direction is below 90%. Added "
	  "2026-11-27, as the fields below (optional even under `--strict`)"),
    F("bwd_converged_last", NUM_OR_NULL, .added = ADDED_TRENDS,
      .flags = VF_FRACTION | VF_OPTIONAL),
    F("norm_growth", NUM_OR_NULL, .added = ADDED_TRENDS, .flags = VF_OPTIONAL,
      .doc = "runs of at least 100 steps: the median gradient norm of the last "
	     "10% of the steps over that of the second 10%; above 5 is the "
	     "flag `norm growth`. Added 2026-11-27"),
    F("norm_peak", NUM_OR_NULL, .added = ADDED_TRENDS, .flags = VF_OPTIONAL,
      .doc = "runs of at least 100 steps: the largest norm after the first 10% "
	     "of the steps over their median; above 1000 is the flag `norm "
	     "peak`. Added 2026-11-27"),
    F("clip_share_early", NUM_OR_NULL, .added = ADDED_TRENDS,
      .flags = VF_FRACTION | VF_OPTIONAL,
      .doc =
	  "runs of at least 100 steps with `clip` > 0: the share of the second "
	  "and of the last 10% of the steps whose norm exceeded `clip`; a last "
	  "share above 0.5 and at least 0.5 above the early one is the flag "
	  "`clip-bound` (a run that became clip-bound, not one whose norm sat "
	  "above the clip from the start). Added 2026-11-27"),
    F("clip_share_last", NUM_OR_NULL, .added = ADDED_TRENDS,
      .flags = VF_FRACTION | VF_OPTIONAL),
    F("nonfinite_solves", VT_INT, .added = ADDED_TRENDS, .flags = VF_OPTIONAL,
      .doc =
	  "forward and backward solves a non-finite residual ended; more than "
	  "1% of the solves is the flag `solver non-finite`. Added 2026-11-27"),
    F("flags", VT_ARR, .elem = &health_flag_elem, .added = ADDED_TRENDS,
      .flags = VF_OPTIONAL,
      .doc =
	  "strings, the rules that fired: `norm growth`, `norm peak`, "
	  "`clip-bound`, `loss regression` (runs of at least 100 steps: "
	  "`loss_final` more than 0.2 nats above `loss_min`, the 1-nat margin "
	  "being for short runs), each of which makes the verdict `unstable`, "
	  "and `solver non-finite`, a label only (bench/records/health.h has "
	  "the measurements behind each threshold). Added 2026-11-27"),
    {.name = NULL},
};

/* plan (deqbench plan --run) */
const struct vfield vrows_plan[] = {
    F("budget_mib", VT_NUM, .doc = "the budget, MiB of device memory"),
    F("rank", VT_INT, .flags = VF_FROM_1,
      .doc = "1 = the fastest predicted candidate that fits"),
    F("candidate", VT_STR,
      .doc = "e.g. `checkpoint k=3`, `deq broyden h=8`, `unroll mb2` "
	     "(`microbatches=2`; the config says the rest)"),
    F("predicted_peak_total_bytes", VT_INT,
      .doc =
	  "`memfit_estimate`'s device total: the layouts the allocator uses"),
    F("predicted_host_bytes", VT_INT,
      .doc = "offloaded tapes' host bytes (0 for other methods)"),
    F("predicted_step_ms", VT_NUM,
      .doc = "the cost model's step time, Σ work × price + the fixed per-step "
	     "cost (bench/cmd/plan_cost.h; a mean step, beside "
	     "`timing.step_ms.mean`); before 2026-11-27 from short calibration "
	     "runs"),
    F("predicted_forward_evals", VT_NUM,
      .doc = "per step: closed forms, or a deq candidate's from the longest "
	     "committed run of its configuration (its caps without one); "
	     "before 2026-11-27 a deq candidate's calibration run"),
    F("predicted_vjp_evals", VT_NUM),
    {.name = NULL},
};

/* compile (impl=pytorch, compile=true) */
static const char *const compile_modes[] = {"max-autotune", "reduce-overhead",
					    "max-autotune-no-cudagraphs",
					    "default", NULL};
static const char *const compile_scopes[] = {"step", "block", NULL};
static const struct vfield str_elem = F("", VT_STR);
const struct vfield vrows_compile[] = {
    F("mode", VT_STR, .values = compile_modes,
      .doc = "torch.compile's mode: `max-autotune` (unroll's default; CUDA "
	     "graphs on CUDA), `reduce-overhead` or "
	     "`max-autotune-no-cudagraphs` (unroll with "
	     "`DEQTORCH_COMPILE_MODE`), `default` (the other methods' block)"),
    F("scope", VT_STR, .values = compile_scopes,
      .doc = "`step` (unroll: the whole step's loss) or `block` (the other "
	     "methods)"),
    F("compile_s", NUM_OR_NULL,
      .doc = "wall seconds of the untimed warmup steps (synchronised), which "
	     "hold the compilation, autotuning and CUDA-graph recording"),
    F("graphs", INT_OR_NULL,
      .doc = "torch._dynamo's counters after training: `stats.unique_graphs`, "
	     "the sum of `graph_break`, the sum of `recompiles`; null where "
	     "torch has no torch._dynamo"),
    F("graph_breaks", INT_OR_NULL),
    F("recompiles", INT_OR_NULL),
    F("cudagraph_skips", INT_OR_NULL,
      .doc = "torch._dynamo's `inductor.cudagraph_skips`: compiled graphs that "
	     "ran without CUDA graphs (torch's warnings on stderr say why); 0 "
	     "when CUDA graphs ran or the mode has none; null where torch has "
	     "no torch._dynamo"),
    F("break_reasons", VT_ARR, .elem = &str_elem,
      .doc = "the first three graph-break reasons (strings, first line of "
	     "each); empty without breaks"),
    {.name = NULL},
};
