"""Config keys deqtorch knows and the values impl=pytorch supports.

Imports neither torch nor numpy: `deqtorch.py check` must be fast.
"""
import glob
import importlib.util
import os
import re

# Every key of `deqbench run --help` (docs/configuration.md);
# tests/peer/test_keys.py checks this list, METHOD_KEYS and common.DEFAULTS
# against `deqbench run --help-json` and a deqbench record.
KNOWN_KEYS = (
    "model d_model n_heads d_ff seq_len batch_size vocab_size seed init "
    "init_std embed_std attention epilogue head_chunk method layers k selective f_solver f_tol "
    "f_max_iter f_stop_mode f_history b_mode b_solver b_tol b_max_iter "
    "b_stop_mode b_history anderson_m anderson_lambda anderson_beta "
    "solver_batching f_stop_scope b_stop_scope protect_thres stall_window "
    "sync_every solver_kernels jac_loss_weight jac_loss_freq jac_fd_eta "
    "phantom_steps phantom_tau spectral_radius_iters slots corpus data_dir steps "
    "microbatches pretrain_steps pretrain_layers warmup_steps lr lr_warmup clip "
    "eval_tokens eval_warmup eval_every curve_tokens params device threads tf32 "
    "precision compile cuda_graphs device_mem_cap_mib managed_prefetch out trace "
    "save_params impl"
).split()

# Keys read by the implementation; all others are accepted only when they
# cannot change what is computed (output paths, data location, ...).
METHOD_KEYS = (
    "method layers k selective f_solver f_tol f_max_iter f_stop_mode f_history b_mode "
    "b_solver b_tol b_max_iter b_stop_mode b_history anderson_m "
    "anderson_lambda anderson_beta solver_batching f_stop_scope "
    "b_stop_scope protect_thres stall_window sync_every solver_kernels "
    "jac_loss_weight jac_loss_freq jac_fd_eta phantom_steps phantom_tau "
    "spectral_radius_iters slots managed_prefetch"
).split()


class Unsupported(Exception):
    """A config value impl=pytorch refuses: str(e) is the one-line message."""


class ParamsError(ValueError):
    """A parameter file that cannot be loaded into the model (init.load):
    str(e) is one line naming the file, what is wrong and the fix."""


# deqbench's advice for a parameter file that does not fit the model
# (bench/run/param_files.c params_load)
FIT = ("the file must hold every parameter of the configured model with "
       "its shape (make it with deqbench params init and the same model "
       "keys)")


def _refuse(key, value, fix):
    if isinstance(value, bool):
        value = "true" if value else "false"
    raise Unsupported(f"deqtorch: {key}={value} is not supported by "
                      f"impl=pytorch; {fix}")


def cuda_torch_present():
    """True when the installed torch has its CUDA library and a GPU device
    node exists (without importing torch)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    libdir = os.path.join(list(spec.submodule_search_locations)[0], "lib")
    has_lib = bool(glob.glob(os.path.join(libdir, "libtorch_cuda*.so*")))
    return has_lib and os.path.exists("/dev/nvidia0")


def torch_version():
    """torch.__version__ of the installed torch, read from its version.py
    without importing torch (`check` stays fast); None when unknown."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0],
                        "version.py")
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"^__version__\s*(?::\s*str\s*)?=\s*['\"]([^'\"]+)['\"]",
                  text, re.M)
    return m.group(1) if m else None


def torch_major(version):
    """The major number of a torch version string (None if unreadable)."""
    m = re.match(r"\d+", version or "")
    return int(m.group()) if m else None


PRECISIONS = ("fp32", "tf32", "bf16")


def normalise(cfg):
    """deqbench's resolution of precision and its alias tf32
    (bench/config/config.c), in place: afterwards tf32 == (precision ==
    "tf32"). tf32=true with precision=fp32 becomes precision=tf32,
    precision=tf32 sets tf32=true; tf32=true with precision=bf16 is
    refused by check_config. A config without `precision` (a deqbench
    older than the key) is left as it is. Returns cfg."""
    if "precision" not in cfg:
        return cfg
    if cfg.get("tf32", False) and cfg["precision"] == "fp32":
        cfg["precision"] = "tf32"
    if cfg["precision"] == "tf32":
        cfg["tf32"] = True
    return cfg


# (key, predicate on the value that means "unsupported", how to fix)
_RULES = (
    ("method", lambda v: v not in ("unroll", "checkpoint", "deq",
                                   "revolve", "offload", "selective"),
     "use method=unroll, checkpoint, deq, revolve, offload or selective, "
     "or impl=deqbench"),
    ("model", lambda v: v not in ("transformer", "tanh_cell", "trellisnet"),
     "use model=transformer, tanh_cell or trellisnet"),
    ("device", lambda v: v not in ("cpu", "cpu64", "cuda"),
     "use device=cpu, cpu64 or cuda"),
    ("impl", lambda v: v not in ("pytorch", ""),
     "deqtorch runs only impl=pytorch configs"),
    ("precision", lambda v: v not in PRECISIONS,
     "use precision=fp32, tf32 or bf16"),
    # deqbench refuses it with impl=pytorch too: the cap is the C core's
    ("device_mem_cap_mib", lambda v: v != 0,
     "the GPU memory cap is deqbench's (impl=deqbench); drop it"),
    ("cuda_graphs", lambda v: v is not False,
     "deqbench's CUDA graphs are the C core's; use compile=true"),
    # quality.valid_curve is the C core's so far (bench/pytorch/README.md)
    ("eval_every", lambda v: v != 0,
     "the valid curve during training is deqbench's; use eval_every=0 or "
     "impl=deqbench"),
    # checkpoint's selective segments are the C core's so far
    ("selective", lambda v: v is not False,
     "checkpoint segments with selective tapes are deqbench's; use "
     "selective=false or impl=deqbench"),
    # the fused attention kernel is the C core's (SDPA picks its own)
    ("attention", lambda v: v != "unfused",
     "attention=flash is deqbench's fused kernel; use attention=unfused or "
     "impl=deqbench"),
    # the GEMM epilogues are the C core's (cuBLASLt)
    ("epilogue", lambda v: v != "separate",
     "epilogue=fused is deqbench's cuBLASLt epilogue; use "
     "epilogue=separate or impl=deqbench"),
    # the fused Broyden/Anderson iterations are the C core's kernels
    ("solver_kernels", lambda v: v != "ops",
     "solver_kernels=fused is deqbench's fused solver iterations; use "
     "solver_kernels=ops or impl=deqbench"),
    # gradient accumulation is the C core's so far (bench/pytorch/README.md)
    ("microbatches", lambda v: v != 1,
     "gradient accumulation over micro-batches is deqbench's; use "
     "microbatches=1 or impl=deqbench"),
)


# compile=true with method=unroll: the steps that compile, autotune and
# record the CUDA graphs (cudagraph trees record on the 2nd or 3rd call)
# must be untimed (deqtorch/compiled.py MIN_WARMUP)
COMPILE_MIN_WARMUP = 3


def resolved_warmup(cfg):
    """warmup_steps, -1 resolved as deqbench does: min(10, steps/5)."""
    w = cfg.get("warmup_steps", -1)
    return w if w >= 0 else min(10, cfg.get("steps", 200) // 5)


def _check_compile_warmup(cfg):
    """Refuses compile=true with method=unroll and fewer than
    COMPILE_MIN_WARMUP warmup steps (-1: deqbench's min(10, steps/5))."""
    if cfg.get("method", "unroll") != "unroll":
        return
    w = resolved_warmup(cfg)
    if w < COMPILE_MIN_WARMUP:
        _refuse("warmup_steps", w, "compile=true with method=unroll "
                "compiles, autotunes and records its CUDA graphs in its "
                f"first {COMPILE_MIN_WARMUP} steps, which must be untimed: "
                f"set warmup_steps={COMPILE_MIN_WARMUP} or more")


def _check_selective(cfg):
    """method=selective: the transformer's attention core is what it
    recomputes (deqbench refuses the other models too), and not with
    compile=true (torch's selective checkpointing decides op by op in
    eager dispatch; a compiled block has no such ops)."""
    if cfg.get("model", "transformer") != "transformer":
        _refuse("method", "selective", "selective recomputes the "
                "transformer's attention core; use model=transformer, or "
                "method=unroll or checkpoint")
    if cfg.get("compile", False):
        _refuse("compile", True, "method=selective runs eager (torch's "
                "selective checkpointing replays aten ops one by one); "
                "drop compile")


def check_config(cfg):
    """Raises Unsupported for the first key of the resolved config `cfg`
    (a record's `config` object) that deqtorch cannot run as deqbench
    would; returns None when every value is supported."""
    if not isinstance(cfg, dict):
        raise Unsupported("deqtorch: a config must be a JSON object; pass "
                          "the resolved config of a record")
    for key in cfg:
        if key not in KNOWN_KEYS:
            _refuse(key, cfg[key], "remove the key: deqtorch does not "
                    "know it (is deqtorch older than deqbench?)")
    for key, bad, fix in _RULES:
        if key in cfg and bad(cfg[key]):
            _refuse(key, cfg[key], fix)
    dev = cfg.get("device", "cpu")
    prec = cfg.get("precision", "fp32")
    if cfg.get("tf32", False) and prec == "bf16":
        _refuse("tf32", True, "tf32=true is the alias of precision=tf32 "
                "and contradicts precision=bf16; drop tf32 or use "
                "precision=tf32")
    if cfg.get("tf32", False) and dev != "cuda":
        _refuse("tf32", True, "tf32 applies to device=cuda only; use "
                "tf32=false")
    if prec == "tf32" and dev != "cuda":
        _refuse("precision", prec, "tf32 applies to device=cuda only; use "
                "precision=fp32 or bf16")
    if prec == "bf16" and dev == "cpu64":
        _refuse("precision", prec, "device=cpu64 computes in float64, "
                "which autocast leaves alone; use device=cpu or cuda, or "
                "precision=fp32")
    if cfg.get("method") == "selective":
        _check_selective(cfg)
    if cfg.get("compile", False):
        v = torch_version()
        if torch_major(v) is not None and torch_major(v) < 2:
            raise Unsupported(f"deqtorch: compile=true needs torch >= 2 "
                              f"(this is torch {v}); drop compile")
        _check_compile_warmup(cfg)
    if dev == "cuda" and not cuda_torch_present():
        _refuse("device", dev, "this python3-torch has no CUDA build or no "
                "GPU is present; use device=cpu")
