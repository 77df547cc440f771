"""figbase.py — what every figure of plots/plot.py shares: matplotlib set
up for deterministic files, titles and labels (check_labels refuses a
figure without them), saving as PNG and SVG, records combined into runs
(seeds and repeats together) with their health flags, series labels and
colours. Run under Debian's /usr/bin/python3 (python3-matplotlib)."""
import json
import math
import sys

import records as R

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # pragma: no cover - depends on the interpreter
    sys.stderr.write(
        "plot.py: matplotlib not found: run it with Debian's /usr/bin/python3 "
        "(package python3-matplotlib, installed by scripts/setup.sh)\n")
    sys.exit(3)

# Deterministic SVG: fixed id salt, no creation date in either format.
matplotlib.rcParams["svg.hashsalt"] = "deqbench"
matplotlib.rcParams["font.size"] = 8
METADATA = {"svg": {"Date": None}, "png": {"Software": None}}

# Keys variant() already shows; other method keys that vary inside a group
# are appended to the series label.
SHOWN_KEYS = {"method", "k", "slots", "f_solver", "b_solver", "f_history",
              "b_history", "anderson_m", "b_mode"}


def check_labels(fig, name):
    """A figure a reader of a paper can read alone: a title, and every
    panel that shows data labelled on both axes. ValueError otherwise (so
    the plots test fails on a figure that lacks them)."""
    if not (fig._suptitle and fig._suptitle.get_text().strip()):
        raise ValueError(f"figure {name} has no title")
    for ax in fig.axes:
        if not ax.has_data() or not ax.get_visible():
            continue
        # a panel sharing its x axis with a labelled one (stacked panels)
        # is labelled by it
        xs = [a.get_xlabel() for a in ax.get_shared_x_axes().get_siblings(ax)]
        for axis, label in (("x", " ".join(xs)), ("y", ax.get_ylabel())):
            if not label.strip():
                raise ValueError(f"figure {name}: a panel ('{ax.get_title()}') "
                                 f"has no {axis} label")


def save(fig, prefix, name, written):
    check_labels(fig, name)
    for ext in ("png", "svg"):
        path = f"{prefix}.{name}.{ext}"
        fig.savefig(path, dpi=150, bbox_inches="tight", metadata=METADATA[ext])
        written.append(path)
    plt.close(fig)


def title(fig, what, recs):
    fig.suptitle(f"{what}\n{R.describe(recs)}", fontsize=9)


def finish(fig, what, recs, prefix, name, written):
    """Titles the figure (WHAT over the records' description) and saves it
    as PREFIX.NAME.{png,svg}; True, for a figure function to return."""
    title(fig, what, recs)
    save(fig, prefix, name, written)
    return True


def panel(ax, xlabel, ylabel, what):
    """Labels one panel of a line plot and grids it (major and minor
    ticks, for log axes)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(what)
    ax.grid(True, which="both", alpha=0.3)


def legend_right(ax, fontsize):
    """The legend of a figure's last panel, outside it on the right."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=fontsize)


# ---- grouping ----


class Run:
    """One configuration: its repeats' records and medians of what the
    figures need."""

    def __init__(self, recs):
        self.recs = recs
        self.rec = recs[0]
        med = lambda p: R.median([R.num(r, p) for r in recs])
        self.step_ms = med("timing.step_ms.median")
        # each run's mean step time (what a user pays): the unit of
        # replication of the time figures, as report's step_mean_ms
        self.step_means = [x for x in (R.num(r, "timing.step_ms.mean") for r in recs)
                           if x is not None and x > 0]
        self.step_p10 = med("timing.step_ms.p10")
        self.step_p90 = med("timing.step_ms.p90")
        self.ds = med("memory.peak_depth_solver_bytes")
        self.tot = med("memory.peak_total_bytes")
        self.ppl = med("quality.valid_ppl")
        self.inf_ms = med("inference.step_ms.median")
        self.inf_evals = med("inference.forward_evals_per_batch")
        self.fit = med("solver.forward.iters_mean")
        self.bit = med("solver.backward.iters_mean")
        self.group = R.group_key(self.rec)
        self.series = None  # set by label_series
        self.flags = health_flags(recs)


def gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def ratio_interval(xs, ys, level=0.95):
    """(ratio, lo, hi): the ratio of the geometric means of xs over ys and
    its Welch t interval on logs, report's estimator (bench/report/stats.h
    stats_log_ratio_interval); lo and hi None with fewer than 2 values a
    side. scipy (python3-scipy) gives the t quantile."""
    if not xs or not ys:
        return None, None, None
    r = gmean(xs) / gmean(ys)
    if len(xs) < 2 or len(ys) < 2:
        return r, None, None
    from scipy import stats

    def mv(v):
        lv = [math.log(x) for x in v]
        m = sum(lv) / len(lv)
        return m, sum((x - m) ** 2 for x in lv) / (len(lv) - 1) / len(lv)

    (ma, va), (mb, vb) = mv(xs), mv(ys)
    se = math.sqrt(va + vb)
    if se == 0:
        return r, r, r
    df = (va + vb) ** 2 / (va ** 2 / (len(xs) - 1) + vb ** 2 / (len(ys) - 1))
    t = stats.t.ppf(0.5 + level / 2, df)
    return r, math.exp(ma - mb - t * se), math.exp(ma - mb + t * se)


def health_flags(recs):
    """What the records' health says is wrong (results/SCHEMA.md §health):
    "unstable", "diverged", "unconverged", sorted; empty when every record
    trained cleanly or has no health (older records, eval records)."""
    out = set()
    for r in recs:
        h = r.get("health") or {}
        if h.get("verdict") in ("unstable", "diverged"):
            out.add(h["verdict"])
        if h.get("unconverged"):
            out.add("unconverged")
    return sorted(out)


def mark_flagged(ax, runs, xs, ys):
    """Red rings around the points of runs whose health is flagged (and a
    legend entry once), so an unhealthy or unconverged point never reads
    as a clean one."""
    bad = [(x, y) for r, x, y in zip(runs, xs, ys) if r.flags]
    if not bad:
        return
    have = any(h.get_label() == "flagged: unstable, diverged or unconverged"
               for h in ax.collections)
    ax.scatter([p[0] for p in bad], [p[1] for p in bad], s=140, facecolors="none",
               edgecolors="red", lw=1.2,
               label=None if have else "flagged: unstable, diverged or unconverged")


def runs_of(recs):
    """Records combined into runs (repeats together), in file order."""
    by, order = {}, []
    for r in recs:
        k = R.run_key(r)
        if k not in by:
            by[k] = []
            order.append(k)
        by[k].append(r)
    return [Run(by[k]) for k in order]


def label_series(runs):
    """Series label of each run: its method variant plus the method keys
    that differ between runs of one group and of one method but that
    variant() does not show (f_tol, f_max_iter, ...)."""
    extra = set()
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            if a.group != b.group or R.method(a.rec) != R.method(b.rec):
                continue
            ca, cb = a.rec["config"], b.rec["config"]
            for k in R.METHOD_KEYS - SHOWN_KEYS:
                if ca.get(k) != cb.get(k):
                    extra.add(k)
    for run in runs:
        s = R.variant(run.rec)
        if R.method(run.rec) == "deq":
            for k in sorted(extra):
                v = run.rec["config"].get(k)
                s += f" {k}={R.fmt_g(v) if isinstance(v, float) else v}"
        run.series = s
    # checkpoint k=0 resolved to one interval in every run: say which
    for s in series_order(runs):
        ks = {R.cfg(r.rec, "k") for r in runs if r.series == s}
        if s.endswith("k=round(√L)") and len(ks) == 1:
            for r in runs:
                if r.series == s:
                    r.series = f"{s}={next(iter(ks))}"


def group_labels(runs):
    """Text of each group: the non-method keys that differ between groups
    ("layers=16"), or "all runs" when there is one group."""
    groups = list(dict.fromkeys(r.group for r in runs))
    if not groups:
        return groups, {}
    if len(groups) == 1:
        return groups, {groups[0]: "all runs"}
    cfgs = {g: json.loads(g) for g in groups}
    keys = [k for k in cfgs[groups[0]]
            if any(cfgs[g].get(k) != cfgs[groups[0]].get(k) for g in groups)]
    # deq rows of the depth suite carry layers = their iteration cap
    return groups, {g: " ".join(f"{k}={cfgs[g].get(k)}" for k in keys) for g in groups}


def series_order(runs):
    return list(dict.fromkeys(r.series for r in runs))


def colours(names):
    cmap = plt.get_cmap("tab10")
    return {n: cmap(i % 10) for i, n in enumerate(names)}


# ---- figures ----
