"""vspytorch.py — the findings' sentence on deqbench against the PyTorch a
GPU user runs, at the answer's shapes, from one window's
results/gpu/<model>/vs-pytorch.jsonl (scripts/gpu-window.sh part torch:
deqbench, PyTorch compiled, PyTorch eager, deqbench again, one after the
other on one GPU).

The estimator is the findings' own: each run's mean step time over its
timed steps, the rows' geometric means, their ratio with Welch's 95%
interval where both sides have two runs or more (figbase.ratio_interval);
with one run a side the ratio is said without one, and the sentence says
so."""
import json
import os

from figbase import ratio_interval
from findfmt import num


def compile_info(path):
    """{mode: compile block} of the compiled PyTorch records in path (the
    record's top-level `compile`: mode, compile_s, graphs, graph_breaks)."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                c = json.loads(line).get("compile")
                if isinstance(c, dict) and c.get("mode"):
                    out[c["mode"]] = c
    return out


def pick(rows, impl, compiled):
    for r in rows:
        if r["kind"] == "train" and r["method"].startswith("unroll") and \
                (r["impl"] == "deqbench") == (impl == "deqbench") and \
                bool(r["config"].get("compile")) == compiled:
            return r
    return None


def per_run(r):
    return [x for x in (r.get("step_mean_ms") or {}).get("per_run") or [] if x]


def runs(n):
    return f"{n} run" + ("" if n == 1 else "s")


def versus(dq, pt):
    """' — PyTorch's step is X× faster [lo, hi]' or ' X× slower', of
    deqbench's mean step over PyTorch's."""
    a, b = per_run(dq), per_run(pt)
    ratio, lo, hi = ratio_interval(a, b)
    ci = f" [{num(lo)}, {num(hi)}]" if lo is not None else \
        f" (no interval: {runs(min(len(a), len(b)))} on one side)"
    return f"deqbench's step takes {num(ratio)}×{ci} PyTorch's"


def sentence(rows, path, device):
    """The sentence for one GPU model's vs-pytorch.jsonl rows, or None."""
    dq, comp, eager = (pick(rows, "deqbench", False), pick(rows, "pytorch", True),
                       pick(rows, "pytorch", False))
    if not dq or not (comp or eager):
        return None
    cfg = dq["config"]
    out = (f"Against PyTorch at the same shapes (unroll, d_model {cfg['d_model']}, "
           f"{cfg['layers']} layers, batch {cfg['batch_size']}×{cfg['seq_len']}, "
           f"{cfg['precision']}, {cfg['steps']} steps, one after the other on {device}; "
           f"each run's mean step): deqbench with CUDA graphs "
           f"{num(dq['step_mean_ms']['gmean'])} ms ({runs(len(per_run(dq)))})")
    modes = compile_info(path)
    if comp:
        mode = ", ".join(sorted(modes)) or "?"
        c = modes.get(mode, {})
        out += (f"; PyTorch with its whole step under torch.compile (mode {mode}; compiled in "
                f"{num(c.get('compile_s', 0), 0)} s, {c.get('graphs', '?')} graph(s), "
                f"{c.get('graph_breaks', '?')} graph breaks) "
                f"{num(comp['step_mean_ms']['gmean'])} ms ({runs(len(per_run(comp)))}): "
                + versus(dq, comp))
    if eager:
        out += (f"; PyTorch eager {num(eager['step_mean_ms']['gmean'])} ms "
                f"({runs(len(per_run(eager)))}): " + versus(dq, eager))
    if "max-autotune" not in modes:
        out += ("; mode max-autotune (GEMM autotuning) not measured yet "
                "(`PARTS=autotune scripts/gpu-window.sh run`)")
    return out + "."


def short(rows, path):
    """The headline's clause: deqbench's step over compiled PyTorch's, or ''."""
    dq, comp = pick(rows, "deqbench", False), pick(rows, "pytorch", True)
    if not dq or not comp:
        return ""
    mode = ", ".join(sorted(compile_info(path))) or "?"
    return (f" Unroll's step in deqbench takes "
            f"{num(ratio_interval(per_run(dq), per_run(comp))[0])}× that of PyTorch compiled "
            f"(mode {mode}) at the same shapes ({runs(len(per_run(comp)))} of PyTorch).")


def source_path(answer_path):
    """vs-pytorch.jsonl beside an answer.jsonl, or None."""
    p = os.path.join(os.path.dirname(answer_path), "vs-pytorch.jsonl")
    return p if os.path.exists(p) else None
