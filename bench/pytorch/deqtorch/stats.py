"""Record helpers: the stats object, solver aggregates (bench/records/record.c,
bench/run/run_record.c)."""
import math


def _num(x):
    return x if x is not None and math.isfinite(x) else None


def _quantile(s, q):
    """Linear interpolation between order statistics of sorted s."""
    pos = q * (len(s) - 1)
    i = int(math.floor(pos))
    j = min(i + 1, len(s) - 1)
    return s[i] + (pos - i) * (s[j] - s[i])


def stats(x):
    """{median, mean, p10, p90, min, max, p25, p75} of the list x (nulls
    if empty)."""
    keys = ("median", "mean", "p10", "p90", "min", "max", "p25", "p75")
    if not x:
        return dict.fromkeys(keys)
    s = sorted(x)
    vals = (_quantile(s, 0.5), sum(s) / len(s), _quantile(s, 0.1),
            _quantile(s, 0.9), s[0], s[-1], _quantile(s, 0.25),
            _quantile(s, 0.75))
    return {k: _num(v) for k, v in zip(keys, vals)}


def solve_json(sts):
    """solver.forward / backward of the per-step solver Stats list."""
    n = len(sts)
    if n == 0:
        return None
    it = [s.iters for s in sts]
    res = [s.residual for s in sts if math.isfinite(s.residual)]
    return {
        "steps": n,
        "iters_mean": sum(it) / n,
        "iters_max": float(max(it)),
        "residual_mean": sum(res) / len(res) if res else None,
        "residual_max": max(res) if res else None,
        "converged_fraction": sum(s.converged for s in sts) / n,
        "nonfinite_steps": sum(s.nonfinite for s in sts),
        "protect_break_steps": sum(s.protect_break for s in sts),
        "stall_break_steps": sum(s.stall_break for s in sts),
    }


def mean_or_none(x):
    return sum(x) / len(x) if x else None


def num(x):
    return _num(x)
