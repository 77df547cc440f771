#!/usr/bin/env python3
"""gpu_targets.py — the GPU targets (BLOCK_MIN ... EAGER_MIN below)
against the records and logs of one lent-GPU check (scripts/gpu-lent.sh,
scripts/gpu-check.sh), generated, never typed: the TARGETS.md beside them.

    gpu_targets.py [--write | --check] [--deqbench BIN] [DIR]
                                   (default results/gpu/check)

Reads DIR/*.jsonl (run records and `deqbench price` records,
results/SCHEMA.md) and DIR/bench-block-*.log
(`deqbench bench-block` prints no record; its lines are parsed here: the
header's shape and precision, "ratio block/gemm", and under precision=bf16
"gemm bf16 floor, one training step's shapes ... ms"). Prints, per target
(set for an NVIDIA H100; the device the records name here), what was
measured, from which records, and met / missed / not measured. Ratios are
of medians measured in the same call on the same device. --write writes
DIR/TARGETS.md; --check exits 1 when the committed file differs from what
the records generate (tests/meson.build: test `gpu-targets`). BIN: the
deqbench whose key table (`deqbench run --help-json`) says which keys are
a run's identity (plots/records.py; default $DEQBENCH, else
build/bench/deqbench). Standard library only.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

# plots/records.py reads deqbench's key table when it is imported, so it
# is imported in main, once --deqbench is known
R = None

BLOCK_MIN = 0.90       # block fwd+vjp ≥ 0.90 of cuBLAS at the same precision
PER_EVAL_MAX = 1.10    # a solver iteration's marginal ms ≤ 1.10 × its unit's price
PER_EVAL_STEPS = 500   # ... over whole runs of at least this many steps
READS_MAX = 2.0        # host reads per solve
FLOOR_MAX = 2.5        # bf16 unroll step ≤ 2.5 × the bf16 GEMM-only floor
COMPILE_MIN = 3.0      # ≥ 3 × faster than PyTorch bf16 + torch.compile
EAGER_MIN = 10.0       # d_model 128: ≥ 10 × faster than PyTorch eager bf16
ITER_MAX = 1.2         # a solver iteration ≤ 1.2 × a tape-less block forward

HEAD = re.compile(r"^bench-block: .*device=(\S+) \((.*)\) precision=(\S+) "
                  r"B=(\d+) T=(\d+) d_model=(\d+)")
RATIO = re.compile(r"^ratio block/gemm ([0-9.]+)")
OTHER = re.compile(r"^other ops .*; attention \+ layernorms ([0-9]+)% of block")
FLOOR = re.compile(r"^gemm bf16 floor, one training step's shapes\s+([0-9.]+) ms")
FWD0 = re.compile(r"^block forward, no tape\s+([0-9.]+) ms")
VJP0 = re.compile(r"^block vjp, input only\s+([0-9.]+) ms")
COMPILED = re.compile(r"^deqtorch: torch\.compile of (.+): (\d+) graphs, (\d+) graph breaks")


def logs(d, pattern):
    """Paths of the logs named pattern in d and in its windows' folders
    (d/windows/STAMP/, scripts/gpu-window.sh), sorted."""
    return sorted(glob.glob(os.path.join(d, pattern)) +
                  glob.glob(os.path.join(d, "windows", "*", pattern)))


def bench_block(d):
    """Rows of the bench-block logs in d: dicts with device, precision, B,
    T, d_model, ratio and (bf16) the step's GEMM floor in ms."""
    rows = []
    for path in logs(d, "bench-block-*.log"):
        row = {"log": os.path.basename(path)}
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = HEAD.match(line)
                if m:
                    row.update(device=m[2], precision=m[3], B=int(m[4]),
                               T=int(m[5]), d_model=int(m[6]))
                m = RATIO.match(line)
                if m:
                    row["ratio"] = float(m[1])
                m = FLOOR.match(line)
                if m:
                    row["floor_ms"] = float(m[1])
                m = OTHER.match(line)
                if m:
                    row["other"] = int(m[1])
                for key, rx in (("fwd0_ms", FWD0), ("vjp0_ms", VJP0)):
                    m = rx.match(line)
                    if m:
                        row[key] = float(m[1])
        if "ratio" in row and "d_model" in row:
            rows.append(row)
    return sorted(rows, key=lambda r: (r["d_model"], r["precision"]))


def load(d):
    paths = sorted(glob.glob(os.path.join(d, "*.jsonl")))
    ok, _ = R.load(paths, note=lambda *a: None)
    return [(os.path.basename(p), rec) for p, _, rec in ok
            if rec.get("kind") != "price"]


def load_prices(d):
    """The price records (`deqbench price`, kind price) in d's *.jsonl."""
    out = []
    for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get("kind") == "price":
                    out.append(rec)
    return out


def c(rec, key):
    return R.get(rec, "config." + key)


def step(rec):
    return R.num(rec, "timing.step_ms.median")


def is_torch(rec):
    return str(rec.get("impl", "")).startswith("pytorch")


def pick(recs, **want):
    """Records whose config matches want (impl=torch/deqbench by kind)."""
    out = []
    for f, r in recs:
        impl = want.get("impl")
        if impl is not None and (impl == "pytorch") != is_torch(r):
            continue
        if all(c(r, k) == v for k, v in want.items() if k != "impl"):
            out.append((f, r))
    return out


def fmt(x, d=2):
    return "-" if x is None else f"{x:.{d}f}"


def verdict(ok):
    return "**met**" if ok else "**missed**"


def section_block(rows):
    out = ["## 1. Block forward+VJP against cuBLAS at the same precision",
           "", f"Target: ≥ {BLOCK_MIN:.2f} for d_model 128–1024 "
           "(`ratio block/gemm` of `deqbench bench-block`, 50 iterations). The share of "
           "attention and LayerNorms comes from the log's `other ops` line (- where the "
           "log's bench-block did not print it yet).", "",
           "| d_model | B×T | precision | block/gemm | attention + LayerNorms, "
           "% of block | verdict | log |",
           "|---:|---|---|---:|---:|---|---|"]
    for r in rows:
        other = f"{r['other']}" if "other" in r else "-"
        out.append(f"| {r['d_model']} | {r['B']}×{r['T']} | {r['precision']} | "
                   f"{r['ratio']:.3f} | {other} | "
                   f"{verdict(r['ratio'] >= BLOCK_MIN)} | {r['log']} |")
    return out + [""]


def ols2(ys, x1, x2):
    """Least squares y = a + b1·x1 + b2·x2: (b1, b2), or (b, None) with
    one slope on x1 + x2 where the two do not vary apart, or None where
    nothing varies (standard library: the 3×3 normal equations)."""
    n = len(ys)
    if n < 10:
        return None
    m = [sum(v) / n for v in (ys, x1, x2)]
    d = [[v - mv for v in col] for col, mv in zip((ys, x1, x2), m)]
    s11 = sum(a * a for a in d[1])
    s22 = sum(a * a for a in d[2])
    s12 = sum(a * b for a, b in zip(d[1], d[2]))
    s1y = sum(a * b for a, b in zip(d[1], d[0]))
    s2y = sum(a * b for a, b in zip(d[2], d[0]))
    det = s11 * s22 - s12 * s12
    if s11 > 0 and s22 > 0 and det > 1e-6 * s11 * s22:
        return ((s22 * s1y - s12 * s2y) / det, (s11 * s2y - s12 * s1y) / det)
    t = [a + b for a, b in zip(d[1], d[2])]
    stt = sum(a * a for a in t)
    return (sum(a * b for a, b in zip(t, d[0])) / stt, None) if stt > 0 else None


def marginal(rec):
    """(ms per forward iteration, ms per backward iteration or None, steps)
    of a DEQ record: the regression of its timed steps' times on their
    solver iterations (trace), or None without a trace."""
    tr = rec.get("trace") or {}
    ms, fi, bi = tr.get("step_ms"), tr.get("fwd_iters"), tr.get("bwd_iters")
    if not (ms and fi and bi):
        return None
    w = int(c(rec, "warmup_steps") or 0)
    pts = [(y, a, b) for y, a, b in zip(ms[w:], fi[w:], bi[w:])
           if y is not None and a is not None and b is not None]
    fit = ols2(*zip(*pts)) if pts else None
    return (fit[0], fit[1], len(pts)) if fit else None


def price(rows, rec, key):
    """bench-block's price `key` at the record's device, precision and
    shapes, or None."""
    for x in rows:
        if (key in x and x["precision"] == c(rec, "precision") and
                x["d_model"] == c(rec, "d_model") and x["B"] == c(rec, "batch_size")
                and x["T"] == c(rec, "seq_len")):
            return x[key]
    return None


def section_per_iter(recs, rows):
    out = ["## 2. A DEQ solver iteration's marginal cost against the block's price", "",
           f"Target: ≤ {PER_EVAL_MAX:.2f}× over whole runs of ≥ {PER_EVAL_STEPS} steps. "
           "The marginal cost: the least-squares slope of each timed step's time on its "
           "forward and backward solver iterations (the record's trace; one slope on "
           "their sum where the two do not vary apart), so the head, Adam and the "
           "once-a-step taped forward and full VJP fall into the intercept. The price: "
           "bench-block's `block forward, no tape` (a forward iteration) and `block vjp, "
           "input only` (a backward iteration) at the run's shapes and precision.", "",
           "| file | method | d_model | B×T | precision | graphs | steps | ms/fwd iter "
           "| no-tape fwd ms | ratio | ms/bwd iter | input-only VJP ms | ratio | verdict |",
           "|---|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for f, r in recs:
        if c(r, "method") != "deq" or is_torch(r) or r.get("kind") != "train":
            continue
        mg = marginal(r)
        if not mg:
            continue
        bf, bb, n = mg
        f0, v0 = price(rows, r, "fwd0_ms"), price(rows, r, "vjp0_ms")
        rf = bf / f0 if f0 else None
        rb = bb / v0 if v0 and bb is not None else None
        worst = max((x for x in (rf, rb) if x is not None), default=None)
        if worst is None:
            v = "not measured: no bench-block price at the run's shapes"
        elif c(r, "steps") < PER_EVAL_STEPS:
            v = f"not a whole ≥ {PER_EVAL_STEPS}-step run"
        else:
            v = verdict(worst <= PER_EVAL_MAX)
        hist = c(r, "f_history")
        out.append(f"| {f} | deq seed {c(r, 'seed')}"
                   f"{'' if not hist or hist >= c(r, 'f_max_iter') else f' history {hist}'} | "
                   f"{c(r, 'd_model')} | {c(r, 'batch_size')}×{c(r, 'seq_len')} | "
                   f"{c(r, 'precision')} | {'yes' if c(r, 'cuda_graphs') else 'no'} | {n} | "
                   f"{fmt(bf, 3)}{'' if bb is not None else ' (fwd+bwd)'} | {fmt(f0, 3)} | "
                   f"{fmt(rf)} | {fmt(bb, 3)} | {fmt(v0, 3)} | {fmt(rb)} | {v} |")
    return out + [""]


def section_reads(recs):
    out = ["## 3. Host reads per solve", "",
           f"Target: ≤ {READS_MAX:g} (`solver.host_reads_per_step` over the "
           "step's two solves, forward and backward; inference: one solve "
           "a batch).", "",
           "| file | graphs | runs | training reads/solve (max) | "
           "inference reads/solve (max) | verdict |", "|---|---|---:|---:|---:|---|"]
    groups = {}
    for f, r in recs:
        if c(r, "method") != "deq" or is_torch(r) or r.get("kind") != "train":
            continue
        tr = R.num(r, "solver.host_reads_per_step")
        inf = R.num(r, "inference.host_reads_per_batch")
        groups.setdefault((f, bool(c(r, "cuda_graphs"))), []).append(
            (tr / 2 if tr is not None else None, inf))
    for (f, g), xs in sorted(groups.items()):
        tr = max((a for a, _ in xs if a is not None), default=None)
        inf = max((b for _, b in xs if b is not None), default=None)
        worst = max(x for x in (tr, inf) if x is not None)
        v = verdict(worst <= READS_MAX) if g else \
            "eager (the target is cuda_graphs')"
        out.append(f"| {f} | {'yes' if g else 'no'} | {len(xs)} | {fmt(tr)} | "
                   f"{fmt(inf)} | {v} |")
    return out + [""]


def section_floor(recs, rows):
    out = ["## 4. bf16 unroll step against the bf16 GEMM-only floor of its shapes",
           "", f"Target: ≤ {FLOOR_MAX:g}× at d_model 512 (the floor: "
           "bench-block's \"gemm bf16 floor, one training step's shapes\", "
           "operands already bf16, at the run's d_model, batch and seq_len).", "",
           "| file | d_model | B×T | graphs | step ms | floor ms | ratio | verdict |",
           "|---|---:|---|---|---:|---:|---:|---|"]
    for f, r in pick(recs, method="unroll", precision="bf16", impl="deqbench"):
        d, B, T = c(r, "d_model"), c(r, "batch_size"), c(r, "seq_len")
        fl = [x for x in rows if x["precision"] == "bf16" and x["d_model"] == d
              and x["B"] == B and x["T"] == T and "floor_ms" in x]
        if d != 512:
            continue
        if not fl:
            out.append(f"| {f} | {d} | {B}×{T} | "
                       f"{'yes' if c(r, 'cuda_graphs') else 'no'} | {fmt(step(r))} | - | - | "
                       f"not measured: no bench-block log at {B}×{T} |")
            continue
        ratio = step(r) / fl[0]["floor_ms"]
        out.append(f"| {f} | {d} | {B}×{T} | {'yes' if c(r, 'cuda_graphs') else 'no'} | "
                   f"{fmt(step(r))} | {fmt(fl[0]['floor_ms'])} | {ratio:.2f} | "
                   f"{verdict(ratio <= FLOOR_MAX)} |")
    return out + [""]


def torch_eager_ms(recs, f, t):
    """PyTorch eager's median step in file f at t's shapes, or None."""
    for f2, e in pick(recs, method="unroll", precision="bf16", impl="pytorch",
                      d_model=c(t, "d_model"), seq_len=c(t, "seq_len")):
        if f2 == f and not c(e, "compile"):
            return step(e)
    return None


def compiled(d):
    """What deqtorch's compile=true compiled, from the line it prints on
    stderr ("deqtorch: torch.compile of SCOPE: N graphs, M graph breaks")
    in d's logs: sorted (scope, graphs, breaks, log) tuples."""
    found = set()
    for path in logs(d, "*.log"):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = COMPILED.match(line)
                if m:
                    found.add((m[1], int(m[2]), int(m[3]), os.path.basename(path)))
    return sorted(found)


def compile_note(d):
    """The note of the torch.compile target: what the logs say was compiled."""
    seen = compiled(d)
    what = ("; ".join(f"{log}: {scope}, {g} graphs, {b} graph breaks"
                      for scope, g, b, log in seen) if seen else
            "no log here has deqtorch's \"torch.compile of ...\" line, so what was "
            "compiled is not known from this folder")
    return (f" What deqtorch's compile=true compiled (its logs): {what}. Where it is no "
            "faster than PyTorch eager in the same file, the verdict says so: such a "
            "baseline is not what a GPU user gets from torch.compile.")


def baseline_problem(t):
    """Why a PyTorch record is not a baseline a GPU user would accept, or
    None: records without the `compile` field come from a deqtorch that
    compiled the block only and timed its steps with saved-tensor hooks or
    host reads (results/gpu/README.md); a compile=true row must have
    compiled the whole step."""
    if "compile" not in t:
        return ("invalid baseline: an older deqtorch (no `compile` field) that "
                + ("compiled the block only and " if c(t, "compile") else "")
                + "timed its steps with saved-tensor hooks or host reads")
    if c(t, "compile") and R.get(t, "compile.scope") != "step":
        return "invalid baseline: only part of the step was compiled"
    return None


def section_torch(recs, d_model, compile_, target, title, note=""):
    out = [title, "", f"Target: ≥ {target:g}× (PyTorch's median step over "
           "deqbench's, same shapes, method unroll, bf16)." + note, "",
           "| file | deqbench graphs | deqbench ms | PyTorch | PyTorch ms | ratio | verdict |",
           "|---|---|---:|---|---:|---:|---|"]
    for f, t in pick(recs, method="unroll", precision="bf16", impl="pytorch",
                     d_model=d_model):
        if bool(c(t, "compile")) != compile_:
            continue
        eager = torch_eager_ms(recs, f, t) if compile_ else None
        suspect = (f", but compile ({fmt(step(t))} ms) is no faster than eager "
                   f"({fmt(eager)} ms): suspect baseline"
                   if eager is not None and step(t) >= 0.95 * eager else "")
        bad = baseline_problem(t)
        how = (f"compile {R.get(t, 'compile.mode')}" if R.get(t, "compile.mode")
               else "compile, block" if compile_ else "eager")
        for f2, r in pick(recs, method="unroll", precision="bf16", impl="deqbench",
                          d_model=d_model):
            if f2 != f or c(r, "layers") != c(t, "layers") or \
                    c(r, "seq_len") != c(t, "seq_len"):
                continue
            ratio = step(t) / step(r)
            out.append(f"| {f} | {'yes' if c(r, 'cuda_graphs') else 'no'} | "
                       f"{fmt(step(r))} | {how} | {fmt(step(t))} | {ratio:.2f} | "
                       f"{bad or verdict(ratio >= target) + suspect} |")
    return out + [""]


def section_managed(recs):
    out = ["## Unified memory (method=managed) against offload", "",
           "bench/suites/managed-gpu.json: median step ms over repeats "
           "[min–max], the total device peak (MiB) and the managed pages (MiB, "
           "`memory.peak_bytes.managed`) the total leaves out. Where the driver kept "
           "those pages is not recorded: without memory pressure they stay in the "
           "GPU's memory, so total + managed is the device memory the run may hold.", "",
           "| cap MiB | method | prefetch | runs | step ms | total peak MiB | managed MiB "
           "| total + managed MiB |",
           "|---:|---|---|---:|---|---:|---:|---:|"]
    by = {}
    for f, r in recs:
        if "managed" not in f or is_torch(r):
            continue
        pf = c(r, "managed_prefetch") if c(r, "method") == "managed" else None
        key = (c(r, "device_mem_cap_mib") or 0, c(r, "method"), str(pf))
        by.setdefault(key, []).append(r)
    for (cap, m, pf), rs in sorted(by.items()):
        ms = [step(r) for r in rs]
        peak = statistics.median(R.num(r, "memory.peak_total_bytes") for r in rs) / R.MIB
        man = statistics.median(R.num(r, "memory.peak_bytes.managed") or 0
                                for r in rs) / R.MIB
        out.append(f"| {cap} | {m} | {'-' if pf == 'None' else pf.lower()} | {len(rs)} | "
                   f"{statistics.median(ms):.2f} [{min(ms):.2f}–{max(ms):.2f}] | {peak:.0f} "
                   f"| {man:.0f} | {peak + man:.0f} |")
    return out + [""]


def section_graphs(recs):
    out = ["## Eager against cuda_graphs=true", "",
           "Median step ms per method (median over seeds), same file pair.", "",
           "| file | method | precision | d_model | eager ms | graphs ms | graphs/eager |",
           "|---|---|---|---:|---:|---:|---:|"]
    by = {}
    for f, r in recs:
        if is_torch(r) or r.get("kind") != "train" or c(r, "device_mem_cap_mib"):
            continue
        base = f.replace("-gc-graphs", "-gc")
        key = (base, c(r, "method"), c(r, "precision"), c(r, "d_model"))
        by.setdefault(key, {}).setdefault(bool(c(r, "cuda_graphs")), []).append(step(r))
    for (f, m, p, d), v in sorted(by.items(), key=lambda kv: str(kv[0])):
        if True in v and False in v:
            e, g = statistics.median(v[False]), statistics.median(v[True])
            out.append(f"| {f} | {m} | {p} | {d} | {e:.2f} | {g:.2f} | {g / e:.2f} |")
    return out + [""]


def mean_history(recs, d_model, kernels, solver):
    """The pairs (iterates) in use per solver iteration, averaged over the
    DEQ runs at d_model with solver_kernels `kernels` and f_solver
    `solver` (work: solver_history_sum over solver_update), or None."""
    hs = []
    for _, r in recs:
        if (c(r, "method") == "deq" and c(r, "d_model") == d_model and
                (c(r, "solver_kernels") or "ops") == kernels and
                c(r, "f_solver") == solver):
            u = R.num(r, "work.solver_update.per_step_timed")
            h = R.num(r, "work.solver_history_sum.per_step_timed")
            if u and h is not None:
                hs.append(h / u)
    return statistics.median(hs) if hs else None


def section_solver_iter(recs, prices):
    """Section 7 (nothing where no price was measured)."""
    rows = solver_iter_rows(recs, prices)
    if not rows:
        return []
    return ["## 7. A solver iteration against a tape-less block forward (issue 45)", "",
           f"Target: ≤ {ITER_MAX:g}× at d_model 128 and 512: (block_fwd + "
           "solver_update(h̄)) / block_fwd, the prices of `deqbench price` "
           "(scripts/gpu-window.sh part `fused`: solver_kernels ops and fused) "
           "and h̄ the pairs or iterates in use per iteration of the DEQ runs at "
           "that width and solver_kernels (their `work`; h = 8 where none ran).", "",
           "| d_model | precision | solver_kernels | solver | block_fwd ms | "
           "solver_update a + b·h ms | h̄ | ratio | verdict |",
           "|---:|---|---|---|---:|---|---:|---:|---|"] + rows + [""]


def solver_iter_rows(recs, prices):
    """Section 7's table rows: per price configuration and solver."""
    out = []
    groups = {}
    for p in prices:
        sh = p.get("shape", {})
        key = (sh.get("d_model"), sh.get("precision"),
               sh.get("solver_kernels", "ops"))
        groups.setdefault(key, []).append(p)
    for (dm, prec, k), ps in sorted(groups.items(), key=lambda x: str(x[0])):
        fwd = [p["median_ms"] for p in ps if p.get("unit") == "block_fwd"]
        for solver in ("broyden", "anderson"):
            fit = next((p.get("fit") for p in ps if p.get("unit") ==
                        "solver_update" and p.get("solver") == solver and
                        p.get("fit")), None)
            if not fwd or not fit:
                continue
            h = mean_history(recs, dm, k, solver)
            hv = h if h is not None else 8.0
            ratio = (fwd[0] + fit["a_ms"] + fit["b_ms"] * hv) / fwd[0]
            v = verdict(ratio <= ITER_MAX) if dm in (128, 512) else "-"
            out.append(f"| {dm} | {prec} | {k} | {solver} | {fwd[0]:.4f} | "
                       f"{fit['a_ms']:.4f} + {fit['b_ms']:.5f}·h | "
                       f"{hv:.1f}{'' if h is not None else ' (no run)'} | "
                       f"{ratio:.2f} | {v} |")
    return out


def section_epilogue(rows):
    """Section 8 (nothing where no such log was made)."""
    epi = [r for r in rows
           if r["log"].startswith("bench-block-epi-") and "ratio" in r]
    if not epi:
        return []
    out = ["## 8. The bias and ReLU in cuBLASLt's epilogue (issue 45, item 4)", "",
           "`epilogue=fused` against `separate`: bench-block's `ratio block/gemm` "
           "with each (scripts/gpu-window.sh part `epilogue`, logs "
           "bench-block-epi-*); kept on by default only if faster.", "",
           "| log | precision | d_model | block/gemm |", "|---|---|---:|---:|"]
    for r in epi:
        out.append(f"| {r['log']} | {r['precision']} | {r['d_model']} | "
                   f"{r['ratio']:.3f} |")
    return out + [""]


def provenance(recs, rows):
    commits = sorted({str(R.get(r, "build.git_commit")) for _, r in recs
                      if not is_torch(r)})
    devices = sorted({str(R.get(r, "device.name")) for _, r in recs} |
                     {x["device"] for x in rows})
    dates = sorted(r.get("finished_at", "")[:10] for _, r in recs if r.get("finished_at"))
    torch = sorted({r["impl"] for _, r in recs if is_torch(r)})
    unhealthy = [f"{f}: {R.label(r)} {R.get(r, 'health.verdict')}" for f, r in recs
                 if R.get(r, "health.verdict") not in ("healthy", None)
                 and not is_torch(r)]
    out = [f"Records: {len(recs)} runs from deqbench commit {', '.join(commits)} on "
           f"{', '.join(devices)}, {dates[0] if dates else '?'} to "
           f"{dates[-1] if dates else '?'}; PyTorch: {', '.join(torch) or 'none'}; "
           f"{len(rows)} bench-block logs."]
    out.append("Runs not labelled healthy (deqbench's own health check): "
               + ("; ".join(unhealthy) if unhealthy else "none") + ".")
    return out + [""]


def generate(d):
    recs, rows = load(d), bench_block(d)
    out = ["# Issue 31's GPU targets, measured", "",
           "Generated by `plots/gpu_targets.py --write " + os.path.relpath(
               os.path.abspath(d), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) +
           "` from the records and logs in this folder; edit the generator, "
           "not this file.", ""]
    out += provenance(recs, rows)
    out += section_block(rows)
    out += section_per_iter(recs, rows)
    out += section_reads(recs)
    out += section_floor(recs, rows)
    out += section_torch(recs, 512, True, COMPILE_MIN,
                         "## 5. bf16 unroll at d_model 512 against PyTorch bf16 + torch.compile",
                         compile_note(d))
    out += section_torch(recs, 128, False, EAGER_MIN,
                         "## 6. bf16 unroll at d_model 128 against PyTorch eager bf16")
    out += section_graphs(recs)
    out += section_managed(recs)
    out += section_solver_iter(recs, load_prices(d))
    out += section_epilogue(rows)
    return "\n".join(out).rstrip() + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    ap.add_argument("--deqbench", default=os.environ.get("DEQBENCH"))
    ap.add_argument("dir", nargs="?", default="results/gpu/check")
    a = ap.parse_args()
    global R
    if a.deqbench:
        os.environ["DEQBENCH"] = a.deqbench
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import records as R
    if not os.path.isdir(a.dir):
        print(f"gpu_targets.py: no folder {a.dir}; give the folder of a GPU "
              "check's records", file=sys.stderr)
        return 2
    text = generate(a.dir)
    path = os.path.join(a.dir, "TARGETS.md")
    if a.write:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    elif a.check:
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if old != text:
            print(f"gpu_targets.py: {path} differs from what the records generate; "
                  f"run plots/gpu_targets.py --write {a.dir}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
