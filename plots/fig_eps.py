"""fig_eps.py — the solver-tolerance figures of plots/plot.py (its header
describes them): eps-sweep (ε in training) and eps-infer (ε at inference
against the unrolled depth of matching perplexity). Every setting is drawn
as its seeds (small dots, one per trained seed), the estimate over them
(the geometric mean: for a perplexity, exp of the mean loss) and its 95% t
interval, so that a single seed never reads as the setting's value and
seed noise never reads as an ε effect."""
import json
import os
import subprocess
import tempfile

import epsseeds as S
import records as R
from fig_traces import block_calls, trailing_median
from figbase import colours, finish, gmean, plt, ratio_interval

MARKS = "osD^v<>"
EPS_LABEL = "tolerance ε = f_tol (relative residual ‖f(z)−z‖/‖f(z)‖)"


def jitter(x, k, n):
    """Seed k of n drawn right of x on a log axis, so that seeds hide
    neither each other nor the estimate's marker at x."""
    return x * 10 ** ((k + 1) * 0.035)


def estimate(ax, x, vals, color, marker, label=None, base=None):
    """Seeds of one setting at x: each a small dot, the geometric mean as a
    large marker and its 95% t interval as whiskers (against base's values,
    a ratio of geometric means with Welch's interval, as report's
    step_mean_x_unroll). Returns (estimate, lo, hi)."""
    vals = [v for v in vals if v is not None and v > 0]
    if not vals:
        return None, None, None
    if base:
        est, lo, hi = ratio_interval(vals, base)
        scale = gmean(base)
    else:
        est, lo, hi = S.gm_interval(vals)
        scale = 1.0
    for k, v in enumerate(vals):
        ax.plot(jitter(x, k, len(vals)), v / scale, "o", ms=3.5, color=color, alpha=0.8,
                mec="none", zorder=2)
    yerr = [[est - lo], [hi - est]] if lo is not None else None
    ax.errorbar([x], [est], yerr=yerr, marker=marker, ms=6, color=color, capsize=3,
                lw=1.2, mfc="white", mew=1.3, zorder=3, label=label)
    return est, lo, hi


def ring(ax, x, y):
    """A red ring: a seed that lost convergence or that health flags."""
    ax.scatter([x], [y], s=110, facecolors="none", edgecolors="red", lw=1.1, zorder=4)


def min_span(ax, frac=0.04):
    """At least frac of the middle value on a linear y axis, so that a
    0.1-perplexity difference never fills the panel."""
    lo, hi = ax.get_ylim()
    mid = (lo + hi) / 2
    if hi - lo < frac * mid:
        ax.set_ylim(mid * (1 - frac / 2), mid * (1 + frac / 2))


def ref_band(ax, vals, label, scale=1.0):
    """A reference setting (unroll) as a dotted line at its estimate and a
    grey band over its 95% interval."""
    est, lo, hi = S.gm_interval(vals)
    if est is None:
        return
    ax.axhline(est / scale, color="0.35", ls=":", lw=1.0, label=label)
    if lo is not None:
        ax.axhspan(lo / scale, hi / scale, color="0.5", alpha=0.12, lw=0)


def seeds_of(run, path):
    return [R.num(r, path) for r in run.recs]


def evals_of(rec):
    f, v = R.num(rec, "evals.forward_evals_per_step"), R.num(rec, "evals.vjp_evals_per_step")
    return None if f is None else f + (v or 0)


def eps_panels(axes, deq, series, key, col, unroll):
    """The ε panels of eps-sweep: time × unroll, valid and test perplexity,
    evaluations per step; per series a line through the estimates."""
    a_time, a_ppl, a_test, a_ev = axes
    base = unroll.step_means if unroll and len(unroll.step_means) else None
    rows = {}
    for si, s in enumerate(series):
        m, c = MARKS[si % len(MARKS)], col[s]
        rs = sorted((r for r in deq if key(r) == s), key=lambda r: R.cfg(r.rec, "f_tol"))
        for ax, path, use_base in ((a_time, "timing.step_ms.mean", True),
                                   (a_ppl, "quality.valid_ppl", False),
                                   (a_test, "quality.test_ppl", False),
                                   (a_ev, None, False)):
            pts = []
            for r in rs:
                eps = R.cfg(r.rec, "f_tol")
                vals = [evals_of(x) for x in r.recs] if path is None else seeds_of(r, path)
                est = estimate(ax, eps, vals, c, m, base=base if use_base else None)
                if est[0] is not None:
                    pts.append((eps, est[0]))
                    rows.setdefault(id(r), {})[path] = est
                scale = gmean(base) if use_base and base else 1.0
                for k, x in enumerate(r.recs):
                    v = evals_of(x) if path is None else R.num(x, path)
                    if v and (S.lost_convergence(x) or S.labels(x)):
                        ring(ax, jitter(eps, k, len(r.recs)), v / scale)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=c, lw=0.8,
                        alpha=0.7, label=s if ax is a_time else None)
    if unroll:
        lab = f"unroll L={R.cfg(unroll.rec, 'layers')} (dotted; band: 95%)"
        if base:
            a_time.axhline(1.0, color="0.35", ls=":", lw=1.0, label=lab)
        ref_band(a_ppl, seeds_of(unroll, "quality.valid_ppl"), lab)
        ref_band(a_test, seeds_of(unroll, "quality.test_ppl"), lab)
        ev = [evals_of(x) for x in unroll.recs if evals_of(x)]
        if ev:
            a_ev.axhline(ev[0], color="0.35", ls=":", lw=1.0, label=lab)
    return rows


def along_training(ax, deq, unroll):
    """Block evaluations (forwards + VJPs) per step along training, one
    colour per ε: each seed a thin line, the median over seeds thick
    (trailing medians); unroll's constant as a dotted line."""
    lines = [(R.cfg(r.rec, "f_tol"), rec) for r in deq for rec in r.recs
             if R.get(rec, "trace.step_ms")]
    if not lines:
        ax.text(0.5, 0.5, "no per-step trace (run with trace=true)", ha="center",
                va="center", transform=ax.transAxes)
        ax.set_xlabel("training step")
        ax.set_ylabel("block evaluations per step")
        return
    tols = sorted({t for t, _ in lines})
    cmap = plt.get_cmap("viridis")
    steps = max(len(R.get(rec, "trace.step_ms")) for _, rec in lines)
    w = max(1, min(50, round(steps / 20)))
    for i, t in enumerate(tols):
        c = cmap(i / max(1, len(tols) - 1) * 0.9)
        seeds = [trailing_median(block_calls(rec), w) for tt, rec in lines if tt == t]
        for ys in seeds:
            ax.plot(range(1, len(ys) + 1), ys, color=c, lw=0.5, alpha=0.6)
        n = min(len(ys) for ys in seeds)
        mid = [sorted(ys[j] for ys in seeds)[len(seeds) // 2] for j in range(n)]
        ax.plot(range(1, n + 1), mid, color=c, lw=1.8,
                label=f"ε={R.fmt_g(t)} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})")
    if unroll and evals_of(unroll.rec):
        ax.axhline(evals_of(unroll.rec), color="0.35", ls=":", lw=1.0,
                   label=f"unroll L={R.cfg(unroll.rec, 'layers')}")
    ax.set_xlabel("training step (warmup steps included)")
    ax.set_ylabel(f"block evaluations per step (fwd + VJP), trailing median of {w}")
    ax.set_title("work along training per ε: thick = median over seeds, thin = each seed")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6)


def time_vs_ppl(ax, deq, series, key, col, rows, unroll):
    """Each setting's estimate of time × unroll against valid perplexity,
    both with their 95% intervals: points whose intervals overlap are not
    told apart by these seeds."""
    for si, s in enumerate(series):
        for r in (r for r in deq if key(r) == s):
            t = rows.get(id(r), {}).get("timing.step_ms.mean")
            p = rows.get(id(r), {}).get("quality.valid_ppl")
            if not t or not p or t[0] is None or p[0] is None:
                continue
            err = lambda e: [[e[0] - e[1]], [e[2] - e[0]]] if e[1] is not None else None
            ax.errorbar([t[0]], [p[0]], xerr=err(t), yerr=err(p), marker=MARKS[si % 7],
                        ms=5, color=col[s], capsize=2, lw=1.0)
            ax.annotate(f"ε={R.fmt_g(R.cfg(r.rec, 'f_tol'))}", (t[0], p[0]),
                        textcoords="offset points", xytext=(4, 3), fontsize=6)
    if unroll:
        est, lo, hi = S.gm_interval(seeds_of(unroll, "quality.valid_ppl"))
        if est:
            ax.errorbar([1.0], [est], yerr=[[est - lo], [hi - est]] if lo else None,
                        marker="*", ms=9, color="0.3", capsize=2, lw=1.0,
                        label=f"unroll L={R.cfg(unroll.rec, 'layers')}")
            ax.legend(fontsize=6)
    ax.set_xlabel("mean step time / unroll's (×), 95% interval")
    ax.set_ylabel("valid perplexity, 95% interval over seeds")
    ax.set_title("time against perplexity (estimates; overlapping intervals: not told apart)")
    ax.grid(True, alpha=0.3)
    min_span(ax)


def fig_eps(runs, recs, prefix, written):
    runs = [r for r in runs if R.kind(r.rec) == "train"]
    deq = [r for r in runs if R.method(r.rec) == "deq"]
    if len({R.cfg(r.rec, "f_tol") for r in deq}) < 2:
        return False
    groups = list(dict.fromkeys(r.group for r in deq))
    key = lambda r: R.variant(r.rec, with_cap=True) + (
        "" if len(groups) == 1 else f" (group {groups.index(r.group) + 1})")
    series = list(dict.fromkeys(key(r) for r in deq))
    col = colours(series)
    unr = [r for r in runs if R.method(r.rec) == "unroll"]
    unroll = unr[0] if len(groups) == 1 and len(unr) == 1 else None
    fig, axes = plt.subplots(2, 3, layout="constrained", figsize=(16, 9))
    (a_time, a_ppl, a_test), (a_ev, a_tr, a_par) = axes
    rows = eps_panels((a_time, a_ppl, a_test, a_ev), deq, series, key, col, unroll)
    along_training(a_tr, deq, unroll)
    time_vs_ppl(a_par, deq, series, key, col, rows, unroll)
    for ax in (a_time, a_ppl, a_test, a_ev):
        ax.set_xscale("log")
        ax.set_xlabel(EPS_LABEL)
        ax.grid(True, which="both", alpha=0.3)
    if unroll:
        a_time.set_ylabel("mean step time / unroll's (×)")
    else:
        a_time.set_ylabel("mean step time (ms)")
    a_time.set_title("ε against step time: dots each seed, marker the geometric mean, "
                     "whiskers its 95% interval (none: one seed)", fontsize=7)
    a_ppl.set_ylabel("valid perplexity (exp of nats per token)")
    a_ppl.set_title("ε against valid perplexity (red ring: a seed that lost "
                    "convergence or is flagged)", fontsize=7)
    a_test.set_ylabel("test perplexity (exp of nats per token)")
    a_test.set_title("ε against test perplexity")
    a_ev.set_ylabel("block evaluations per step (fwd + VJP, mean)")
    a_ev.set_title("ε against work per step")
    for ax in (a_ppl, a_test):
        min_span(ax)
    a_time.legend(fontsize=6)
    a_ppl.legend(fontsize=6)
    return finish(fig, "DEQ solver tolerance ε in training (each seed, the estimate "
                       "and its 95% interval)", recs, prefix, "eps-sweep", written)


def report_rows(recs, args=()):
    """deqbench report --format json on these records (a temporary file),
    with report's further arguments args (--price PRICES: the time-ratio
    figure of plot.py): its eval rows carry matched_unroll and
    inference_x_unroll, its train rows the priced figures. [] when the
    binary cannot give them (the figure then says so)."""
    exe = os.environ.get("DEQBENCH") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build", "bench", "deqbench")
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    try:
        out = subprocess.run([exe, "report", "--format", "json", *args, f.name], check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return []
    finally:
        os.unlink(f.name)


def trained_seed(rec):
    """What tells an eval record's trained seed apart: its params file
    (eps-train's save_params: -seed2, -seed3), then its seed."""
    return (R.cfg(rec, "params") or "", R.cfg(rec, "seed") or 0)


def infer_settings(ev):
    """{("deq", cap, ε) or ("unroll", L): [records, one per trained seed,
    in the same order in every setting]}."""
    out = {}
    for r in sorted(ev, key=trained_seed):
        k = (("deq", R.cfg(r, "f_max_iter"), R.cfg(r, "f_tol")) if R.method(r) == "deq"
             else ("unroll", R.cfg(r, "layers")))
        out.setdefault(k, []).append(r)
    return out


def seed_lines(ax, sets, cap, tols, path, color):
    """Each trained seed's values across ε as a thin line through its
    dots: the settings of one seed are the same trained net, so its line
    is the ε effect without the seeds' spread."""
    per = {}
    for t in tols:
        rs = sets[("deq", cap, t)]
        for k, r in enumerate(rs):
            v = R.num(r, path)
            if v is not None:
                per.setdefault(trained_seed(r), []).append((jitter(t, k, len(rs)), v))
    for pts in per.values():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, lw=0.5, alpha=0.45,
                zorder=1)


def matched(rows, cap, eps):
    """The report's eval row of the DEQ at (cap, ε): its matched_unroll
    layers and inference_x_unroll, or (None, None)."""
    for row in rows:
        c = row.get("config") or {}
        if (row.get("kind") == "eval" and row["method"].startswith("deq")
                and c.get("f_max_iter") == cap and c.get("f_tol") == eps):
            m = row.get("matched_unroll") or {}
            return m.get("layers"), row.get("inference_x_unroll")
    return None, None


INF = "inference.step_ms.median"
PPL = "quality.valid_ppl"
# behind a label that arrows, whiskers or other labels cross
LABEL_BOX = dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.75)


def infer_eps_panels(axes, sets, caps, col, rows, unr_at):
    """ε against inference time, valid perplexity and evaluations per
    batch, per cap: seeds, estimate, interval; the unrolled depth of
    matching perplexity at each ε as a grey star (time and perplexity)."""
    a_t, a_p, a_e = axes
    for ci, cap in enumerate(caps):
        name, m = f"deq f_max_iter={cap}", MARKS[ci % len(MARKS)]
        tols = sorted(k[2] for k in sets if k[0] == "deq" and k[1] == cap)
        for ax, path in ((a_t, INF), (a_p, PPL), (a_e, "inference.forward_evals_per_batch")):
            pts = [(t, estimate(ax, t, [R.num(r, path) for r in sets[("deq", cap, t)]],
                                col[name], m)[0]) for t in tols]
            pts = [p for p in pts if p[1] is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=col[name], lw=0.8,
                    label=name)
            seed_lines(ax, sets, cap, tols, path, col[name])
        for t in tols:
            L = matched(rows, cap, t)[0]
            if L is None or ("unroll", L) not in sets or ci != len(caps) - 1:
                continue
            for ax, path in ((a_t, INF), (a_p, PPL)):
                v = S.gm_interval([R.num(r, path) for r in sets[("unroll", L)]])[0]
                ax.plot([t], [v], "*", ms=8, color="0.3", zorder=4,
                        label=unr_at if not any(h.get_label() == unr_at
                                                for h in ax.lines) else None)
                ax.annotate(f"L={L}", (t, v), textcoords="offset points", xytext=(4, -8),
                            fontsize=6, color="0.3")


def zoom(ax, ppls, depths):
    """The perplexity axis on the competitive runs (within 4% of the
    best), the depths above it named in the panel."""
    lo = min(ax.dataLim.y0, *ppls) if ppls else ax.dataLim.y0
    off = [(L, p) for L, p in zip(depths, ppls) if p > lo * 1.04]
    if off:
        ax.set_ylim(lo * 0.995, lo * 1.04)
        ax.text(0.01, 0.99, "above the chart: " + ", ".join(
            f"unroll L={L} (ppl {p:.1f})" for L, p in off), transform=ax.transAxes,
            va="top", fontsize=6, bbox=LABEL_BOX)


def answer_panel(ax, sets, caps, col, rows):
    """The answer: unroll at every depth (estimates with 95% intervals in
    time and perplexity) and each DEQ tolerance joined by an arrow to the
    unrolled depth of matching perplexity (report's matched_unroll), with
    report's inference time × that unroll."""
    def est(rs):
        return S.gm_interval([R.num(r, INF) for r in rs]), \
            S.gm_interval([R.num(r, PPL) for r in rs])

    def draw(e, **kw):
        (t, tl, th), (p, pl, ph) = e
        err = lambda v, lo, hi: [[v - lo], [hi - v]] if lo is not None else None
        ax.errorbar([t], [p], xerr=err(t, tl, th), yerr=err(p, pl, ph), capsize=2,
                    lw=0.9, **kw)

    depths = sorted(k[1] for k in sets if k[0] == "unroll")
    ue = {L: est(sets[("unroll", L)]) for L in depths}
    ax.plot([ue[L][0][0] for L in depths], [ue[L][1][0] for L in depths], color="0.3",
            lw=0.8, label="unroll at depth L")
    for i, L in enumerate(depths):
        draw(ue[L], marker="*", ms=8, color="0.3")
        # neighbouring depths lie close in time: their labels alternate in height
        ax.annotate(f"L={L}", (ue[L][0][0], ue[L][1][0]), textcoords="offset points",
                    xytext=(4, -9 if i % 2 == 0 else -16), fontsize=6, color="0.3",
                    bbox=LABEL_BOX)
    mid = sorted(ue[L][1][0] for L in depths)[len(depths) // 2] if depths else None
    for ci, cap in enumerate(caps):
        name = f"deq f_max_iter={cap}"
        tols = sorted(k[2] for k in sets if k[0] == "deq" and k[1] == cap)
        lines = []
        for i, t in enumerate(tols):
            e = est(sets[("deq", cap, t)])
            draw(e, marker=MARKS[ci % len(MARKS)], ms=5, color=col[name], mfc="white",
                 label=name if t == tols[-1] else None)
            L, x = matched(rows, cap, t)
            if ci != len(caps) - 1:
                continue  # one cap's arrows and labels: more overlap
            if L in ue:
                ax.annotate("", xy=(ue[L][0][0], ue[L][1][0]), xytext=(e[0][0], e[1][0]),
                            arrowprops=dict(arrowstyle="->", color=col[name], lw=0.7,
                                            alpha=0.7))
            lines.append(f"{R.fmt_g(t):<8}" + ("none" if L is None else f"{f'L={L}':<9}" + (
                f"{x['ratio']:.2f}×" if x and x.get("ratio") else "—")))
            # the ε alone beside its point, away from the unroll line, heights
            # alternating (neighbouring ε lie close in time); the numbers: the table
            up = mid is not None and e[1][0] > mid
            dy = (7 if i % 2 == 0 else 15) * (1 if up else -1) - (0 if up else 4)
            ax.annotate(f"ε={R.fmt_g(t)}", (e[0][0], e[1][0]), textcoords="offset points",
                        xytext=(0, dy), ha="center", fontsize=6, color=col[name],
                        bbox=LABEL_BOX)
        if lines and rows:
            ax.text(0.99, 0.02, (f"{name}\n" if len(caps) > 1 else "") +
                    f"{'ε':<8}{'as good':<9}time × it\n" + "\n".join(lines),
                    transform=ax.transAxes, ha="right", va="bottom", fontsize=6,
                    multialignment="left", family="monospace", color=col[name], zorder=5,
                    bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="0.7", alpha=0.9))
    zoom(ax, [ue[L][1][0] for L in depths], depths)

    ax.set_xlabel("inference time per valid batch (ms, median; geometric mean over seeds)")
    ax.set_ylabel("valid perplexity (exp of the mean loss over seeds)")
    ax.set_title("the answer: each DEQ ε → the shallowest unrolled depth as good "
                 "(arrow; report's matched_unroll);\ntable: that depth and the DEQ's "
                 "inference time × its (report's inference_x_unroll)", fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)


def fig_eps_infer(runs, recs, prefix, written):
    ev = [r for r in recs if R.kind(r) == "eval" and R.num(r, INF) and R.num(r, PPL)]
    sets = infer_settings(ev)
    deq_tols = {k[2] for k in sets if k[0] == "deq"}
    depths = [k for k in sets if k[0] == "unroll"]
    if len(deq_tols) < 2 and len(depths) < 2:
        return False
    rows = report_rows(ev)
    caps = sorted({k[1] for k in sets if k[0] == "deq"})
    col = colours([f"deq f_max_iter={c}" for c in caps])
    unr_at = "unroll at the depth of matching perplexity" + (
        f" (cap {caps[-1]})" if len(caps) > 1 else "")
    fig, ((a_t, a_p), (a_e, a_par)) = plt.subplots(2, 2, layout="constrained",
                                                   figsize=(12, 9))
    infer_eps_panels((a_t, a_p, a_e), sets, caps, col, rows, unr_at)
    answer_panel(a_par, sets, caps, col, rows)
    for ax in (a_t, a_p, a_e):
        ax.set_xscale("log")
        ax.set_xlabel("inference tolerance ε = f_tol (relative residual)")
        ax.grid(True, which="both", alpha=0.3)
    a_t.set_ylabel("inference time per valid batch (ms, median per seed)")
    a_t.set_title("ε against inference time: dots each trained seed (thin line: one "
                  "seed across ε), marker the geometric mean, whiskers its 95% interval",
                  fontsize=7)
    a_p.set_ylabel("valid perplexity")
    a_p.set_title("ε against valid perplexity")
    min_span(a_p)
    a_e.set_ylabel("block evaluations per batch (mean)")
    a_e.set_title("ε against forward evaluations")
    a_t.legend(fontsize=6)
    if not rows:
        a_par.text(0.01, 0.01, "no deqbench report: arrows left out", fontsize=6,
                   transform=a_par.transAxes)
    seeds = max(len(v) for v in sets.values())
    return finish(fig, f"inference: DEQ tolerance against the unrolled depth of matching "
                       f"perplexity ({seeds} seed{'s' if seeds > 1 else ''} per setting)",
                  recs, prefix, "eps-infer", written)
