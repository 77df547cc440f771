"""What the commands of deqtorch.py share (cli.py; grad.py): deqbench's
default config and the bad-input exit."""
import sys

# deqbench's defaults (docs/configuration.md key table; warmup_steps -1 is
# min(10, steps/5)): the config of `grad key=value ...` before its
# arguments; tests/peer/test_keys.py checks them against
# `deqbench run --help-json`
DEFAULTS = {
    "model": "transformer", "d_model": 64, "n_heads": 2, "d_ff": 256,
    "seq_len": 32, "batch_size": 16, "vocab_size": 0, "seed": 1,
    "init": "pytorch", "init_std": 0.0, "embed_std": 0.0,
    "attention": "unfused", "epilogue": "separate", "head_chunk": 0,
    "method": "unroll", "layers": 12, "k": 0, "selective": False,
    "f_solver": "broyden",
    "f_tol": 1e-3, "f_max_iter": 30, "f_stop_mode": "rel", "f_history": 0,
    "b_mode": "ift", "b_solver": "broyden", "b_tol": 1e-3,
    "b_max_iter": 40, "b_stop_mode": "rel", "b_history": 0,
    "anderson_m": 5, "anderson_lambda": 1e-4, "anderson_beta": 1.0,
    "solver_batching": "per_sample", "f_stop_scope": "batch",
    "b_stop_scope": "batch", "protect_thres": 0.0, "stall_window": 0,
    "sync_every": 1, "solver_kernels": "ops",
    "jac_loss_weight": 0.0, "jac_loss_freq": 1.0, "jac_fd_eta": 0.0,
    "phantom_steps": 5, "phantom_tau": 0.5, "spectral_radius_iters": 0,
    "slots": 0, "corpus": "brown", "data_dir": "data", "steps": 200,
    "microbatches": 1,
    "pretrain_steps": 0, "pretrain_layers": 12, "warmup_steps": -1,
    "lr": 1e-3, "lr_warmup": 20, "clip": 1.0, "eval_tokens": 16384,
    "eval_warmup": 2, "eval_every": 0, "curve_tokens": 0, "params": "",
    "device": "cpu", "threads": 0, "tf32": False, "precision": "fp32",
    "compile": False,
    "cuda_graphs": False, "device_mem_cap_mib": 0, "managed_prefetch": True,
    "out": "results/runs.jsonl", "trace": False, "save_params": "",
}


def bad(msg):
    """Bad input: msg as one line on stderr; returns the exit status 2."""
    print(msg, file=sys.stderr)
    return 2
