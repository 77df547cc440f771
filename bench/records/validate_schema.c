/* validate_schema.c — results/SCHEMA.md as a table: one row per documented
 * field, section by section in the document's order (validate_schema.h
 * describes the columns), with the field's meaning, from which `deqbench
 * validate --schema-markdown` prints SCHEMA.md's field tables
 * (validate_schema_md.c). This file has the top level and the sections up
 * to `evals`; validate_schema_run.c and validate_schema_price.c the rest.
 * A field that the code starts to write is added here and in SCHEMA.md in
 * the same commit: `deqbench validate` calls an unlisted field a problem,
 * and tests/test_schema.c compares this table with the document's
 * tables.
 */
#include "validate_schema_rows.h"

static const char *const kinds[] = {"train", "eval", NULL};
static const char *const statuses[] = {"ok", "diverged", "interrupted", "error",
				       NULL};
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
    "selective",   "attention",	 "solver_kernels",     "epilogue",
    NULL,
};

/* {median, mean, p10, p90, min, max, p25, p75}: SCHEMA.md's `stats` */
const struct vfield vrows_stats[] = {
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

static const char *const orders[] = {"round-robin", "random", "axes", NULL};

static const struct vfield suite_f[] = {
    F("name", VT_STR, .doc = "the suite's `name`"),
    F("index", VT_INT,
      .doc = "the run's position in the order the suite runs its runs "
	     "(`order`), the number `--dry-run` prints; before 2026-11-27 "
	     "suites ran in the axes' order, so it was the position in that"),
    F("combo", VT_INT, .doc = "axis combination; equal across repeats"),
    F("repeat", VT_INT, .doc = "0-based repeat"),
    F("order", VT_STR, .values = orders, .added = ADDED_BESIDE,
      .flags = VF_OPTIONAL,
      .doc =
	  "the order the suite ran in: `round-robin` (the default: the first "
	  "seed and repeat of every configuration, then the second, ...), "
	  "`random` (a permutation fixed by `order_seed`) or `axes` (the axes' "
	  "product, the first axis slowest); docs/configuration.md §Suites. "
	  "Added 2026-11-27: optional even for `--strict`; earlier suites ran "
	  "in the axes' order. Absent from `plan --run`'s records"),
    F("order_seed", INT_OR_NULL, .added = ADDED_BESIDE, .flags = VF_OPTIONAL,
      .doc = "the seed of a `random` order; null otherwise. Added 2026-11-27, "
	     "as `order`"),
    F("shard", VT_STR, .added = ADDED_BESIDE, .flags = VF_OPTIONAL,
      .doc = "`I/N` of `--shard I/N` (`0/1` without): which shard of the suite "
	     "this process ran. Shards may run on several machines, so a shard "
	     "is not a neighbour: `beside` says what ran on this host. Added "
	     "2026-11-27, as `order`"),
    {.name = NULL},
};

static const struct vfield beside_f[] = {
    F("runs", INT_OR_NULL,
      .doc = "other deqbench runs of this user that ran on this host at some "
	     "time during this run; null when the registry could not be made "
	     "or written"),
    F("at_start", INT_OR_NULL,
      .doc = "of them, those running when this run started"),
    F("at_end", INT_OR_NULL,
      .doc = "of them, those running when this run ended"),
    F("lanes", INT_OR_NULL, .flags = VF_FROM_1,
      .doc = "`deqbench suite --lanes N`: the suite ran as one of N lanes side "
	     "by side on this host (scripts/reproduce.sh's two CPU lanes say "
	     "2); null without it"),
    {.name = NULL},
};

static const struct vfield method_f[] = {
    KEYED("method", VT_STR,
	  .doc = "the `method` key: `unroll`, `checkpoint`, `deq`, `revolve`, "
		 "`offload`, `managed`, `selective`"),
    F("label", VT_STR, .added = ADDED_LABEL, .flags = VF_OPTIONAL,
      .doc =
	  "the method in a few words, from its registry entry (`method_label`, "
	  "methods/method.h): `unroll L=12`, `checkpoint L=16 k=4`, `revolve "
	  "L=16 slots=4`, `deq broyden/ift` (forward solver / backward mode); "
	  "what `deqbench run`'s summary line, `deqbench report`'s rows and "
	  "plots/ show. Added 2026-11-25: earlier records lack it "
	  "(results/cpu's too, so `validate --strict` does not demand it), and "
	  "readers make it from the other fields"),
    KEYED("layers", VT_INT,
	  .doc = "depth L (unroll, checkpoint, revolve, offload, managed, "
		 "selective) and checkpoint interval"),
    KEYED("k", VT_INT),
    F("selective", VT_BOOL, .key = "selective", .added = ADDED_CKPT_SELECTIVE,
      .flags = VF_OPTIONAL,
      .doc =
	  "method=checkpoint: each segment keeps selective tapes (no attention "
	  "probabilities; each VJP recomputes them, `work.attn_recompute`), as "
	  "method=selective's. Added 2026-11-28: earlier records lack it "
	  "(optional even under `--strict`; absent means false)"),
    F("slots", VT_INT, .key = "slots", .added = ADDED,
      .doc = "revolve's checkpoint slots s (stored states); with "
	     "`method=revolve` resolved, 0 becoming max(1, round(log2 L)). "
	     "Added 2026-11-23 with method `revolve`: earlier records lack it"),
    KEYED("f_solver", VT_STR, .doc = "`broyden`, `anderson`, `fixed_point`"),
    KEYED("b_solver", VT_STR),
    KEYED("f_tol", VT_NUM, .doc = "stop tolerances"),
    KEYED("b_tol", VT_NUM),
    KEYED("f_max_iter", VT_INT, .doc = "iteration caps, Broyden history"),
    KEYED("b_max_iter", VT_INT),
    KEYED("f_history", VT_INT),
    KEYED("b_history", VT_INT),
    KEYED("f_stop_mode", VT_STR, .doc = "`abs` or `rel`"),
    KEYED("b_stop_mode", VT_STR),
    KEYED("b_mode", VT_STR, .doc = "`ift`, `jfb` or `phantom`"),
    KEYED("anderson_m", VT_INT, .doc = "Anderson history"),
    KEYED("anderson_lambda", VT_NUM,
	  .doc = "Anderson regularisation and mixing"),
    KEYED("anderson_beta", VT_NUM),
    F("solver_batching", VT_STR, .key = "solver_batching", .added = ADDED,
      .doc = "`per_sample` (one Broyden/Anderson estimate per sample) or "
	     "`global` (one for the batch). Added 2026-11-23: earlier records "
	     "lack it and used `global`"),
    F("f_stop_scope", VT_STR, .key = "f_stop_scope", .added = ADDED,
      .doc = "`batch` (residual over the batch) or `sample` (every sample's "
	     "own). Added 2026-11-23"),
    F("b_stop_scope", VT_STR, .key = "b_stop_scope", .added = ADDED),
    F("protect_thres", VT_NUM, .key = "protect_thres", .added = ADDED,
      .doc = "the DEQ code's protective break (residual above this multiple of "
	     "the first); 0 = off. Added 2026-11-23"),
    F("stall_window", VT_INT, .key = "stall_window", .added = ADDED,
      .doc = "the DEQ code's no-progress break (last N residuals within a "
	     "factor 1.3); 0 = off. Added 2026-11-23"),
    F("sync_every", VT_INT, .key = "sync_every", .added = ADDED,
      .doc = "solver evaluations between the host's reads of a solve's stop "
	     "decision, made on the device; it changes the time, "
	     "`host_reads_per_step` and the evaluation counts, never the "
	     "solve's result. Added 2026-11-23"),
    F("solver_kernels", VT_STR, .key = "solver_kernels",
      .added = ADDED_FUSED_SOLVER, .flags = VF_OPTIONAL,
      .doc = "how the Broyden and Anderson solves ran: `ops` (backend ops) or "
	     "`fused` "
	     "(kernels/solve_fused.h: two passes an evaluation; with "
	     "`cuda_graphs` one WHILE loop a solve); the same iterations, "
	     "results within rounding. Added 2026-11-28: earlier records "
	     "lack it (optional even under `--strict`; absent means `ops`)"),
    F("jac_loss_weight", VT_NUM, .key = "jac_loss_weight", .added = ADDED,
      .doc =
	  "Jacobian regularisation weight γ, the probability a step applies "
	  "it, and the relative step of its central difference (0 = ∛ε_mach). "
	  "Added 2026-11-23: earlier records lack these six fields"),
    F("jac_loss_freq", VT_NUM, .key = "jac_loss_freq", .added = ADDED),
    F("jac_fd_eta", VT_NUM, .key = "jac_fd_eta", .added = ADDED),
    F("phantom_steps", VT_INT, .key = "phantom_steps", .added = ADDED,
      .doc = "damped steps k of `b_mode=phantom`. Added 2026-11-23: earlier "
	     "records lack it"),
    F("phantom_tau", VT_NUM, .key = "phantom_tau", .added = ADDED,
      .doc = "damping λ of `b_mode=phantom`. Added 2026-11-23: earlier records "
	     "lack it"),
    F("spectral_radius_iters", VT_INT, .key = "spectral_radius_iters",
      .added = ADDED,
      .doc = "power iterations of the spectral radius at evaluation; 0 = off. "
	     "Added 2026-11-23: earlier records lack it"),
    F("managed_prefetch", VT_BOOL, .key = "managed_prefetch",
      .added = ADDED_MANAGED, .flags = VF_OPTIONAL,
      .doc = "method=managed: the backward prefetches tape i−1 to the device "
	     "while VJP i runs (false: pages come back by fault). Added "
	     "2026-11-26: earlier records lack it (optional even under "
	     "`--strict`)"),
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
    F("kind", VT_STR, .key = "model",
      .doc = "`transformer`, `tanh_cell`, `trellisnet`"),
    F("vocab_size", VT_INT, .doc = "V the model was built with"),
    F("n_params", VT_INT, .doc = "parameter elements"),
    F("block_flops", VT_NUM,
      .doc = "forward FLOPs of one block application (multiply-add = 2)"),
    F("params", VT_ARR, .elem = &param_elem, .flags = VF_PROSE,
      .doc = "`[{name, shape}]` in the order of the parameter buffer; `shape` "
	     "has 1 to 3 ints (3 for a Conv1d weight `[out, in, kernel]`)"),
    {.name = NULL},
};

static const struct vfield data_f[] = {
    F("corpus", VT_STR, .key = "corpus",
      .doc = "`brown`, `wikitext103`, `wikitext2`, `ptb`, `text`, `synthetic`"),
    F("source_dir", STR_OR_NULL,
      .doc = "directory the text was read from; null for synthetic"),
    F("from_cache", VT_BOOL,
      .doc = "token ids came from the cache under `source_dir/cache` (see "
	     "bench/data/data.h)"),
    F("vocab_size", VT_INT,
      .doc = "words of the corpus's vocabulary (`<eos>` and `<unk>` included)"),
    F("train_tokens", VT_INT, .doc = "tokens per split"),
    F("valid_tokens", VT_INT),
    F("test_tokens", VT_INT),
    F("train_batches_per_epoch", VT_INT,
      .doc = "training batches before the batcher wraps: `(train_tokens / "
	     "batch_size - 1) / seq_len`"),
    F("epochs", VT_NUM, .doc = "`steps / train_batches_per_epoch`"),
    {.name = NULL},
};

static const struct vfield timing_f[] = {
    F("steps_timed", VT_INT,
      .doc = "steps in the statistics (`steps - warmup_steps`, or `steps - "
	     "pretrain_steps - warmup_steps` with pretraining, for a finished "
	     "run; a diverged or failed step is left out)"),
    STATS("step_ms", .doc = "the step time"),
    STATS("forward_ms",
	  .doc = "forward part: zeroing grads, batch upload, injection, method "
		 "forward, head forward up to the loss (with `microbatches` = "
		 "M > 1: up to the last micro-batch's loss, the first M − 1 "
		 "micro-batches' backwards included)"),
    STATS("backward_ms", .doc = "the rest: head backward, method backward, "
				"injection backward, grad norm and clip, Adam"),
    F("tokens_per_s", NUM_OR_NULL,
      .doc = "`batch_size * seq_len * steps_timed / (sum of timed step_ms / "
	     "1000)`"),
    F("step_gflop", NUM_OR_NULL, .added = ADDED,
      .doc = "FLOPs counted per step, in GFLOP (1e9), 2 per multiply-add: "
	     "`forward_evals_per_step · F + vjp_evals_per_step · 2F + head + "
	     "injection` (below); null where `evals`' per-step figures are "
	     "null. Added 2026-11-23"),
    F("gflops", NUM_OR_NULL, .added = ADDED,
      .doc = "`step_gflop / (step_ms.median / 1000)`: the rate of the counted "
	     "FLOPs, GFLOP/s; null where either is null. Added 2026-11-23"),
    F("setup_s", VT_NUM,
      .doc = "wall time from the start of the run to the first step: corpus "
	     "(tokenising it when there is no cache), backend, model, method, "
	     "optimizer state"),
    F("train_s", VT_NUM,
      .doc = "wall time of the whole training loop, warmup steps and host "
	     "batch fetching included; the evaluations of `eval_every` "
	     "(`quality.valid_curve.eval_s`) left out"),
    F("eval_s", VT_NUM,
      .doc = "wall time of the valid and test evaluation after training"),
    {.name = NULL},
};

/* the memory categories (kernels/backend.h) */
const struct vfield vrows_cats[] = {
    F("params", VT_INT,
      .doc = "the categories: parameters, their gradients, Adam moments, "
	     "embeddings / injection / logits and their gradients, method "
	     "activations (tapes, checkpoints), solver history"),
    F("grads", VT_INT),
    F("optimizer", VT_INT),
    F("head", VT_INT),
    F("depth", VT_INT),
    F("solver", VT_INT),
    F("workspace", INT_OR_NULL,
      .doc = "scratch; null in `impl=pytorch` records (PyTorch's temporaries "
	     "belong to no category: bench/pytorch/README.md)"),
    F("host", VT_INT, .added = ADDED,
      .doc = "host RAM holding offloaded tapes (method=offload; page-locked on "
	     "CUDA; on the CPU the same accounting, as a model); 0 for other "
	     "methods. Added 2026-11-23"),
    F("managed", VT_INT, .added = ADDED_MANAGED, .flags = VF_OPTIONAL,
      .doc = "CUDA unified memory (cudaMallocManaged) holding method=managed's "
	     "tapes; 0 for other methods. Not device memory in the totals: the "
	     "driver moves its pages between device and host. Added "
	     "2026-11-26: earlier records lack it (`validate --strict` does "
	     "not demand it) and readers take it as 0"),
    {.name = NULL},
};

static const struct vfield pool_f[] = {
    F("used_high_bytes", VT_INT,
      .doc = "high-water mark of pool bytes held by live allocations: the "
	     "pool's peak is reset before each timed step, and this is the "
	     "maximum over timed steps"),
    F("reserved_high_bytes", VT_INT,
      .doc = "same for bytes the pool reserved from the driver"),
    F("device_free_bytes", VT_INT,
      .doc = "`cudaMemGetInfo` after the last timed step"),
    F("device_total_bytes", VT_INT),
    {.name = NULL},
};

/* memory.offload (method=offload) */
static const struct vfield offload_f[] = {
    F("bytes_per_step", VT_NUM,
      .doc =
	  "bytes copied between device and host per step: 2·(L−2) tapes "
	  "(method=managed: the bytes prefetched, (L−1) tapes with "
	  "`managed_prefetch=true`, whether or not their pages had to move)"),
    STATS("copy_ms", .doc = "per step, time the copy stream spent copying "
			    "(CUDA: events around each copy; cpu: the memcpy)"),
    STATS("stall_ms", .doc = "per step, time the compute stream stood waiting "
			     "for copies (CUDA: events around each wait; cpu: "
			     "equal to `copy_ms`, the copies run in line)"),
    F("overlap", NUM_OR_NULL, .flags = VF_SIGNED,
      .doc = "1 − Σ stall / Σ copy over the timed steps: the share of copy "
	     "time hidden behind compute (0 on the CPU)"),
    {.name = NULL},
};

static const struct vfield memory_f[] = {
    F("peak_bytes", VT_OBJ, .members = vrows_cats,
      .doc = "per category: peak live bytes during training and evaluation"),
    F("peak_depth_solver_bytes", VT_INT,
      .doc = "high-water mark of depth + solver live bytes together: the "
	     "figure comparable to the paper's (memory without embeddings)"),
    F("peak_total_bytes", VT_INT,
      .doc = "peak of all tracked device bytes: the honest total. `host` and "
	     "`managed` are not device memory and are left out"),
    F("setup_live_bytes", VT_OBJ, .members = vrows_cats,
      .doc = "per category: live bytes at the end of setup"),
    F("setup_live_total_bytes", VT_INT, .doc = "their sum"),
    F("predicted_depth_bytes", INT_OR_NULL,
      .doc = "what `method_memory` (methods/method.h) computes for this method "
	     "and model without allocating; null if it refused"),
    F("predicted_solver_bytes", INT_OR_NULL),
    F("predicted_host_bytes", INT_OR_NULL, .added = ADDED,
      .doc = "what `method_host_memory` computes: the offloaded tapes' host "
	     "bytes (0 for methods that offload nothing). Added 2026-11-23"),
    F("predicted_managed_bytes", INT_OR_NULL, .added = ADDED_MANAGED,
      .flags = VF_OPTIONAL,
      .doc = "what `method_managed_memory` computes: method=managed's "
	     "unified-memory tape bytes (0 for other methods). Added "
	     "2026-11-26 (optional, as `peak_bytes.managed`)"),
    F("offload", OBJ_OR_NULL, .members = offload_f, .added = ADDED,
      .doc = "the copies of method=offload, or the prefetches of "
	     "method=managed, over the timed steps; null when the method moved "
	     "nothing. Added 2026-11-23"),
    F("max_rss_bytes", VT_INT,
      .doc = "process maximum resident set size (`getrusage`, KiB × 1024). "
	     "Suites run every run in its own child process, so this is the "
	     "run's own RSS; for `deqbench run` it is the process's"),
    F("pool", OBJ_OR_NULL, .members = pool_f,
      .doc =
	  "device memory pool, only on backends with the optional `pool_stats` "
	  "op (CUDA's stream-ordered pool); null elsewhere (cpu, cpu64)"),
    {.name = NULL},
};

/* solver.forward, solver.backward, inference.forward_solve */
const struct vfield vrows_solve[] = {
    F("steps", VT_INT, .doc = "steps aggregated"),
    F("iters_mean", NUM_OR_NULL,
      .doc =
	  "solver iterations (f or VJP evaluations the solver made) per step"),
    F("iters_max", NUM_OR_NULL),
    F("residual_mean", NUM_OR_NULL,
      .doc =
	  "final residual per step, in the stop mode's sense (`abs` ‖f(z)−z‖ "
	  "or `rel` ‖f(z)−z‖/‖f(z)‖); non-finite residuals left out"),
    F("residual_max", NUM_OR_NULL),
    F("converged_fraction", NUM_OR_NULL, .flags = VF_FRACTION,
      .doc = "fraction of steps whose solve reached its tolerance"),
    F("nonfinite_steps", VT_INT, .added = ADDED,
      .doc = "steps whose solve a non-finite residual ended (the method went "
	     "on from the lowest-residual finite iterate; the run is not "
	     "`diverged` unless the loss or gradient did). Added 2026-11-23: "
	     "earlier records lack it"),
    F("protect_break_steps", VT_INT, .added = ADDED,
      .doc = "steps whose solve `protect_thres` or `stall_window` stopped. "
	     "Added 2026-11-23"),
    F("stall_break_steps", VT_INT, .added = ADDED),
    {.name = NULL},
};

static const struct vfield solver_f[] = {
    F("forward", OBJ_OR_NULL, .members = vrows_solve,
      .doc =
	  "the forward (fixed point) and backward (implicit-gradient) solves"),
    F("backward", OBJ_OR_NULL, .members = vrows_solve),
    F("host_reads_per_step", NUM_OR_NULL,
      .doc =
	  "mean per training step of the method's reads back to the host (each "
	  "a device synchronisation on a GPU), forward and backward together; "
	  "0 for unroll and checkpoint. Since 2026-11-23 (the solvers decide "
	  "on the device) a solve reads its stop decision every `sync_every` "
	  "evaluations and its statistics once at the end, ⌈k / sync_every⌉ + "
	  "1 reads for k evaluations; earlier records counted two or three "
	  "batches of norms and dots per evaluation. The Jacobian regulariser "
	  "and the spectral radius add their norms. The runner's own reads "
	  "(loss, gradient norm) are not counted"),
    F("jac_loss_mean", NUM_OR_NULL, .added = ADDED,
      .doc =
	  "mean over the steps that applied the Jacobian regulariser "
	  "(`jac_loss_weight` > 0, each step with probability `jac_loss_freq`) "
	  "of R = ‖εᵀ J_f(z*)‖² / n, one Gaussian ε, n = B·T·d state elements "
	  "(torchdeq's `jac_reg`), unweighted (the loss trained on is LM loss "
	  "+ γ R); null when no step applied it. Added 2026-11-23"),
    F("jac_loss_steps", VT_INT, .added = ADDED,
      .doc = "steps that applied it. Added 2026-11-23"),
    {.name = NULL},
};

static const struct vfield evals_f[] = {
    F("steps", VT_INT, .doc = "steps counted"),
    F("forward_evals_per_step", NUM_OR_NULL,
      .doc = "`model_block_forward` calls per step (recomputation in "
	     "checkpoint and revolve, solver iterations in deq included)"),
    F("forward_evals_total", VT_INT, .doc = "their sum over the steps"),
    F("vjp_evals_per_step", NUM_OR_NULL,
      .doc = "`model_block_vjp` calls per step"),
    F("vjp_evals_total", VT_INT, .doc = "their sum"),
    {.name = NULL},
};

static const struct vfield top_f[] = {
    F("schema", VT_INT, .flags = VF_VERSION,
      .doc = "the schema version, `1`: what `deqbench validate` checks the "
	     "record against"),
    F("kind", VT_STR, .values = kinds, .added = ADDED,
      .doc = "`train` (`deqbench run`, a suite's runs) or `eval` (`deqbench "
	     "eval`, a suite with `\"command\": \"eval\"`: no training; "
	     "`timing`, `memory`, `solver`, `evals`, `trace` and `pretrain` "
	     "are null, `quality`'s training fields null or 0, and `inference` "
	     "carries the figures). Added 2026-11-23: earlier records lack it "
	     "and are `train`"),
    F("impl", VT_STR, .added = ADDED, .flags = VF_IMPL,
      .doc = "the implementation that ran: `deqbench` (this C core) or "
	     "`pytorch-<torch version>` (`torch.__version__`, starting with a "
	     "digit: `pytorch-2.3.1+cpu`; bench/pytorch, `impl=pytorch`; "
	     "fields it cannot measure as deqbench does are null, "
	     "bench/pytorch/README.md; `pytorch` in a failed pytorch run's "
	     "record when the torch version is unknown). Added 2026-11-23: "
	     "earlier records lack it and are `deqbench`"),
    F("status", VT_STR, .values = statuses,
      .doc = "`ok`, `diverged` (the training loss exceeded 10 ln V nats or "
	     "became non-finite, or the gradient norm became non-finite; the "
	     "run stopped there. records written before 2026-11-23 used the "
	     "non-finite criteria only), `interrupted` (SIGINT or SIGTERM: the "
	     "run stopped after the step or evaluation batch it was in; "
	     "`timing`, `solver`, `evals`, `work` and `trace` cover the steps "
	     "done, `inference` the valid batches evaluated (null when none "
	     "was), `quality`'s perplexities are null; added 2026-11-23), "
	     "`error` (the run failed; see `message`. An evaluation whose loss "
	     "is not finite, parameters or logits that overflow float32, is an "
	     "error since 2026-11-25; it was `ok` with null perplexities)"),
    F("message", VT_STR,
      .doc = "empty for `ok`; otherwise one line saying what happened and what "
	     "to change"),
    F("started_at", STR_OR_NULL, .flags = VF_TIME,
      .doc = "UTC, ISO 8601 (`2025-01-31T12:00:00Z`); `started_at` is null "
	     "only in the error record of a suite run whose process crashed"),
    F("finished_at", STR_OR_NULL, .flags = VF_TIME),
    F("suite", OBJ_OR_NULL, .members = suite_f,
      .doc = "`null` for `deqbench run`; see below"),
    F("beside", OBJ_OR_NULL, .members = beside_f, .added = ADDED_BESIDE,
      .flags = VF_OPTIONAL,
      .doc =
	  "what of ours ran beside the run on its host: other deqbench runs of "
	  "this user, and the lanes a suite was told of; see below. Written by "
	  "`run`, `eval`, a suite's runs and `plan --run`; null or absent in "
	  "others. Added 2026-11-27: optional even for `--strict`"),
    F("config", VT_OBJ, .flags = VF_CONFIG,
      .doc =
	  "the resolved flat config: every key of `deqbench run --help` "
	  "(docs/configuration.md), typed: ints, numbers, booleans, strings"),
    F("method", OBJ_OR_NULL, .members = method_f,
      .doc = "the method's parameters as the method resolved them; see below"),
    F("model", OBJ_OR_NULL, .members = model_f, .doc = "see below"),
    F("data", OBJ_OR_NULL, .members = data_f, .doc = "see below"),
    F("timing", OBJ_OR_NULL, .members = timing_f, .doc = "see below"),
    F("memory", OBJ_OR_NULL, .members = memory_f, .doc = "see below"),
    F("solver", OBJ_OR_NULL, .members = solver_f, .doc = "see below"),
    F("evals", OBJ_OR_NULL, .members = evals_f, .doc = "see below"),
    F("work", OBJ_OR_NULL, .members = vrows_work, .added = ADDED_WORK,
      .flags = VF_OPTIONAL,
      .doc =
	  "what the run computed, counted by unit: per training step in a "
	  "`train` record (the steps of `evals`), per valid batch in an `eval` "
	  "record (those of `inference`); null where those are (a run that did "
	  "not reach its first step; an eval record without a valid batch) and "
	  "in impl=pytorch records (bench/pytorch/README.md); see below. Added "
	  "2026-11-27: optional even for `--strict` (earlier records lack it)"),
    F("health", OBJ_OR_NULL, .members = vrows_health, .added = ADDED_HEALTH,
      .doc = "did the run train: the gradient norm, spikes, the loss and a "
	     "verdict; see below. Null for eval records and a run whose setup "
	     "failed; an impl=pytorch record's is deqbench's verdict on the "
	     "child's per-step losses and norms (the child always traces a "
	     "training run; `trace` stays null under `trace=false`), null in "
	     "impl=pytorch records made before 2026-11-28 without `trace`. "
	     "Added 2026-11-25"),
    F("quality", OBJ_OR_NULL, .members = vrows_quality, .doc = "see below"),
    F("inference", OBJ_OR_NULL, .members = vrows_inference, .added = ADDED,
      .doc = "the valid evaluation as inference: time per batch, solver "
	     "statistics, and (kind `eval`) memory; null when no valid batch "
	     "was evaluated. Added 2026-11-23"),
    F("host", OBJ_OR_NULL, .members = vrows_host, .doc = "see below"),
    F("device", OBJ_OR_NULL, .members = vrows_device, .doc = "see below"),
    F("build", OBJ_OR_NULL, .members = vrows_build, .doc = "see below"),
    F("trace", OBJ_OR_NULL, .members = vrows_trace,
      .doc = "only with `trace=true`, see below"),
    F("pretrain", OBJ_OR_NULL, .members = vrows_pretrain, .added = ADDED,
      .doc =
	  "the unrolled pretraining steps of a deq run with `pretrain_steps` > "
	  "0; null otherwise. Added 2026-11-23: earlier records lack it"),
    F("plan", OBJ_OR_NULL, .members = vrows_plan, .added = ADDED,
      .doc = "a run `deqbench plan --run N` trained: the budget and what the "
	     "plan predicted for it; null otherwise. Added 2026-11-23"),
    F("compile", OBJ_OR_NULL, .members = vrows_compile, .added = ADDED_COMPILE,
      .flags = VF_OPTIONAL,
      .doc = "impl=pytorch with `compile=true`: what torch.compile made of the "
	     "run; null in other impl=pytorch train records, absent from "
	     "deqbench's. Added 2026-11-27: optional even for `--strict`"),
    {.name = NULL},
};

const struct vfield *validate_schema(void)
{
	return top_f;
}
