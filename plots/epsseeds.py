"""epsseeds.py — per-seed facts of the ε suites that the figures
(plots/fig_eps.py) and the findings (plots/findings.py) both state, from
the records alone and without matplotlib: each DEQ solve's per-step
converged flags, a seed whose forward convergence collapsed late in
training, the geometric mean over seeds with its 95% t interval, and
whether the perplexity differs across ε by more than the seeds do
(one-way ANOVA on the seeds' valid losses: log perplexity)."""
import math


class R:
    """The few readers of records.py this module needs, without importing
    it: records.py reads deqbench's key table when imported, and
    plots/findings.py (which imports this module) must run wherever its
    --deqbench points."""

    @staticmethod
    def get(obj, path, default=None):
        cur = obj
        for key in path.split("."):
            if not isinstance(cur, dict) or cur.get(key) is None:
                return default
            cur = cur[key]
        return cur

    @staticmethod
    def num(obj, path):
        x = R.get(obj, path)
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return None
        return float(x) if math.isfinite(x) else None

    @staticmethod
    def cfg(rec, key, default=None):
        v = R.get(rec, "method." + key)
        return R.get(rec, "config." + key, default) if v is None else v

    @staticmethod
    def method(rec):
        return R.get(rec, "config.method", "?")

    @staticmethod
    def kind(rec):
        return rec.get("kind") or "train"

# A DEQ seed whose forward solves reached their tolerance in less than
# this share of its steps, overall or in the last tenth, lost convergence:
# health's bar for `unconverged` (results/SCHEMA.md §health). The seeds
# below it are named in results/README.md's findings; in the records of
# dbc76c1, eps-train's ε = 1e-3 seed 2: 58% overall, 12% in the last tenth.
CONVERGED_BAR = 0.9
TAIL = 0.1  # the last tenth of the training steps, as health's *_last


def converged_flags(rec, side):
    """Per-step converged flags of one solve ("fwd" or "bwd") from the
    trace, and whether they were derived: trace.<side>_converged where the
    record has it, else residual <= tolerance, the solvers' definition of
    converged when records without the flags were written (SCHEMA.md)."""
    flags = R.get(rec, f"trace.{side}_converged")
    if isinstance(flags, list):
        return [bool(f) for f in flags], False
    tol = R.cfg(rec, "f_tol" if side == "fwd" else "b_tol")
    res = R.get(rec, f"trace.{side}_residual", [])
    return [isinstance(x, (int, float)) and tol is not None and x <= tol
            for x in res], True


def converged_split(rec, side="fwd"):
    """(all steps, last tenth) converged fractions of one solve of a DEQ
    training record from its trace; (the record's
    solver.<solve>.converged_fraction, None) without a trace; (None, None)
    for other records. Without a trace: health.<side>_converged and
    _last where the record has them, else solver's fraction alone."""
    if R.method(rec) != "deq" or R.kind(rec) != "train":
        return None, None
    flags, _ = converged_flags(rec, side)
    if not flags:
        every = R.num(rec, f"health.{side}_converged")
        if every is not None:
            return every, R.num(rec, f"health.{side}_converged_last")
        return R.num(rec, f"solver.{'forward' if side == 'fwd' else 'backward'}"
                     ".converged_fraction"), None
    tail = flags[-max(1, round(TAIL * len(flags))):]
    return sum(flags) / len(flags), sum(tail) / len(tail)


def labels(rec):
    """What the record's health says is wrong (results/SCHEMA.md §health):
    its verdict unless healthy, "unconverged", then its flags."""
    h = rec.get("health") or {}
    out = [h["verdict"]] if h.get("verdict") not in (None, "healthy") else []
    if h.get("unconverged"):
        out.append("unconverged")
    out += [f for f in h.get("flags") or [] if isinstance(f, str) and f not in out]
    return out


def lost_convergence(rec):
    """None, or {"seed", "all", "last", "labels"} for a DEQ training record
    whose forward solves converged in less than CONVERGED_BAR of its steps
    (all) or of their last tenth (last; None when unknown), or whose health
    says unconverged (labels: health's, possibly empty: older records
    passed such a run as healthy)."""
    every, last = converged_split(rec, "fwd")
    bad = labels(rec)
    low = [x for x in (every, last) if x is not None and x < CONVERGED_BAR]
    if not (low or "unconverged" in bad):
        return None
    return {"seed": R.cfg(rec, "seed"), "all": every, "last": last, "labels": bad}


def gm_interval(xs, level=0.95):
    """(geometric mean, lo, hi) of positive values with the t interval of
    their mean log (lo and hi None below 2 values); (None,)*3 for none.
    For perplexities this is exp of the mean loss and its interval."""
    xs = [x for x in xs if isinstance(x, (int, float)) and x > 0]
    if not xs:
        return None, None, None
    lv = [math.log(x) for x in xs]
    m = sum(lv) / len(lv)
    if len(lv) < 2:
        return math.exp(m), None, None
    from scipy import stats
    se = math.sqrt(sum((x - m) ** 2 for x in lv) / (len(lv) - 1) / len(lv))
    t = stats.t.ppf(0.5 + level / 2, len(lv) - 1)
    return math.exp(m), math.exp(m - t * se), math.exp(m + t * se)


def anova(groups):
    """One-way ANOVA of per-seed values in groups (lists, one per ε): p of
    the F test that their means are equal, or None below 2 groups of 2.
    A p above 0.05 says the ε effect is not told apart from seed noise."""
    gs = [g for g in groups if len(g) >= 2]
    if len(gs) < 2:
        return None
    from scipy import stats
    return float(stats.f_oneway(*gs).pvalue)


def by_eps(recs, path="quality.valid_loss"):
    """{f_tol: [value of each seed]} of the DEQ training records."""
    out = {}
    for r in recs:
        v = R.num(r, path)
        if R.method(r) == "deq" and R.kind(r) == "train" and v is not None:
            out.setdefault(R.cfg(r, "f_tol"), []).append(v)
    return out
