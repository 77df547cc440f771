"""epswords.py — the findings' sentences about ε in training that need
each seed (plots/findings.py section 4), from a records file alone: which
DEQ seeds lost forward convergence and how (plots/epsseeds.py), and
whether the perplexity spread across ε exceeds the seeds' spread within
one ε. Statistics: mean ± sd of the seeds' perplexities, as `deqbench
report`'s valid_ppl and test_ppl; one-way ANOVA over the seeds' losses
(log perplexities)."""
import json
import math

import epsseeds as S
from epsseeds import R


def load(path):
    """The status-ok training records of a records file."""
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r.get("status") == "ok" and R.kind(r) == "train":
                    out.append(r)
    return out


def pct(x):
    return "–" if x is None else f"{100 * x:.0f}%"


def convergence_sentence(recs):
    """'ε = 0.001 seed 2 lost its forward convergence: 59% of its steps
    converged, 14% of the last 10% (health: healthy).' for each DEQ seed
    that did (epsseeds.lost_convergence), or '' when none did."""
    lost = [(R.cfg(r, "f_tol"), S.lost_convergence(r)) for r in recs]
    lost = sorted(((t, x) for t, x in lost if x), key=lambda p: (-p[0], p[1]["seed"]))
    if not lost:
        return ""
    parts = []
    for t, x in lost:
        health = ("⚠ " + ", ".join(x["labels"])) if x["labels"] else "no label"
        parts.append(f"ε = {t:g} seed {x['seed']} ({pct(x['all'])} of its steps' forward "
                     f"solves converged, {pct(x['last'])} of the last 10%; health: {health})")
    return ("Seeds that lost forward convergence (below 90% of their steps, overall or in "
            "the last 10%): " + "; ".join(parts) + ". Their rows' means include them.")


def stats(vals):
    m = sum(vals) / len(vals)
    if len(vals) < 2:
        return m, None
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
    return m, sd


def spread_clause(recs, what, path, loss):
    """(text, ANOVA p or None, the ε with one seed) of one split: the
    spread of the DEQ's means across ε and the seeds' sd within one ε;
    None below two ε."""
    per = S.by_eps(recs, path)
    if len(per) < 2:
        return None
    means = {t: stats(v) for t, v in per.items()}
    lo, hi = min(m for m, _ in means.values()), max(m for m, _ in means.values())
    sds = sorted(sd for _, sd in means.values() if sd is not None)
    sd = ("no ε with two seeds" if not sds else f"seed sd within one ε {sds[0]:.2f}"
          + (f"–{sds[-1]:.2f}" if len(sds) > 1 else ""))
    single = sorted((t for t, v in per.items() if len(v) < 2), reverse=True)
    return (f"{what}: the DEQ's means span {lo:.2f}–{hi:.2f} across ε "
            f"(range {hi - lo:.2f}), {sd}", S.anova(list(S.by_eps(recs, loss).values())), single)


def verdict(cs):
    """The clause that answers whether ε's effect exceeds the seeds'."""
    ps = [c[1] for c in cs]
    if any(p is None for p in ps):
        single = cs[0][2]
        return (f"With one seed at ε = {', '.join(f'{t:g}' for t in single)}, the "
                "records cannot tell an ε effect from seed noise")
    names = ("valid", "test")  # spread_sentence's order
    txt = ", ".join(f"{p:.2g} ({n})" for p, n in zip(ps, names))
    big = any(p < 0.05 for p in ps)
    return (f"One-way ANOVA over the seeds' losses: p = {txt}: the ε effect is "
            + ("larger than the seeds' noise" if big else "not told apart from seed noise"))


def spread_sentence(recs):
    """Valid and test perplexity: the spread across ε against the seeds'
    (and without the seeds that lost convergence, when some did)."""
    cs = [c for c in (spread_clause(recs, "valid", "quality.valid_ppl", "quality.valid_loss"),
                      spread_clause(recs, "test", "quality.test_ppl", "quality.test_loss"))
          if c]
    if not cs:
        return ""
    out = ("Is ε's effect on perplexity larger than the seeds'? "
           + "; ".join(c[0] for c in cs) + f". {verdict(cs)}.")
    kept = [r for r in recs if not S.lost_convergence(r)]
    k = spread_clause(kept, "valid", "quality.valid_ppl", "quality.valid_loss")
    if len(kept) < len(recs) and k:
        out += (f" Without the seeds that lost convergence, {k[0]}"
                + (f" (ANOVA p = {k[1]:.2g})" if k[1] is not None else "") + ".")
    unr = [v for v in (R.num(r, "quality.valid_ppl") for r in recs
                       if R.method(r) == "unroll") if v is not None]
    if len(unr) > 1:
        m, sd = stats(unr)
        out += f" Unroll's {len(unr)} seeds: valid perplexity {m:.2f} ± {sd:.2f}."
    return out


def lines(path):
    """The section's per-seed paragraphs (each followed by a blank line)
    for the records file at path."""
    recs = load(path)
    out = []
    for s in (convergence_sentence(recs), spread_sentence(recs)):
        if s:
            out += [s, ""]
    return out
