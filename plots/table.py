#!/usr/bin/python3
"""table.py — prints the reproduced ratios of results/README.md's table from
deqbench records, so filling the table is mechanical.

usage: python3 plots/table.py results/gc-vs-deq.jsonl results/gc-vs-deq-trellisnet.jsonl ...

Standard library only (any python3). For every run that has an unroll run in
its group (same config apart from the method keys, as `deqbench report`
groups them) it prints one markdown row: the published ratio where the DEQ
paper or the authors' response gives one, the reproduced ratios to unroll
(depth+solver peak, total peak, median step time), solver iterations, the
fraction of training steps whose forward and backward solve reached its
tolerance, valid perplexity and what differs from the published setting as far as the
records say (device, width, corpus, steps). Repeats are combined by the
median. Records with status other than "ok" are skipped with a note.
"""

import sys

import records as R

# Published ratios to the unrolled network, keyed by (model, method, k):
# (memory ratio, time ratio, source). Memory from the DEQ paper's Table 3
# (WikiText-103, memory without word embeddings): 70-layer TrellisNet
# 24.7 GB, DEQ-TrellisNet 3.3 GB; Transformer-XL medium (16 layers) 8.5 GB,
# DEQ-Transformer medium 2.7 GB. Checkpointing the 70-layer TrellisNet every
# 9 layers: 5.2 GB and about 1.6x slower than unrolled (the authors'
# response to the reviewers, not verified against a published text). Time
# of the DEQ: Table 4's training ratios against the deep baselines, 2.82x
# (Transformer) and 2.40x (TrellisNet).
PUBLISHED = {
    ("trellisnet", "checkpoint", 9): ("5.2/24.7 = 0.21×", "≈1.6×",
                                      "authors' response, unverified"),
    ("trellisnet", "deq", None): ("3.3/24.7 = 0.13×", "2.40×",
                                  "Tables 3 and 4"),
    ("transformer", "deq", None): ("2.7/8.5 = 0.32×", "2.82×",
                                   "Table 3 (medium), Table 4"),
}
PUBLISHED_SETTING = {
    "trellisnet": "WikiText-103, 70 layers, GPU (paper)",
    "transformer": "WikiText-103, Transformer-XL medium (16 layers, d=410), GPU (paper)",
}


def published(rec):
    model, m = R.get(rec, "config.model"), R.method(rec)
    key = (model, m, R.cfg(rec, "k") if m == "checkpoint" else None)
    return PUBLISHED.get(key, ("—", "—", "—"))


def ratio(a, b, decimals=3):
    if a is None or not b:
        return "—"
    return f"{a / b:.{decimals}f}×"


def pct(x):
    """A converged fraction as deqbench report prints it: one decimal, never
    rounded to 100.0% or 0.0% unless exact."""
    if x is None:
        return "—"
    p = 100 * x
    p = 99.9 if 99.9 < p < 100 else 0.1 if 0 < p < 0.1 else p
    return f"{p:.1f}%"


def differs(rec):
    """What differs from the published setting, as far as the record says."""
    dev = R.device_text(rec)
    model = R.get(rec, "config.model")
    parts = [dev,
             f"d_model={R.get(rec, 'config.d_model')}",
             f"B×T={R.get(rec, 'config.batch_size')}×{R.get(rec, 'config.seq_len')}",
             f"corpus={R.get(rec, 'config.corpus')}",
             f"{R.get(rec, 'config.steps')} steps"]
    if R.method(rec) != "deq":
        parts.insert(1, f"L={R.get(rec, 'config.layers')}")
    else:
        parts.insert(1, f"{R.cfg(rec, 'f_solver')} f_tol={R.fmt_g(R.cfg(rec, 'f_tol'))} "
                        f"f_max_iter={R.cfg(rec, 'f_max_iter')}")
    return f"ours: {', '.join(parts)}; paper: {PUBLISHED_SETTING.get(model, '?')}"


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        usage = next(l for l in __doc__.splitlines() if l.startswith("usage"))
        print(usage, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    try:
        ok, _ = R.load(argv, note=lambda s: print(s, file=sys.stderr))
    except (OSError, ValueError) as e:
        print(f"table.py: {e}", file=sys.stderr)
        return 2
    # repeats together, then the unroll run of each group
    runs, order = {}, []
    for _, _, rec in ok:
        k = R.run_key(rec)
        if k not in runs:
            runs[k] = []
            order.append(k)
        runs[k].append(rec)

    def med(k, path):
        return R.median([R.num(r, path) for r in runs[k]])

    base = {}
    for k in order:
        rec = runs[k][0]
        if R.method(rec) == "unroll":
            base.setdefault(R.group_key(rec), k)
    print("| run | memory × unrolled, published | depth+solver peak × unroll "
          "| total peak × unroll | time × unrolled, published | step time × unroll "
          "| fwd / bwd iters | fwd / bwd converged | valid ppl | source | what differs |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    n = 0
    for k in order:
        rec = runs[k][0]
        b = base.get(R.group_key(rec))
        if b is None or b == k:
            continue
        pub_mem, pub_time, src = published(rec)
        fit, bit = med(k, "solver.forward.iters_mean"), med(k, "solver.backward.iters_mean")
        iters = "—" if fit is None else f"{fit:.1f} / {bit:.1f}" if bit is not None else f"{fit:.1f}"
        fcv = med(k, "solver.forward.converged_fraction")
        bcv = med(k, "solver.backward.converged_fraction")
        conv = "—" if fcv is None else f"{pct(fcv)} / {pct(bcv)}"
        ppl = med(k, "quality.valid_ppl")
        print(f"| {R.get(rec, 'config.model')} {R.label(rec)}"
              f" (unroll L={R.cfg(runs[b][0], 'layers')}) "
              f"| {pub_mem} "
              f"| {ratio(med(k, 'memory.peak_depth_solver_bytes'), med(b, 'memory.peak_depth_solver_bytes'))} "
              f"| {ratio(med(k, 'memory.peak_total_bytes'), med(b, 'memory.peak_total_bytes'))} "
              f"| {pub_time} "
              f"| {ratio(med(k, 'timing.step_ms.median'), med(b, 'timing.step_ms.median'), 2)} "
              f"| {iters} | {conv} | {'—' if ppl is None else f'{ppl:.1f}'} | {src} | {differs(rec)} |")
        n += 1
    if n == 0:
        print("note: no run with an unroll run in its group; nothing to compare",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
