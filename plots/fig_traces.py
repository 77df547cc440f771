"""fig_traces.py — the figures of plots/plot.py drawn from per-step traces
(records run with trace=true): the residual after each solver iteration of
the last training step, each DEQ run's final residuals and converged
fraction along training, and every run's step time and block
applications along training (plot.py's header describes them)."""
import math

import records as R
from epsseeds import converged_flags
from figbase import colours, finish, group_labels, legend_right, panel, plt

def trace_of(rec, name):
    t = R.get(rec, "trace." + name)
    if not isinstance(t, list):
        return []
    return [x if isinstance(x, (int, float)) and math.isfinite(x) and x > 0 else math.nan
            for x in t]


def fig_residuals(runs, recs, prefix, written):
    deq = [r for r in runs if R.method(r.rec) == "deq"
           and (trace_of(r.rec, "last_fwd_residual_trace")
                or trace_of(r.rec, "last_bwd_residual_trace"))]
    if not deq:
        return False
    styles = ["-", "--", ":", "-."]
    kinds = list(dict.fromkeys(R.variant(r.rec, with_cap=True) for r in deq))
    tols = sorted({R.cfg(r.rec, "f_tol") for r in deq})
    cmap = plt.get_cmap("viridis")
    fig, axes = plt.subplots(1, 2, layout="constrained", figsize=(12, 4.5))
    for ax, name, stop, what in (
            (axes[0], "last_fwd_residual_trace", "f_stop_mode", "forward solve z* = f(z*; u)"),
            (axes[1], "last_bwd_residual_trace", "b_stop_mode", "backward solve y = y J + ḡ")):
        modes = set()
        for r in deq:
            t = trace_of(r.rec, name)
            if not t:
                continue
            modes.add(R.cfg(r.rec, stop))
            tol = R.cfg(r.rec, "f_tol")
            c = cmap(tols.index(tol) / max(1, len(tols) - 1)) if len(tols) > 1 else "C0"
            kind = R.variant(r.rec, with_cap=True)
            ax.semilogy(range(1, len(t) + 1), t, color=c,
                        ls=styles[kinds.index(kind) % len(styles)], lw=1.0,
                        label=f"{kind} ε={R.fmt_g(tol)}")
        if len(tols) == 1:
            ax.axhline(tols[0], color="0.4", lw=0.8, ls="--")
        mode = modes.pop() if len(modes) == 1 else None
        panel(ax, "solver iteration (evaluations of F, the first at x₀ = 0)",
              {"rel": "relative residual ‖F(x)−x‖ / ‖F(x)‖",
               "abs": "absolute residual ‖F(x)−x‖"}.get(
                   mode, "residual (each run's stop mode)"), what)
    legend_right(axes[1], 6)
    return finish(fig, "Residual after each solver iteration, last training step", recs,
                  prefix, "residuals", written)


def trailing_mean(flags, w):
    """Fraction of true flags over the trailing window of w steps (fewer at
    the start)."""
    out, run = [], 0
    for i, f in enumerate(flags):
        run += f
        if i >= w:
            run -= flags[i - w]
        out.append(run / min(i + 1, w))
    return out


def fig_convergence(runs, recs, prefix, written):
    deq = [r for r in runs if R.method(r.rec) == "deq"
           and isinstance(R.get(r.rec, "trace.fwd_residual"), list)
           and R.get(r.rec, "trace.fwd_residual")]
    if not deq:
        return False
    groups, glabel = group_labels(deq)
    name = lambda r: r.series + ("" if len(groups) == 1 else f" ({glabel[r.group]})")
    # one line per record: each seed of a configuration is drawn, so an
    # unconverged seed is never hidden behind a converged one
    lines = [(name(r) + (f" seed {R.cfg(rec, 'seed')}" if len(r.recs) > 1 else ""), rec)
             for r in deq for rec in r.recs
             if isinstance(R.get(rec, "trace.fwd_residual"), list)]
    names = list(dict.fromkeys(label for label, _ in lines))
    col = colours(names)
    styles = ["-", "--", ":", "-."]
    steps = max(len(R.get(rec, "trace.fwd_residual")) for _, rec in lines)
    w = max(1, min(50, round(steps / 20)))
    # room below the panels for one legend line per run
    fig, axes = plt.subplots(2, 2, layout="constrained", sharex=True,
                             figsize=(12, 7 + 0.11 * len(names)),
                             height_ratios=(1, 1))
    derived = False
    for c, side, section, tol_key, what in (
            (0, "fwd", "forward", "f_tol", "forward solve z* = f(z*; u)"),
            (1, "bwd", "backward", "b_tol", "backward solve y = y J + ḡ")):
        a_res, a_conv = axes[0][c], axes[1][c]
        tols, modes = set(), set()
        for label, rec in lines:
            if R.get(rec, "solver." + section) is None:
                continue  # no such solve (b_mode=jfb)
            res = trace_of(rec, side + "_residual")
            flags, d = converged_flags(rec, side)
            derived |= d
            n = names.index(label)
            kw = dict(color=col[label], ls=styles[n // 10 % len(styles)], lw=0.9)
            frac = sum(flags) / len(flags) if flags else math.nan
            a_res.semilogy(range(1, len(res) + 1), res, label=label, **kw)
            a_conv.plot(range(1, len(flags) + 1), trailing_mean(flags, w),
                        label=f"{label}: {100 * frac:.1f}% of all steps", **kw)
            tols.add(R.cfg(rec, tol_key))
            modes.add(R.cfg(rec, section[0] + "_stop_mode"))
        if not tols:
            for ax in (a_res, a_conv):
                ax.text(0.5, 0.5, "no backward solve (b_mode=jfb)", ha="center",
                        va="center", transform=ax.transAxes)
        for t in tols:
            a_res.axhline(t, color="0.4", lw=0.8, ls="--")
        mode = modes.pop() if len(modes) == 1 else None
        a_res.set_ylabel({"rel": "final relative residual ‖F(x)−x‖ / ‖F(x)‖",
                          "abs": "final absolute residual ‖F(x)−x‖"}.get(
                              mode, "final residual (each run's stop mode)"))
        a_res.set_title(f"{what}: final residual (dashed: tolerance)")
        a_conv.set_ylabel(f"converged fraction, trailing {w} step{'s' if w > 1 else ''}")
        a_conv.set_ylim(-0.03, 1.03)
        a_conv.set_xlabel("training step (warmup steps included)")
        a_conv.set_title(f"{what}: steps that reached the tolerance")
        for ax in (a_res, a_conv):
            ax.grid(True, which="both", alpha=0.3)
        if tols:
            a_conv.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    note = (" (records without per-step flags: converged = residual ≤ tolerance)"
            if derived else "")
    return finish(fig, "DEQ solver convergence over training" + note, recs, prefix,
                  "convergence", written)


def trailing_median(xs, w):
    """The median of the last w finite values at each index (NaN before
    any)."""
    out = []
    for i in range(len(xs)):
        v = sorted(x for x in xs[max(0, i - w + 1):i + 1] if math.isfinite(x))
        out.append(v[len(v) // 2] if v else math.nan)
    return out


def block_calls(rec):
    """Block applications (forwards and VJPs) per step of a training
    record: a DEQ's follow its solver iterations (trace.fwd_iters +
    trace.bwd_iters plus the constant rest, so that their mean is evals'),
    every other method's are the constant evals per step."""
    per = (R.num(rec, "evals.forward_evals_per_step") or 0) + \
        (R.num(rec, "evals.vjp_evals_per_step") or 0)
    n = len(R.get(rec, "trace.step_ms") or [])
    f, b = R.get(rec, "trace.fwd_iters") or [], R.get(rec, "trace.bwd_iters") or []
    it = [(x or 0) + (y or 0) for x, y in zip(f, b)]
    if R.method(rec) != "deq" or len(it) != n or not n:
        return [per] * n
    rest = per - sum(it) / n
    return [x + rest for x in it]


def seeds_median(series):
    """The per-step median over the seeds' series (to the shortest)."""
    n = min(len(x) for x in series)
    return [sorted(x[j] for x in series)[len(series) // 2] for j in range(n)]


def fig_step_trace(runs, recs, prefix, written):
    runs = [r for r in runs if any(R.get(rec, "trace.step_ms") for rec in r.recs)]
    if not runs:
        return False
    groups, glabel = group_labels(runs)
    names = list(dict.fromkeys(r.series for r in runs))
    col = colours(names)
    steps = max(len(R.get(rec, "trace.step_ms") or []) for r in runs for rec in r.recs)
    w = max(1, min(50, round(steps / 20)))
    rows = -(-len(runs) // 3)  # the legend's, three columns
    fig, axes = plt.subplot_mosaic([["ms", "ev"], ["key", "key"]], layout="constrained",
                                   figsize=(12, 4.2 + 0.14 * rows),
                                   height_ratios=(4.2, 0.14 * rows + 0.1))
    a_ms, a_ev, key = axes["ms"], axes["ev"], axes["key"]
    styles = ["-", "--", ":", "-."]
    for r in runs:
        seeds = [rec for rec in r.recs if R.get(rec, "trace.step_ms")]
        ms = [trailing_median([x if isinstance(x, (int, float)) else math.nan
                               for x in R.get(rec, "trace.step_ms")], w) for rec in seeds]
        ev = [trailing_median(block_calls(rec), w) for rec in seeds]
        label = r.series + ("" if len(groups) == 1 else f" ({glabel[r.group]})") + \
            (f" ({len(seeds)} seeds: median thick, each thin)" if len(seeds) > 1 else "")
        ls = styles[groups.index(r.group) % len(styles)]
        for ax, ys in ((a_ms, ms), (a_ev, ev)):
            # each seed thin, their median thick: one seed's drift stays
            # visible without 3 lines per configuration in the legend
            if len(ys) > 1:
                for y in ys:
                    ax.plot(range(1, len(y) + 1), y, color=col[r.series], lw=0.4,
                            alpha=0.5, ls=ls)
            y = seeds_median(ys)
            ax.plot(range(1, len(y) + 1), y, color=col[r.series], lw=1.2, ls=ls,
                    label=label if ax is a_ms else None)
    a_ms.set_ylabel(f"step time (ms), trailing median of {w} step{'s' if w > 1 else ''}")
    a_ms.set_title("step time along training (what each step costs)")
    a_ev.set_ylabel(f"block applications per step, trailing median of {w}")
    a_ev.set_title("work along training: block forwards + VJPs (a DEQ's follow its solves)")
    for ax in (a_ms, a_ev):
        ax.set_xlabel("training step (warmup steps included)")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    key.axis("off")
    key.legend(*a_ms.get_legend_handles_labels(), fontsize=6, loc="center", ncol=3,
               frameon=False)
    return finish(fig, "Step time and work along training", recs, prefix, "step-trace",
                  written)
