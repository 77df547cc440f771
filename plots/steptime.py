"""steptime.py — which step time the findings quote for a row of `deqbench
report --format json` (bench/report/report.h), and where it comes from.

A user pays a run's mean step time (timing.step_ms.mean), and the run is
the unit of replication: the figure is report's step_mean_ms
(the geometric mean over runs, its 95% t interval) and step_mean_x_unroll
(the ratio of those geometric means, its Welch interval). Where the row's
runs shared the host with another run of ours (report's `beside` label:
two lanes of reproduce.sh) and report priced the row's work with price
records measured alone (`--price`, results/KIND/prices.jsonl), the priced
figures stand instead, marked "(priced)": work × price, which no lane
beside it could slow down.
"""
import os


def prices_of(path):
    """The price records beside a records file (results/KIND/prices.jsonl),
    or None."""
    p = os.path.join(os.path.dirname(path), "prices.jsonl")
    return p if os.path.exists(p) and os.path.getsize(p) > 0 else None


def report_args(path):
    """report's extra arguments for path: --price PRICES where there are
    price records beside it."""
    p = prices_of(path)
    return ["--price", p] if p else []


def beside(row):
    return any(l.startswith("beside") for l in row["health"]["labels"])


def priced(row):
    """Whether the row's priced figures stand in for its measured ones:
    its runs ran beside another, and every unit of its work was priced."""
    p = row.get("priced")
    return bool(beside(row) and p and p.get("matched") and not p.get("note"))


def step(row):
    """(interval object with `gmean`, "priced" or "measured")."""
    if priced(row):
        return row["priced"]["step_ms"], "priced"
    return row["step_mean_ms"], "measured"


def ratio(row):
    """(ratio object with `ratio`, lo, hi, "priced" or "measured"): × unroll."""
    if priced(row):
        return row["priced"]["x_unroll"], "priced"
    return row["step_mean_x_unroll"], "measured"


def value(row):
    """The step time in ms (the geometric mean over runs), or None."""
    o, _ = step(row)
    return o.get("gmean") if o else None


def tag(source):
    return " (priced)" if source == "priced" else ""
