/* validate_schema_price.c — the schema table's `host`, `device` and
 * `build` sections, which run and price records share, and the price
 * records' own fields (kind "price", `deqbench price`; SCHEMA.md §Price
 * records).
 */
#include "validate_schema_rows.h"

static const char *const cpus_sources[] = {"hwloc", "sysfs", NULL};
/* float32 or float64 (device.elem_bytes) */
static const int elem_bytes[] = {4, 8, 0};

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
    F("sysname", VT_STR, .doc = ""),
    F("release", VT_STR),
    F("version", VT_STR),
    F("machine", VT_STR),
    {.name = NULL},
};

/* host.blas (kernels/blas_info.h) */
static const struct vfield blas_f[] = {
    F("library", VT_STR, .doc = "`OpenBLAS 0.3.21` (`openblas_get_config`)"),
    F("core", STR_OR_NULL,
      .doc = "the kernels OpenBLAS picked (`openblas_get_corename`: `Haswell`, "
	     "`SkylakeX`, `Prescott`, ...); a run with another core is another "
	     "machine (`report` and `compare` keep them apart)"),
    F("threads", VT_INT,
      .doc = "`openblas_get_num_threads()` with the run's `threads=` applied"),
    F("coretype_env", STR_OR_NULL, .doc = "`OPENBLAS_CORETYPE` when set"),
    F("cpu_allows", STR_OR_NULL,
      .doc = "the fastest OpenBLAS x86-64 core family the CPU's flags allow: "
	     "`SkylakeX` (AVX-512 F, BW, VL, DQ, CD), `Haswell` (AVX2 and "
	     "FMA), `Sandybridge` (AVX); null for none"),
    F("generic", VT_BOOL,
      .doc = "OpenBLAS runs a generic SSE core (`Prescott`, `Core2`, "
	     "`Nehalem`, ...) although the CPU allows `cpu_allows`: its "
	     "fallback for a CPU model it does not know, several times slower; "
	     "set `OPENBLAS_CORETYPE=<cpu_allows>`"),
    F("warning", STR_OR_NULL,
      .doc = "the warning `deqbench env` and the run printed when `generic`; "
	     "null otherwise"),
    {.name = NULL},
};

const struct vfield vrows_host[] = {
    F("cpu_model", STR_OR_NULL, .doc = "CPU brand string of the first package"),
    F("packages", INT_OR_NULL,
      .doc = "sockets, physical cores, hardware threads, NUMA nodes"),
    F("cores", INT_OR_NULL),
    F("pus", INT_OR_NULL),
    F("numa_nodes", INT_OR_NULL),
    F("memory_bytes", INT_OR_NULL, .doc = "installed memory hwloc sees"),
    F("caches", VT_OBJ, .members = caches_f, .flags = VF_PROSE,
      .doc = "`l1d_bytes`, `l1i_bytes`, `l2_bytes`, `l3_bytes` where the "
	     "machine has them, each `{size_bytes, count}`: size of one "
	     "instance and number of instances"),
    F("online_cpus", VT_INT, .doc = "`sysconf(_SC_NPROCESSORS_ONLN)`"),
    F("os", VT_OBJ, .members = os_f, .doc = "from uname"),
    F("hostname", VT_STR, .doc = ""),
    F("hwloc_api_version", VT_INT,
      .doc = "`HWLOC_API_VERSION` the binary was built against"),
    F("blas", VT_OBJ, .members = blas_f, .added = ADDED_BLAS,
      .flags = VF_OPTIONAL,
      .doc = "the CPU BLAS this process ran, read when the record was written "
	     "(impl=pytorch: deqbench's, not torch's). Added 2026-11-27: "
	     "earlier records lack it (optional even under `--strict`)"),
    {.name = NULL},
};

const struct vfield vrows_device[] = {
    F("device", VT_STR, .key = "device", .doc = "the `device=` key"),
    F("backend", VT_STR, .doc = "backend name"),
    F("name", VT_STR,
      .doc = "e.g. `cpu float32 (OpenBLAS 0.3.21)` or the GPU's name"),
    F("elem_bytes", VT_INT, .ints = elem_bytes, .doc = "4 float32, 8 float64"),
    F("total_mem_bytes", VT_INT, .doc = "device memory; host RAM on the CPU"),
    F("compute_capability", STR_OR_NULL, .doc = "`\"9.0\"`; null on the CPU"),
    F("sm_count", VT_INT,
      .doc = "CUDA multiprocessors, driver and runtime versions "
	     "(`cudaDriverGetVersion` style, 12040 = 12.4); 0 on the CPU"),
    F("driver_version", VT_INT),
    F("runtime_version", VT_INT),
    F("tf32", VT_BOOL | VT_NULL,
      .doc = "TF32 GEMMs allowed (`tf32=` key); null on backends without the "
	     "switch (cpu, cpu64: always full precision)"),
    F("pci_bus_id", STR_OR_NULL,
      .doc = "the GPU's PCI address (`0000:3b:00.0`); null on the CPU"),
    F("local_cpus", STR_OR_NULL,
      .doc = "CPUs close to the GPU as a cpulist (`0-15,32-47`): hwloc's PCI "
	     "discovery (cpuset of the device's first non-I/O ancestor), else "
	     "Linux sysfs `local_cpulist`; null when neither knows, or on the "
	     "CPU"),
    F("local_cpus_source", STR_OR_NULL, .values = cpus_sources,
      .doc = "`hwloc` or `sysfs`; null with `local_cpus`"),
    F("local_cpus_note", STR_OR_NULL,
      .doc = "why `local_cpus` is null (`not a PCI device`, hwloc built "
	     "without its PCI component and no sysfs, ...); null otherwise"),
    {.name = NULL},
};

const struct vfield vrows_build[] = {
    F("version", VT_STR, .doc = "project version"),
    F("git_commit", VT_STR, .flags = VF_COMMIT,
      .doc = "12 hex digits of the commit the binary was built from (read at "
	     "build time; more, up to 40, where 12 are ambiguous), `-dirty` "
	     "appended when tracked files had uncommitted changes, or "
	     "`unknown`; records written before 2026-11-23 carry the commit of "
	     "the build directory's configure time instead"),
    F("compiler", VT_STR, .doc = "e.g. `gcc 12.2.0`"),
    F("buildtype", VT_STR, .doc = "meson build type"),
    F("flags", VT_STR,
      .doc = "optimisation, C standard, warning level, extra c_args"),
    F("blas", VT_STR, .doc = "e.g. `OpenBLAS 0.3.21`"),
    F("sanitize", VT_STR, .doc = "`none` or the sanitizers"),
    F("cuda_build", VT_BOOL, .doc = "the CUDA backend was compiled in"),
    F("omp_wait_policy", STR_OR_NULL, .added = ADDED,
      .doc = "`OMP_WAIT_POLICY` of the run: `passive` unless the user set it "
	     "(deqbench sets it and re-executes itself; null only if that "
	     "failed). Added 2026-11-23: earlier records lack it"),
    F("fingerprint", VT_STR, .added = ADDED_FINGERPRINT,
      .flags = VF_OPTIONAL | VF_FINGERPRINT,
      .doc =
	  "16 lower-case hex digits: the start of a SHA-256 over the sources "
	  "of `kernels/`, `models/` and `methods/` (every `.c`, `.h`, `.cu`, "
	  "`.cuh` and `meson.build` file there, by path and contents, wherever "
	  "the checkout lives) and the build options that change arithmetic "
	  "(compiler and version, buildtype, optimization, b_sanitize, c_args, "
	  "the BLAS, CUDA on or off and, with CUDA, gpu_arch, nvcc's version "
	  "and its flags); `scripts/fingerprint.py` computes it at every "
	  "build. Two records with the same fingerprint ran the same "
	  "arithmetic whatever their `git_commit` (a change to bench/, docs/ "
	  "or tests/ leaves it). Added 2026-11-27: earlier records lack it "
	  "(optional even under `--strict`)"),
    {.name = NULL},
};

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
    F("a_ms", VT_NUM, .flags = VF_SIGNED,
      .doc = "intercept and slope, milliseconds (the slope may be negative "
	     "only by noise)"),
    F("b_ms", VT_NUM, .flags = VF_SIGNED),
    {.name = NULL},
};

static const struct vfield price_shape_f[] = {
    F("model", VT_STR, .key = "model", .doc = "the model kind (`model`)"),
    F("d_model", VT_INT,
      .doc = "as the config's; `vocab_size` the head's width (the run record's "
	     "`model.vocab_size`, or the corpus's)"),
    F("n_heads", VT_INT),
    F("d_ff", VT_INT),
    F("seq_len", VT_INT),
    F("batch_size", VT_INT),
    F("vocab_size", VT_INT),
    F("n_params", VT_INT,
      .doc = "parameter elements (the optimizer step's length), state elements "
	     "B·T·d"),
    F("state_elems", VT_INT),
    F("samples", VT_INT,
      .doc = "the solver's samples S and segments P (`solver_batching`)"),
    F("parts", VT_INT),
    F("precision", VT_STR, .key = "precision",
      .doc = "the precision (`precision`)"),
    F("solver_kernels", VT_STR, .key = "solver_kernels", .flags = VF_OPTIONAL,
      .doc = "how `solver_update` ran (`solver_kernels`: `ops` or "
	     "`fused`); absent in records made before 2026-11-28, which are "
	     "`ops`"),
    {.name = NULL},
};

static const struct vfield price_measure_f[] = {
    F("cap_s", VT_NUM,
      .doc = "`price_cap_s` (seconds for the configuration's measurement), the "
	     "interval's relative half-width (0.02)"),
    F("rel", VT_NUM, .flags = VF_FRACTION),
    F("warmup_rounds", VT_INT,
      .doc = "untimed rounds first; rounds before a unit can be converged"),
    F("min_rounds", VT_INT),
    F("interval", VT_STR, .values = price_intervals,
      .doc = "`order-statistic` (as `lo_ms` says)"),
    F("seed", VT_INT,
      .doc = "seed of the round-robin order (the config's `seed`)"),
    F("units", VT_INT, .doc = "units interleaved in each round"),
    F("core", INT_OR_NULL,
      .doc =
	  "the CPU the process was pinned to (`core=`), null when not pinned"),
    {.name = NULL},
};

static const struct vfield price_top_f[] = {
    F("schema", VT_INT, .flags = VF_VERSION, .doc = "`1`"),
    F("kind", VT_STR, .values = price_kinds, .doc = "`price`"),
    F("impl", VT_STR, .flags = VF_IMPL, .doc = "`deqbench`"),
    F("started_at", VT_STR, .flags = VF_TIME,
      .doc = "UTC, ISO 8601: when this configuration's measurement started and "
	     "its records were made"),
    F("finished_at", VT_STR, .flags = VF_TIME),
    F("unit", VT_STR, .values = validate_price_units,
      .doc = "`block_fwd_taped`, `block_fwd`, `block_vjp`, `block_vjp_input`, "
	     "`solver_update`, `head_fwd`, `head_bwd`, `head_train`, "
	     "`optimizer_step`, `step_fixed`, `host_bytes` or `attn_recompute` "
	     "(what each times: docs/commands.md §price; `block_fwd_recompute` "
	     "is priced as `block_fwd_taped`; `head_train` is a training "
	     "step's head forward and backward together, `step_fixed` the rest "
	     "of a training step)"),
    F("h", INT_OR_NULL, .flags = VF_FROM_1,
      .doc = "`solver_update`: the history length (Broyden pairs or Anderson "
	     "iterates in use) it was timed at; one record per length and "
	     "solver (1, 2, 4, … and h_max: Broyden's h_max the config's "
	     "`f_history`, or `f_max_iter` when that is 0; Anderson's "
	     "`anderson_m`); null for the other units"),
    F("solver", STR_OR_NULL, .values = price_solvers,
      .doc = "`solver_update`: `broyden` or `anderson`, whose update was "
	     "timed; null for the other units"),
    F("per", VT_STR, .values = price_pers,
      .doc = "`call` (one application of the unit) or `byte` (`host_bytes`: "
	     "the price of one byte moved)"),
    F("call_bytes", INT_OR_NULL,
      .doc = "`host_bytes` when timed: bytes one timed call moved (a tape down "
	     "and up); null otherwise"),
    F("timed", VT_BOOL,
      .doc = "true; false only for `host_bytes` off `device=cuda` in records "
	     "made before 2026-11-27's evening (then price 0; since then the "
	     "CPU's copies, offload's memcpy, are timed too)"),
    F("median_ms", VT_NUM,
      .doc = "the price: median milliseconds per call (per byte with `per` "
	     "`byte`) over the timed rounds; 0 when not timed"),
    F("lo_ms", NUM_OR_NULL,
      .doc = "the median's 95% interval: order statistics x_(l) and x_(n+1−l) "
	     "of the n samples, l the largest with P(Bin(n, ½) ≤ l−1) ≤ 2.5% "
	     "(distribution-free, coverage ≥ 95%); null below 6 samples or "
	     "when not timed"),
    F("hi_ms", NUM_OR_NULL),
    F("rounds", VT_INT,
      .doc = "timed rounds: samples of this unit (every unit is sampled once "
	     "per round)"),
    F("converged", VT_BOOL,
      .doc = "the interval lies within ±`measure.rel` of the median after at "
	     "least `measure.min_rounds` rounds; false when the time cap ended "
	     "the measurement first"),
    F("fit", OBJ_OR_NULL, .members = price_fit_f,
      .doc = "`solver_update` only: the least-squares line through its "
	     "solver's records' medians, price = `a_ms` + `b_ms` × h; the same "
	     "in each of them"),
    F("source", STR_OR_NULL,
      .doc =
	  "`FILE:LINE` of the run record whose configuration was priced "
	  "(`deqbench price RECORDS.jsonl`); null for a config given by keys"),
    F("config", VT_OBJ, .flags = VF_CONFIG,
      .doc = "the resolved config priced: `threads`, `device`, `precision` and "
	     "the model and method keys say which shapes"),
    F("shape", VT_OBJ, .members = price_shape_f,
      .doc = "the shapes the units ran at"),
    F("measure", VT_OBJ, .members = price_measure_f,
      .doc = "how it was measured"),
    F("host", VT_OBJ, .members = vrows_host, .doc = "as a run record's"),
    F("device", VT_OBJ, .members = vrows_device,
      .doc = "as a run record's; `device.device` is the config's"),
    F("build", VT_OBJ, .members = vrows_build,
      .doc = "as a run record's (`build.fingerprint`: the arithmetic the "
	     "prices hold for)"),
    {.name = NULL},
};

const struct vfield *validate_price_schema(void)
{
	return price_top_f;
}
