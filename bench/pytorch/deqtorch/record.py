"""The run's record in results/SCHEMA.md's format, less `suite`, `host`,
`build` and `schema` (the C side adds those). What impl=pytorch cannot
measure as deqbench does is null (README.md beside this package)."""
import os
import resource
import time

import torch

from . import config, methods, stats


def utc_now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def block_flops(cfg):
    """Forward FLOPs of one block (the models' `flops` in models/*.c)."""
    N = cfg["batch_size"] * cfg["seq_len"]
    d, Fw, T = cfg["d_model"], cfg["d_ff"], cfg["seq_len"]
    if cfg["model"] == "transformer":
        return 2.0 * N * (4.0 * d * d + 2.0 * d * Fw) + 4.0 * N * T * d
    if cfg["model"] == "tanh_cell":
        return 2.0 * N * d * d
    return 16.0 * N * d * d


def model_json(ctx):
    ps = [{"name": n, "shape": list(p.shape)}
          for n, p in ctx.model.named_parameters()]
    return {"kind": ctx.cfg["model"], "vocab_size": ctx.V,
            "n_params": sum(p.numel() for p in ctx.params),
            "block_flops": block_flops(ctx.cfg), "params": ps}


def method_json(cfg):
    c = methods.resolve(cfg)
    return {k: c[k] for k in config.METHOD_KEYS if k in c}


def data_json(req, splits, cfg):
    d = req["data"]
    B, T = cfg["batch_size"], cfg["seq_len"]
    nb = (len(splits[0]) // B - 1) // T
    src = None
    if d["corpus"] != "synthetic":
        src = os.path.dirname(os.path.dirname(os.path.abspath(d["train"])))
    return {"corpus": d["corpus"], "source_dir": src, "from_cache": True,
            "vocab_size": d["vocab_size"], "train_tokens": len(splits[0]),
            "valid_tokens": len(splits[1]), "test_tokens": len(splits[2]),
            "train_batches_per_epoch": nb,
            "epochs": cfg["steps"] / nb if nb else None}


def step_gflop(ctx, log):
    """timing.step_gflop: run_step_flops of bench/run/run_record.h over the
    record's evals; the head's and the injection's GEMMs are 3 x 2 N x
    their weight's elements (V E and U E k). None without steps."""
    ev = evals_json(log)
    if ev["forward_evals_per_step"] is None:
        return None
    N = ctx.cfg["batch_size"] * ctx.cfg["seq_len"]
    F = block_flops(ctx.cfg)
    w = dict(ctx.model.named_parameters())
    gemm = 6.0 * N * (w["head.weight"].numel() + w["inject.weight"].numel())
    return (ev["forward_evals_per_step"] * F +
            ev["vjp_evals_per_step"] * 2 * F + gemm) / 1e9


def _timed(ctx, log, a, b):
    """(step, forward, backward ms) of steps a..b-1 but the first
    warmup_steps: each phase has its own warmup (bench/run/pretrain.c)."""
    w = min(a + ctx.cfg["warmup_steps"], b)
    return log.ms[w:b], log.fwd_ms[w:b], log.bwd_ms[w:b]


def pretrain_json(ctx, log):
    """The record's pretrain object (SCHEMA.md §pretrain), or None."""
    c = ctx.cfg
    if ctx.pre is None:
        return None
    done = log.p0
    ms, f, b = _timed(ctx, log, 0, done)
    fe, ve = log.f_ev[:done], log.v_ev[:done]
    return {"steps": c["pretrain_steps"], "layers": c["pretrain_layers"],
            "steps_done": done, "steps_timed": len(ms),
            "step_ms": stats.stats(ms), "forward_ms": stats.stats(f),
            "backward_ms": stats.stats(b),
            "tokens_per_s": c["batch_size"] * c["seq_len"] * len(ms) /
            (sum(ms) / 1e3) if ms and sum(ms) > 0 else None,
            "forward_evals_per_step": sum(fe) / done if done else None,
            "vjp_evals_per_step": sum(ve) / done if done else None,
            "train_loss_last": stats.num(log.loss[done - 1])
            if done else None,
            "depth_bytes": log.pre_depth}


def timing_json(ctx, log, setup_s, eval_s):
    ms, f, b = _timed(ctx, log, log.p0, log.ok_steps)
    B, T = ctx.cfg["batch_size"], ctx.cfg["seq_len"]
    sm, gf = stats.stats(ms), step_gflop(ctx, log)
    return {"steps_timed": len(ms), "step_ms": sm,
            "forward_ms": stats.stats(f), "backward_ms": stats.stats(b),
            "tokens_per_s": B * T * len(ms) / (sum(ms) / 1e3)
            if ms and sum(ms) > 0 else None,
            "step_gflop": gf,
            "gflops": gf / (sm["median"] / 1e3)
            if gf is not None and sm["median"] else None,
            "setup_s": setup_s, "train_s": log.train_s, "eval_s": eval_s}


def offload_json(ctx):
    """memory.offload of method=offload over the timed steps: bytes moved
    per step (out and back), the copies' time; they run in line, so the
    stall is the copy time and nothing overlaps."""
    cp = getattr(ctx.method, "copies", None)
    if not cp:
        return None
    w = min(ctx.cfg["warmup_steps"], len(cp))
    t = cp[w:] or cp
    ms = [c[1] for c in t]
    return {"bytes_per_step": sum(c[0] for c in t) / len(t),
            "copy_ms": stats.stats(ms), "stall_ms": stats.stats(ms),
            "overlap": 0.0}


def memory_json(ctx):
    e = ctx.params[0].element_size()
    P = sum(p.numel() for p in ctx.params) * e
    cfg = ctx.cfg
    N = cfg["batch_size"] * cfg["seq_len"]
    rows = min(cfg["head_chunk"], N) if cfg["head_chunk"] > 0 else N
    head = 2 * rows * ctx.V * e  # a chunk's logits and their gradient
    tr = ctx.tracker
    cat = {"params": P, "grads": P, "optimizer": 2 * P, "head": head,
           "depth": tr.peak_depth, "solver": tr.peak_solver,
           "workspace": None, "host": tr.peak_host}
    setup = dict(cat, depth=0, solver=0)
    total = P * 4 + head + tr.peak_ds
    mem = {"peak_bytes": cat, "peak_depth_solver_bytes": tr.peak_ds,
           "peak_total_bytes": total, "setup_live_bytes": setup,
           "setup_live_total_bytes": 4 * P + head,
           "predicted_depth_bytes": None, "predicted_solver_bytes": None,
           "predicted_host_bytes": None, "offload": offload_json(ctx),
           "max_rss_bytes": resource.getrusage(
               resource.RUSAGE_SELF).ru_maxrss * 1024, "pool": None}
    if ctx.dev.type == "cuda":
        free, tot = torch.cuda.mem_get_info()
        mem["peak_total_bytes"] = torch.cuda.max_memory_allocated()
        mem["pool"] = {"used_high_bytes": torch.cuda.max_memory_allocated(),
                       "reserved_high_bytes":
                       torch.cuda.max_memory_reserved(),
                       "device_free_bytes": free, "device_total_bytes": tot}
    return mem


def solver_json(log):
    """The deq phase's solves (steps after any pretraining)."""
    p0, n = log.p0, log.ok_steps
    fw = [s for s in log.fwd[p0:n] if s is not None]
    bw = [s for s in log.bwd[p0:n] if s is not None]
    jac = [r for r in log.jac[p0:n] if r is not None]
    return {"forward": stats.solve_json(fw), "backward": stats.solve_json(bw),
            "host_reads_per_step": None,
            "jac_loss_mean": stats.num(stats.mean_or_none(jac)),
            "jac_loss_steps": len(jac)}


def evals_json(log):
    """Block applications and VJPs of the steps after any pretraining."""
    fe, ve = log.f_ev[log.p0:log.ok_steps], log.v_ev[log.p0:log.ok_steps]
    n = len(fe)
    return {"steps": n, "forward_evals_per_step": sum(fe) / n if n else None,
            "forward_evals_total": sum(fe),
            "vjp_evals_per_step": sum(ve) / n if n else None,
            "vjp_evals_total": sum(ve)}


def quality_json(ctx, log, ev):
    done = len(log.loss)
    last = log.loss[max(0, done - 10):]
    q = {"train_loss_first": stats.num(log.loss[0]) if done else None,
         "train_loss_final": stats.num(stats.mean_or_none(last)),
         "tokens_trained": ctx.cfg["batch_size"] * ctx.cfg["seq_len"] *
         log.ok_steps,
         "valid_spectral_radius": stats.num(getattr(ctx, "spectral", None))}
    for split, (loss, n) in (("valid", ev["valid"][:2]),
                             ("test", ev["test"][:2])):
        q[f"{split}_loss"] = stats.num(loss)
        q[f"{split}_ppl"] = stats.num(_exp(loss))
        q[f"{split}_eval_tokens"] = n
    return q


def _exp(x):
    import math
    try:
        return math.exp(x) if x is not None else None
    except OverflowError:
        return None


def inference_json(ctx, ev, eval_s):
    _, _, ms, sts, evs = ev["valid"]
    if not ms:
        return None
    w = min(ctx.cfg["eval_warmup"], len(ms))
    t = ms[w:]
    fs = [s for s in sts if s is not None]
    B, T = ctx.cfg["batch_size"], ctx.cfg["seq_len"]
    return {"split": "valid", "batches": len(ms), "batches_timed": len(t),
            "step_ms": stats.stats(t),
            "tokens_per_s": B * T * len(t) / (sum(t) / 1e3)
            if t and sum(t) > 0 else None,
            "forward_evals_per_batch": sum(evs) / len(evs),
            "host_reads_per_batch": None,
            "forward_solve": stats.solve_json(fs) if fs else None,
            "memory": None, "eval_s": eval_s}


def device_json(ctx):
    cfg, dev = ctx.cfg, ctx.dev
    e = ctx.params[0].element_size()
    d = {"device": cfg["device"], "backend": "torch-" + dev.type,
         "elem_bytes": e, "compute_capability": None, "sm_count": 0,
         "driver_version": 0, "runtime_version": 0, "tf32": None,
         "pci_bus_id": None, "local_cpus": None, "local_cpus_source": None,
         "local_cpus_note": "not a PCI device"}
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(0)
        d.update(name=p.name, total_mem_bytes=p.total_memory,
                 compute_capability=f"{p.major}.{p.minor}",
                 sm_count=p.multi_processor_count, tf32=bool(cfg["tf32"]),
                 local_cpus_note="not measured by impl=pytorch")
    else:
        amp = " bf16 autocast" if cfg.get("precision") == "bf16" else ""
        d.update(name=f"torch {torch.__version__} cpu "
                 f"{'float64' if e == 8 else 'float32'}{amp}",
                 total_mem_bytes=os.sysconf("SC_PAGE_SIZE") *
                 os.sysconf("SC_PHYS_PAGES"))
    return d


def _arr(x):
    """A trace column: numbers, null for a non-finite value."""
    return [stats.num(float(v)) if v is not None else None for v in x]


def _solve_cols(sts, n, p0):
    """(iters, residual, converged) columns of per-step solver Stats; a
    step without a solve has 0, 0 and false (bench/run/run_record.c), a
    pretraining step 0, null and false."""
    it = [s.iters if s is not None else 0 for s in sts[:n]]
    res = [s.residual if s is not None else (None if i < p0 else 0.0)
           for i, s in enumerate(sts[:n])]
    conv = [bool(s.converged) if s is not None else False for s in sts[:n]]
    return it, res, conv


def trace_json(log):
    """The record's trace object (results/SCHEMA.md §trace) from the Log:
    per-step columns over the completed steps (loss also over a diverged
    last step), the last training step's per-iteration residuals. deqtorch
    counts no host reads (null); jac_loss is R where the regulariser ran."""
    n = log.ok_steps
    fi, fr, fc = _solve_cols(log.fwd, n, log.p0)
    bi, br, bc = _solve_cols(log.bwd, n, log.p0)
    last_f = log.fwd[n - 1] if n and log.fwd[n - 1] is not None else None
    last_b = log.bwd[n - 1] if n and log.bwd[n - 1] is not None else None
    return {
        "loss": _arr(log.loss), "step_ms": _arr(log.ms[:n]),
        "forward_ms": _arr(log.fwd_ms[:n]),
        "backward_ms": _arr(log.bwd_ms[:n]),
        "grad_norm": _arr(log.gnorm[:n]), "lr": _arr(log.lr[:n]),
        "fwd_iters": _arr(fi), "fwd_residual": _arr(fr),
        "bwd_iters": _arr(bi), "bwd_residual": _arr(br),
        "fwd_converged": fc, "bwd_converged": bc,
        "host_reads": [None] * n, "jac_loss": _arr(log.jac[:n]),
        "last_fwd_residual_trace": _arr(last_f.trace[:256] if last_f
                                        else []),
        "last_bwd_residual_trace": _arr(last_b.trace[:256] if last_b
                                        else []),
    }
