#!/usr/bin/env python3
"""test_findings_eps.py — plots/findings.py's ε-in-training section:
the seeds that lost forward convergence and the
perplexity spread across ε against the seeds', from the records
(plots/epswords.py, plots/epsseeds.py), through `deqbench report --format
json` as findings.py reads the committed ones.

    test_findings_eps.py DEQBENCH SOURCE_ROOT

Fixtures:
  committed   results/cpu/eps-train.jsonl as committed (3 seeds at every
              ε): ε = 1e-3 seed 2's collapse (58% of its steps, 12% of the
              last 10%) is stated, and the spread across ε is set against
              the seeds' by a one-way ANOVA.
  separated   the committed DEQ record at ε ∈ {0.1, 0.01, 0.001} × 3
              seeds, valid losses 5.00/5.10/5.20 by ε ± 0.01 by seed: the
              ε effect is larger than the seeds' noise (ANOVA p < 0.05).
  noise       the same with losses 5.00 ± 0.10 by seed at every ε: not
              told apart.
  collapse    one seed whose trace converged at every step but the last
              quarter, health without a label (records before the
              convergence rule): named with 75% / 0% and "no label".
"""
import json
import math
import os
import sys
import tempfile

FAILED = []


def check(cond, msg):
    if not cond:
        FAILED.append(msg)
        print(f"FAIL: {msg}")


def deq_template(root):
    with open(os.path.join(root, "results", "cpu", "eps-train.jsonl")) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    return next(r for r in recs if r["config"]["method"] == "deq"
                and r["config"]["seed"] == 1 and r["config"]["f_tol"] == 0.1)


def rec(tpl, tol, seed, loss):
    r = json.loads(json.dumps(tpl))
    r["config"].update({"f_tol": tol, "b_tol": tol, "seed": seed})
    for k in ("f_tol", "b_tol"):
        if k in r["method"]:
            r["method"][k] = tol
    r["method"].pop("label", None)
    r["quality"].update({"valid_loss": loss, "valid_ppl": math.exp(loss),
                         "test_loss": loss - 0.02, "test_ppl": math.exp(loss - 0.02)})
    return r


def section(findings, deqbench, d, recs):
    os.makedirs(os.path.join(d, "cpu"), exist_ok=True)
    with open(os.path.join(d, "cpu", "eps-train.jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    return "\n".join(findings.section_eps_train(
        [findings.Source(deqbench, d, "cpu", "eps-train")]))


def main():
    deqbench, root = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(root, "plots"))
    import findings  # noqa: E402  (needs the path above)
    import epsseeds  # noqa: E402
    text = "\n".join(findings.section_eps_train(
        [findings.Source(deqbench, os.path.join(root, "results"), "cpu", "eps-train")]))
    check("ε = 0.001 seed 2 (58% of its steps' forward solves converged, 12% of the last "
          "10%; health: ⚠ unconverged)" in text, f"committed: no collapse sentence:\n{text}")
    check("One-way ANOVA over the seeds' losses" in text,
          f"committed: 3 seeds at every ε, and no ANOVA:\n{text}")
    check("test ppl ± sd" in text, "committed: the table has no test perplexity")

    tpl = deq_template(root)
    tols = (0.1, 0.01, 0.001)
    with tempfile.TemporaryDirectory() as d:
        sep = [rec(tpl, t, s, 5.0 + 0.1 * i + 0.01 * (s - 2))
               for i, t in enumerate(tols) for s in (1, 2, 3)]
        out = section(findings, deqbench, d, sep)
        check("the ε effect is larger than the seeds' noise" in out,
              f"separated: ε effect not found:\n{out}")
        check("Seeds that lost" not in out, "separated: a converged seed named as lost")
        noise = [rec(tpl, t, s, 5.0 + 0.1 * (s - 2)) for t in tols for s in (1, 2, 3)]
        out = section(findings, deqbench, d, noise)
        check("not told apart from seed noise" in out, f"noise: told apart:\n{out}")
        bad = json.loads(json.dumps(noise[0]))
        n = len(bad["trace"]["fwd_converged"])
        bad["trace"]["fwd_converged"] = [i < 0.75 * n for i in range(n)]
        bad["health"] = {k: v for k, v in bad["health"].items()
                         if k not in ("unconverged", "flags")}
        bad["health"]["verdict"] = "healthy"
        every, last = epsseeds.converged_split(bad)
        check(abs(every - 0.75) < 0.01 and last == 0.0, f"converged_split {every}, {last}")
        out = section(findings, deqbench, d, [bad] + noise[1:])
        check("ε = 0.1 seed 1 (75% of its steps' forward solves converged, 0% of the last "
              "10%; health: no label)" in out, f"collapse: not named:\n{out}")
        check("Without the seeds that lost convergence" in out,
              "collapse: no spread without the lost seed")
    if FAILED:
        print(f"{len(FAILED)} check(s) failed")
        return 1
    print("ok: ε-in-training findings on 4 fixtures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
