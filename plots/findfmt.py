"""findfmt.py — how plots/findings.py writes a figure of a `deqbench
report --format json` row: numbers, intervals, perplexity, converged
fractions, health labels, and the line of a file not committed yet."""
import math


def num(x, digits=2):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.{digits}f}"


def ci(o, key="gmean", digits=2):
    """'x [lo, hi]' of an interval or ratio object; '1' on unroll's own
    ratio (report: no interval of a row against itself); 'x (1 run)' or
    'x (n=2: no interval)' where report gives none for too few runs."""
    if not o or o.get(key) is None:
        return "–"
    if o.get("self"):
        return "1"
    s = num(o[key], digits)
    if o.get("lo") is not None and o.get("hi") is not None:
        return f"{s} [{num(o['lo'], digits)}, {num(o['hi'], digits)}]"
    n = min(k for k in (o.get("n"), o.get("n_unroll"), 3) if k is not None)
    return s + (" (1 run)" if n == 1 else f" (n={n}: no interval)" if n == 2 else "")


def ppl(row, key="valid_ppl"):
    p = row.get(key) or {"mean": None}
    if p["mean"] is None:
        return "–"
    if p["sd"] is None:
        return num(p["mean"])
    return f"{num(p['mean'])} ± {num(p['sd'])}"


def pct(x):
    if x is None:
        return "–"
    p = 100 * x
    if 99.9 < p < 100:
        p = 99.9
    return f"{p:.1f}%"


def converged(row):
    if row["fwd_converged"] is None and row["bwd_converged"] is None:
        return "–"
    return f"{pct(row['fwd_converged'])} / {pct(row['bwd_converged'])}"


def health(row):
    """The row's health labels; a DEQ row whose forward solves converged in
    less than 95% of its steps is labelled even above the record's 90%
    (the bar a committed DEQ row must clear)."""
    train, timing = split_labels(row)
    fc = row.get("fwd_converged")
    if fc is not None and fc < 0.95 and not any(l.startswith("unconverged") for l in train):
        train.append(f"fwd converged {pct(fc)} < 95%")
    parts = (["⚠ " + ", ".join(train)] if train else []) + \
        (["step times " + ", ".join(timing)] if timing else [])
    return "; ".join(parts) if parts else "healthy"


def split_labels(row):
    """The row's health labels as (training, timing): `noisy` and `beside`
    (runs that shared their host with another run of ours) are about the
    step-time measurement, the rest about whether the runs trained."""
    labels = list(row["health"]["labels"])
    timing = [l for l in labels if l.startswith(("noisy", "beside"))]
    return [l for l in labels if l not in timing], timing



def pending(machine, suite):
    how = ("scripts/gpu-window.sh" if suite.endswith("/answer")
           else f"scripts/reproduce.sh {machine}")
    return (f"| {machine.upper()} | *pending: `results/{machine}/{suite}.jsonl` "
            f"is not committed yet (`{how}`)* |")


# the answer suite (bench/suites/answer-gpu.json) has three seeds; a row
# with fewer runs comes from windows that have not finished it


def scale(un):
    """The scale caveat of a headline bullet, from its unroll row's config:
    the model, the batch and the training, and the perplexity it reached,
    so that a reader takes the ratios, not the perplexities, from a run
    far smaller than the paper's WikiText-103 models."""
    c = un.get("config") or {}
    return (f" Scale: d_model {c.get('d_model')}, {c.get('layers')} layers, batch "
            f"{c.get('batch_size')}×{c.get('seq_len')}, {c.get('steps')} steps on "
            f"{c.get('corpus')}, unroll's valid perplexity {ppl(un)}: a small model "
            "trained briefly, not the paper's WikiText-103 runs; read the ratios, not "
            "the perplexities.")
