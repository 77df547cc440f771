"""equalppl.py — the findings' answer at equal perplexity: what
each method costs to reach the same valid perplexity, from report's
`to_target` (bench/report/report_target.c: the automatic target is the
worst of the runs' best valid perplexities on their curves, so every run
with a curve reaches it; steps and training seconds are medians over the
runs). The time ratio is the measured one (train_s_x_unroll), or the
priced one (priced_s_x_unroll: the steps to the target × the priced step)
where the row's runs ran beside another and every unit was priced
(steptime.py).
"""
import deqwords
import steptime


def _num(x, d=2):
    return "–" if x is None else f"{x:.{d}f}"


def ratio(r):
    """(× unroll of the time to the target, "priced" or "measured")."""
    t = r.get("to_target") or {}
    if steptime.priced(r) and t.get("priced_s_x_unroll") is not None:
        return t["priced_s_x_unroll"], "priced"
    return t.get("train_s_x_unroll"), "measured"


def clause(r):
    """'checkpoint L=16 k=4 in 700 steps (1.18× unroll's time)' of a row
    with to_target; 'not reached (0/3 runs)' where none of its runs did."""
    t = r["to_target"]
    name = deqwords.label(r) if r["method"].startswith("deq") else r["method"]
    if not t.get("reached"):
        return f"{name}: not reached (0/{t['runs']} runs)"
    x, src = ratio(r)
    tail = "" if r["method"].startswith("unroll") else \
        f", {_num(x)}× unroll's time{steptime.tag(src)}"
    return (f"{name} in {t['steps']:.0f} steps ({_num(t['train_s'], 1)} s{tail}; "
            f"{t['reached']}/{t['runs']} runs)")


def sentence(rows, machine):
    """The sentence of one suite's training rows, or a line saying the
    records hold no valid curve."""
    rows = [r for r in rows or [] if r["kind"] == "train" and r["impl"] == "deqbench"]
    have = [r for r in rows if r.get("to_target")]
    if not rows:
        return None
    if not have:
        return (f"At equal perplexity ({machine.upper()}): pending — these records hold no "
                "valid curve (their runs did not set `eval_every`), so the steps and time "
                "each method takes to the same perplexity cannot be read from them.")
    tgt = have[0]["to_target"]["target_ppl"]
    order = sorted(have, key=lambda r: not r["method"].startswith("unroll"))
    return (f"At equal perplexity ({machine.upper()}; valid perplexity {_num(tgt)}, the "
            f"worst of the runs' best, so every run reaches it; medians over runs, "
            f"resolution {rows[0]['config'].get('eval_every')} steps): "
            + "; ".join(clause(r) for r in order) + ".")
