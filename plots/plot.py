#!/usr/bin/python3
"""plot.py — draws the reviewer-question figures from deqbench records.

usage: /usr/bin/python3 plots/plot.py [--out-dir DIR] [--figures A,B] FILE.jsonl ...
       (or plots/plot.sh FILE.jsonl ...)

Run it with Debian's /usr/bin/python3: matplotlib comes from the
python3-matplotlib package that scripts/setup.sh installs, and a python3
earlier on PATH (pyenv, a venv) usually lacks it.

For each records file (results/SCHEMA.md) it draws every figure the records
support, as PNG and SVG beside the file (or in --out-dir), named
<file stem>.<figure>.{png,svg}:

  memory-vs-depth  peak depth+solver and total memory against depth, log-log,
                   one line per method (depth = L for unroll and checkpoint,
                   f_max_iter for deq); needs two depths of one method
  time-ratio       mean step time relative to the unroll row of the same
                   group (config apart from the method keys, as deqbench
                   report groups): each run's mean step time as a dot, the
                   ratio of geometric means over runs as the bar and its 95%
                   Welch t interval on logs as whiskers (report's
                   step_mean_x_unroll); where the findings quote the priced
                   figure instead (plots/steptime.py: runs beside another
                   lane, prices.jsonl beside the file), report's priced one,
                   marked "(priced)": each run's priced step time, the
                   priced ratio and its interval (priced.step_ms,
                   priced.x_unroll of deqbench report --price; $DEQBENCH or
                   build/bench/deqbench, the figure saying so without it);
                   needs an unroll row and another method
  step-trace       step time and block applications (forwards + VJPs; a
                   DEQ's follow its solver iterations) against training
                   step, a trailing median: each configuration's seeds
                   thin and their per-step median thick (records run with
                   trace=true)
  memory-ratio     depth+solver and total peak relative to unroll, same groups
  eps-sweep        deq tolerance ε = f_tol (plots/fig_eps.py) against mean
                   step time × unroll, valid and test perplexity and block
                   evaluations per step: each seed a dot, the geometric mean
                   over seeds a marker with its 95% t interval (× unroll:
                   report's ratio of geometric means, Welch); the block
                   evaluations per step along training per ε (each seed
                   thin, the median over seeds thick; trace=true); the
                   estimates of time against perplexity with both
                   intervals; seeds that lost convergence or that health
                   flags ringed red; unroll as a dotted line and a 95%
                   band; needs two f_tol values
  residuals        residual after each solver iteration of the last training
                   step, forward and backward (trace.last_fwd_residual_trace,
                   trace.last_bwd_residual_trace; records run with trace=true)
  eps-infer        records of deqbench eval (kind "eval"; plots/fig_eps.py):
                   ε = f_tol against inference time per batch, valid
                   perplexity and forward evaluations per batch, each
                   trained seed a dot, the geometric mean a marker with its
                   95% interval, one line per cap f_max_iter, the unrolled
                   depth of matching perplexity a grey star; and the answer:
                   inference time against perplexity for unroll at every
                   depth and each DEQ ε, joined by an arrow to the
                   shallowest depth as good (deqbench report's
                   matched_unroll), each ε's depth and inference × unroll
                   in a table in the panel; needs two f_tol values or two
                   unroll depths
  budget           step time (median) against total device peak for every
                   method and parameter, circles without and triangles with
                   head_chunk, and the Pareto front; needs three methods
  convergence      per deq run, the final residual of the forward and the
                   backward solve at every training step and the fraction of
                   steps whose solve reached its tolerance over a trailing
                   window (trace.fwd_residual, trace.fwd_converged and the bwd
                   arrays; records without the converged flags use residual
                   <= f_tol / b_tol); records run with trace=true

Records with status other than "ok" are skipped with a note; unknown fields
are ignored. Repeats (equal config) are combined by the median. Output names
and SVG ids are deterministic, so rerunning on the same records rewrites the
same files. Exit status: 0, or 2 for a missing or malformed file.
"""

import argparse
import os
import sys

import records as R
import steptime
from figbase import (colours, finish, gmean, group_labels, label_series,
                     legend_right, mark_flagged, panel, plt, ratio_interval,
                     runs_of, series_order)
from fig_eps import fig_eps, fig_eps_infer, report_rows
from fig_traces import fig_convergence, fig_residuals, fig_step_trace


def fig_memory_vs_depth(runs, recs, prefix, written):
    series = series_order(runs)

    def points(s, attr):
        return sorted((R.depth_of(r.rec), getattr(r, attr)) for r in runs
                      if r.series == s and R.depth_of(r.rec) and getattr(r, attr))

    if not any(len(points(s, "tot")) >= 2 for s in series):
        return False
    col = colours(series)
    fig, axes = plt.subplots(1, 2, layout="constrained", figsize=(11, 4.2))
    for ax, attr, what in ((axes[0], "ds", "depth + solver peak (the paper's figure: "
                                           "without embeddings)"),
                           (axes[1], "tot", "total peak (all tracked device memory)")):
        for s in series:
            p = points(s, attr)
            if p:
                ax.plot([d for d, _ in p], [v / R.MIB for _, v in p], marker="o", ms=3,
                        color=col[s], label=s)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        panel(ax, "depth: layers L (unroll, checkpoint) / iteration cap f_max_iter (deq)",
              "peak memory (MiB = 2²⁰ bytes)", what)
    axes[1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=7)
    return finish(fig, "Peak training memory against depth (tracked allocator, exact)",
                  recs, prefix, "memory-vs-depth", written)


def ratio_table(runs):
    """(groups, labels, {(group, series): run}, {group: unroll run}) for the
    groups that have an unroll run and another method."""
    groups, labels = group_labels(runs)
    base = {}
    for g in groups:
        u = [r for r in runs if r.group == g and R.method(r.rec) == "unroll"]
        if u and any(r.group == g and R.method(r.rec) != "unroll" for r in runs):
            base[g] = u[0]
    groups = [g for g in groups if g in base]
    cell = {(r.group, r.series): r for r in runs if r.group in base}
    return groups, labels, cell, base


def fit_labels(ax, texts):
    """Raises the top of a linear y axis until every text (a bar's label
    above it, in offset points) lies inside the axes, so no label reaches
    the panel's title."""
    fig = ax.figure
    for _ in range(4):  # each raise shrinks the labels' share: settles fast
        fig.canvas.draw()  # the layout, then the texts' extents
        box = ax.get_window_extent()
        over = max((t.get_window_extent().y1 for t in texts), default=0) - box.y1
        if over <= -6:
            return
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi + (over + 10) * (hi - lo) / max(1.0, box.height - over - 10))


def bars(ax, groups, labels, cell, series, value, err=None, text=None, points=None):
    """Grouped bars: x = groups, one colour per series; value(g, run) is the
    bar height, err(g, run) its (low, high) ends, text(g, run, height) the
    annotation above it, points(g, run) values drawn as dots on the bar
    (each seed's); the y axis leaves room for the annotations."""
    col = colours(series)
    present = [s for s in series if any((g, s) in cell for g in groups)]
    w = 0.8 / max(1, len(present))
    texts = []
    for i, s in enumerate(present):
        xs, ys, lo, hi, notes, flagged, tops = [], [], [], [], [], [], []
        for j, g in enumerate(groups):
            r = cell.get((g, s))
            v = value(g, r) if r else None
            if v is None:
                continue
            xs.append(j + (i - (len(present) - 1) / 2) * w)
            ys.append(v)
            notes.append(("⚠ " if r.flags else "") + (text(g, r, v) if text else f"{v:.3g}×"))
            flagged.append(bool(r.flags))
            tops.append(v)
            if err:
                a, b = err(g, r)
                lo.append(v - a if a is not None else 0)
                hi.append(b - v if b is not None else 0)
                tops[-1] = max(v, b if b is not None else v)
            for k, p in enumerate(points(g, r) if points else []):
                tops[-1] = max(tops[-1], p)
                ax.plot(xs[-1] + (k - 1) * w / 8, p, "o", ms=2.5, mfc="black",
                        mec="white", mew=0.4, zorder=3,
                        label="each run" if not any(
                            h.get_label() == "each run" for h in ax.lines) else None)
        if not xs:
            continue
        bc = ax.bar(xs, ys, w, color=col[s], label=s,
                    yerr=[lo, hi] if err else None, capsize=2, ecolor="0.3")
        # a flagged run's bar: hatched, red edge, ⚠ in its note
        for patch, f in zip(bc.patches, flagged):
            if f:
                patch.set_hatch("///")
                patch.set_edgecolor("red")
        for x, y, t in zip(xs, tops, notes):
            texts.append(ax.annotate(t, (x, y), textcoords="offset points",
                                     xytext=(0, 2), ha="center", fontsize=6))
    ax.axhline(1.0, color="0.4", lw=0.8, ls="--")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([labels[g] for g in groups], rotation=20 if len(groups) > 4 else 0)
    ax.grid(True, axis="y", alpha=0.3)
    fit_labels(ax, texts)


def priced_rows(recs, prices):
    """({run key: report row} of the rows whose priced figures the
    findings quote (steptime.priced: their runs ran beside another lane
    and prices measured alone priced all their work), a note for the
    figure or None). deqbench report --price PRICES gives the rows (as
    fig_eps_infer's, $DEQBENCH or build/bench/deqbench); without price
    records there is nothing to price, without the report the note says
    that measured times are drawn."""
    if not prices:
        return {}, None
    rows = report_rows(recs, ["--price", prices])
    if not rows:
        return {}, ("no deqbench report: each run's measured step time drawn, where "
                    "the findings may quote priced ones")
    return {R.run_key({"config": r["config"], "kind": r.get("kind")}): r
            for r in rows if steptime.priced(r)}, None


class TimeCell:
    """One bar of the time-ratio figure: the ratio to the group's unroll
    (est, lo, hi), each run's value as a ratio (dots), the step time in ms
    and the runs; priced where report's row is (steptime.priced), else
    from each run's measured mean step time."""

    def __init__(self, r, base, row=None):
        self.priced = row is not None
        if self.priced:  # report's priced step time and its x_unroll interval
            st, x = row["priced"]["step_ms"], row["priced"]["x_unroll"]
            runs = [v for v in st.get("per_run") or [] if v and v > 0]
            self.est, self.lo, self.hi = x["ratio"], x.get("lo"), x.get("hi")
            self.ms, self.n = st["gmean"], len(runs) or st.get("n") or 0
            # each run over the unroll's priced geometric mean (ratio = gm / that)
            u = gmean(runs) / self.est if runs and self.est else None
        else:
            runs, u = r.step_means, gmean(base.step_means)
            self.est, self.lo, self.hi = (1.0, None, None) if r is base else \
                ratio_interval(r.step_means, base.step_means)
            self.ms, self.n = gmean(r.step_means), len(r.step_means)
        self.points = [m / u for m in runs] if u and len(runs) > 1 else []


def time_cells(runs, rows):
    """(groups, labels, cell, {(group, series): TimeCell}) of the time-ratio
    figure; rows: priced_rows' {run key: report row}."""
    groups, labels, cell, base = ratio_table(runs)
    tc = {}
    for (g, s), r in cell.items():
        tc[(g, s)] = TimeCell(r, base[g], rows.get(R.run_key(r.rec)))
        if tc[(g, s)].est is None:  # report gave no ratio: the measured one
            tc[(g, s)] = TimeCell(r, base[g])
    return groups, labels, cell, tc


def fig_time_ratio(runs, recs, prefix, written, prices=None):
    """Each run's mean step time over unroll's; priced (steptime.py) where
    the findings quote the priced figure: prices, the price records beside
    the records file (steptime.prices_of)."""
    if not ratio_table(runs)[0]:
        return False
    rows, note = priced_rows(recs, prices)
    groups, labels, cell, tc = time_cells(runs, rows)
    series = series_order(runs)
    fig, ax = plt.subplots(layout="constrained",
                           figsize=(min(14, max(6, 0.6 * len(groups) * len(series))), 4))
    crowded = len(groups) * len(series) > 8
    priced = any(c.priced for c in tc.values())
    every = all(c.priced for c in tc.values())  # then the subtitle says it once

    def text(g, r, v):
        c = tc[(g, r.series)]
        if crowded:  # the ratio alone, or the labels overlap
            return f"{v:.2f}" + ("*" if c.priced and not every else "")
        return (f"{v:.2f}×\n" + ("(priced)\n" if c.priced else "") +
                f"{c.ms:.3g} ms\n{c.n} run{'s' if c.n != 1 else ''}")

    bars(ax, groups, labels, cell, series, lambda g, r: tc[(g, r.series)].est,
         lambda g, r: (tc[(g, r.series)].lo, tc[(g, r.series)].hi), text,
         lambda g, r: tc[(g, r.series)].points)
    ax.set_ylabel("mean step time / unroll's (×)" + (", priced where marked" if priced else ""))
    sub = ("bar: ratio of geometric means over runs; whiskers: its 95% Welch t interval "
           "(none below 2 runs); dots: each run")
    if priced:
        sub += ("\n" + ("every bar priced" if every else "(priced)" + (", *" if crowded else ""))
                + ": runs beside another lane, "
                "drawn as report's priced figure (their work × prices measured alone), "
                "as the findings quote it")
    ax.set_title(sub + (f"\n{note}" if note else ""), fontsize=7)
    ax.set_xlabel("group (config apart from the method keys)")
    legend_right(ax, 7)
    what = ("each run's mean step time, priced where it ran beside another lane"
            if priced else "each run's mean step time")
    return finish(fig, f"Training step time relative to unrolled backprop ({what}; "
                       "the run is the unit)", recs, prefix, "time-ratio", written)


def fig_memory_ratio(runs, recs, prefix, written):
    groups, labels, cell, base = ratio_table(runs)
    if not groups:
        return False
    series = series_order(runs)
    fig, axes = plt.subplots(1, 2, layout="constrained",
                             figsize=(min(16, max(10, 1.1 * len(groups) * len(series))), 4))
    for ax, attr, what in ((axes[0], "ds", "depth + solver peak"),
                           (axes[1], "tot", "total peak")):
        def value(g, r, attr=attr):
            b = getattr(base[g], attr)
            v = getattr(r, attr)
            return v / b if v is not None and b else None

        bars(ax, groups, labels, cell, series, value,
             text=lambda g, r, v, attr=attr: f"{v:.3g}×\n{getattr(r, attr) / R.MIB:.3g} MiB")
        ax.set_ylabel(f"{what} / unroll's (×)")
        ax.set_xlabel("group (config apart from the method keys)")
        ax.set_title(what)
    legend_right(axes[1], 7)
    return finish(fig, "Peak training memory relative to unrolled backprop", recs, prefix,
                  "memory-ratio", written)


def pareto(points):
    """Indices of the points no other point beats in both coordinates
    (lower is better in each; a tie in both keeps both)."""
    keep = []
    for i, (x, y) in enumerate(points):
        if not any((a <= x and b <= y) and (a < x or b < y) for a, b in points):
            keep.append(i)
    return keep


def budget_label(r):
    """'checkpoint k=3', 'revolve slots=2', 'deq broyden h=8', ... of a run:
    the record's method.label without the depth, but for deq, whose label
    ("deq broyden/ift") does not carry the history this chart compares;
    made from the config in records without the label."""
    m = R.method(r.rec)
    lab = R.label_without_depth(r.rec)
    if lab is not None and m != "deq":
        return lab
    if m == "checkpoint":
        return f"checkpoint k={R.cfg(r.rec, 'k')}"
    if m == "revolve":
        return f"revolve slots={R.cfg(r.rec, 'slots')}"
    if m == "deq":
        fs = R.cfg(r.rec, "f_solver")
        if fs == "anderson":
            return f"deq anderson m={R.cfg(r.rec, 'anderson_m')}"
        return f"deq {fs} h={R.cfg(r.rec, 'f_history')}"
    return m


def fig_budget(runs, recs, prefix, written):
    """Step time against total device peak for every method and parameter,
    with and without head_chunk, and the Pareto front."""
    pts = [r for r in runs if r.step_ms and r.tot]
    methods = {R.method(r.rec) for r in pts}
    if len(methods) < 3 or len(pts) < 6:
        return False
    fams = sorted(methods)
    col = colours(fams)
    fig, ax = plt.subplots(layout="constrained", figsize=(10, 6.5))
    for f in fams:
        for chunk, mk in ((False, "o"), (True, "^")):
            rs = [r for r in pts if R.method(r.rec) == f and
                  bool(R.cfg(r.rec, "head_chunk")) == chunk]
            if not rs:
                continue
            ax.scatter([r.tot / 2**20 for r in rs], [r.step_ms for r in rs], marker=mk,
                       s=28, color=col[f], label=f + (" + head_chunk" if chunk else ""))
            mark_flagged(ax, rs, [r.tot / 2**20 for r in rs], [r.step_ms for r in rs])
            for r in rs:
                ax.annotate(budget_label(r).replace(f + " ", ""),
                            (r.tot / 2**20, r.step_ms), textcoords="offset points",
                            xytext=(3, 2), fontsize=5)
    xy = [(r.tot / 2**20, r.step_ms) for r in pts]
    fr = sorted((xy[i] for i in pareto(xy)), key=lambda p: p[0])
    ax.plot([p[0] for p in fr], [p[1] for p in fr], color="k", lw=1.0,
            drawstyle="steps-post", label="Pareto front")
    ax.scatter([p[0] for p in fr], [p[1] for p in fr], s=90, facecolors="none",
               edgecolors="k", lw=1.0)
    ax.set_xlabel("total device peak (MiB; params, grads, Adam, head, depth, solver, "
                  "workspace)")
    ax.set_ylabel("step time (ms, median)")
    ax.set_title("what a memory saving costs: step time against peak memory "
                 "(triangles: head_chunk)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    return finish(fig, "memory budget: every method", recs, prefix, "budget", written)


FIGURES = (fig_memory_vs_depth, fig_time_ratio, fig_memory_ratio, fig_eps, fig_eps_infer,
           fig_residuals, fig_convergence, fig_step_trace, fig_budget)


def figure_name(f):
    """The figure's file name part: fig_memory_vs_depth -> memory-vs-depth
    (fig_eps draws eps-sweep)."""
    return "eps-sweep" if f is fig_eps else f.__name__[4:].replace("_", "-")


def plot_file(path, out_dir, only=None):
    """Draws every figure the records of one file support (only: the names
    to draw, None for all); returns the paths written."""
    ok, skipped = R.load([path], note=lambda s: print(s, file=sys.stderr))
    recs = [r for _, _, r in ok]
    written = []
    if not recs:
        print(f"note: {path}: no records with status ok; nothing drawn", file=sys.stderr)
        return written
    prefix = R.stem(path)
    if out_dir:
        prefix = os.path.join(out_dir, os.path.basename(prefix))
    runs = runs_of(recs)
    label_series(runs)
    # training figures see training records only; eps-infer its eval ones
    train = [r for r in runs if R.kind(r.rec) == "train"]
    # time-ratio draws the priced figures where the findings quote them
    extra = {fig_time_ratio: {"prices": steptime.prices_of(path)}}
    drawn = [f.__name__[4:] for f in FIGURES
             if (only is None or figure_name(f) in only)
             and f(runs if f is fig_eps_infer else train, recs, prefix, written,
                   **extra.get(f, {}))]
    if not drawn:
        print(f"note: {path}: {len(recs)} records support none of the figures "
              "(see plot.py's header for what each needs)", file=sys.stderr)
    return written


def main(argv):
    ap = argparse.ArgumentParser(
        prog="/usr/bin/python3 plots/plot.py",
        description="Draws memory, time, tolerance and residual figures from deqbench "
                    "records (results/SCHEMA.md), as PNG and SVG beside each file. "
                    "Run with Debian's /usr/bin/python3 (python3-matplotlib).")
    ap.add_argument("files", nargs="+", metavar="FILE.jsonl")
    ap.add_argument("--out-dir", help="write the figures here instead of beside each file")
    ap.add_argument("--figures", help="comma-separated figure names to draw (default: every "
                    "figure the records support), e.g. time-ratio,memory-ratio")
    a = ap.parse_args(argv)
    only = set(a.figures.split(",")) if a.figures else None
    names = {figure_name(f) for f in FIGURES}
    if only and not only <= names:
        print(f"plot.py: --figures: unknown {', '.join(sorted(only - names))}; "
              f"figures are {', '.join(sorted(names))}", file=sys.stderr)
        return 2
    if a.out_dir:
        os.makedirs(a.out_dir, exist_ok=True)
    try:
        for path in a.files:
            for w in plot_file(path, a.out_dir, only):
                print(w)
    except (OSError, ValueError) as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
