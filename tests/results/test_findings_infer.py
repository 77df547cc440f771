#!/usr/bin/env python3
"""test_findings_infer.py — plots/findings.py's ε-at-inference section and
headline on fixture records, through `deqbench
report --format json` as findings.py reads the committed ones.

    test_findings_infer.py DEQBENCH SOURCE_ROOT

The fixture: eps-train's DEQ trained at ε = 1e-3, cap 30 (3 seeds, each
saving its parameters), and eps-infer's eval records of those files at
f_tol 0.1, 0.01 and 0.001 and of the unrolled net's 3 files at L = 4, 8,
12, with perplexities and times chosen so that each expected figure
follows by hand:

  unroll L=4, 8, 12   valid ppl 187, 172.5, 171   ms 30, 45, 60 (head 20)
  deq ε 0.1, 0.01     valid ppl 180, 173          ms 50, 70
  deq ε 0.001         valid ppl 170 (no depth as good: against L=12, ‡)

each time × 0.95, 1, 1.05 over the 3 seeds (so the ratios of geometric
means are the ratios above, with an interval around them).
"""
import json
import math
import os
import subprocess
import sys
import tempfile

FAILED = []


def check(cond, msg):
    if not cond:
        FAILED.append(msg)
        print(f"FAIL: {msg}")


def params(m, s):
    return f"results/params/fx-{m}-seed{s}.safetensors"


def template(root, suite, method):
    """The first committed record of method in results/cpu/SUITE.jsonl: a
    record `deqbench report` reads (it validates each), whose figures the
    fixtures replace."""
    with open(os.path.join(root, "results", "cpu", suite + ".jsonl")) as f:
        return next(r for r in map(json.loads, f) if r["config"]["method"] == method)


def stats(like, x):
    """A stats object (results/SCHEMA.md) with every member x."""
    return {k: x for k in like}


def eval_rec(tpl, m, L, tol, s, ppl, ms, head=20.0):
    r = json.loads(json.dumps(tpl[m]))
    k = (0.95, 1.0, 1.05)[s - 1]
    c = r["config"]
    c.update({"method": m, "layers": L, "f_tol": tol, "f_max_iter": 30,
              "params": params(m, s), "seed": s})
    r["method"]["method"] = m
    r["method"].pop("label", None)
    r["quality"].update({"valid_ppl": ppl, "valid_loss": math.log(ppl),
                         "test_ppl": ppl - 4, "test_loss": math.log(ppl - 4)})
    inf = r["inference"]
    like = inf["step_ms"]
    inf.update({"step_ms": stats(like, ms * k), "head_ms": stats(like, head),
                "body_ms": stats(like, ms * k - head),
                "forward_evals_per_batch": float(L if m == "unroll" else L + 1)})
    return r


def train_rec(tpl, s):
    r = json.loads(json.dumps(tpl))
    r["config"].update({"method": "deq", "f_tol": 0.001, "f_max_iter": 30,
                        "save_params": params("deq", s), "seed": s})
    return r


def fixture(root, d, with_train=True):
    ev = {m: template(root, "eps-infer", m) for m in ("deq", "unroll")}
    tr = template(root, "eps-train", "deq")
    os.makedirs(os.path.join(d, "cpu"))
    with open(os.path.join(d, "cpu", "eps-infer.jsonl"), "w") as f:
        for s in (1, 2, 3):
            for L, p, ms in ((4, 186 + s, 30), (8, 171.5 + s - 1, 45), (12, 171, 60)):
                f.write(json.dumps(eval_rec(ev, "unroll", L, 0.001, s, p, ms)) + "\n")
            for tol, p, ms in ((0.1, 179 + s - 1, 50), (0.01, 172 + s - 1, 70),
                               (0.001, 170, 90)):
                f.write(json.dumps(eval_rec(ev, "deq", 12, tol, s, p, ms)) + "\n")
    if with_train:
        with open(os.path.join(d, "cpu", "eps-train.jsonl"), "w") as f:
            for s in (1, 2, 3):
                f.write(json.dumps(train_rec(tr, s)) + "\n")


def section(findings, deqbench, d):
    src = findings.Source(deqbench, d, "cpu", "eps-infer")
    train = findings.Source(deqbench, d, "cpu", "eps-train")
    return ("\n".join(findings.section_eps_infer([src], [train])),
            findings.infer_headline(src, train))


def row(text, prefix):
    return next((l for l in text.splitlines() if l.startswith(prefix)), "")


def main():
    deqbench, root = sys.argv[1], os.path.abspath(sys.argv[2])
    sys.path.insert(0, os.path.join(root, "plots"))
    import findings
    with tempfile.TemporaryDirectory(prefix="deqbench-findings-") as d:
        fixture(root, d)
        text, head = section(findings, deqbench, d)
        r1 = row(text, "| CPU | deq | 0.1 | 30 | 3 |")
        r2 = row(text, "| CPU | deq | 0.01 | 30 | 3 |")
        r3 = row(text, "| CPU | deq | 0.001 | 30 | 3 |")
        # ε 0.1 (ppl 180): L=4 (187) is worse, L=8 (172.5) the shallowest as good
        check("| L=8 (172.50) | 1.11× [" in r1, f"ε 0.1 row: {r1!r}")
        # without the head: (50 - 20) / (45 - 20) = 1.2
        check(r1.endswith("| 1.20× [0.99, 1.46] |"), f"ε 0.1 without the head: {r1!r}")
        check("| L=8 (172.50) | 1.56× [" in r2, f"ε 0.01 row: {r2!r}")
        check("| L=12 (171.00) ‡ | 1.50× [" in r3, f"ε 0.001 row (none as good): {r3!r}")
        check("| 180.00 ± 1.00 | 176.00 |" in r1, f"valid ± sd, test ppl: {r1!r}")
        # the range is of the tolerances evaluated, matched or not
        want = ("The DEQ trained at ε = 0.001 (cap 30; 3 trained seeds per setting) and "
                "evaluated at ε from 0.001 to 0.1 takes at best (ε = 0.1) 1.11× [")
        check(want in head, f"headline: {head!r}")
        # ε 0.001 is not as good as any depth: only the matched ones count
        check("at its training ε" not in head, f"headline counts an unmatched ε: {head!r}")
        check("(at ε = 0.001 no unrolled depth is as good" in head,
              f"headline leaves out the unmatched ε: {head!r}")
        check("1.11× its block evaluations" not in head and
              "1.62× its block evaluations" in head, f"evals ratio 13/8: {head!r}")
        check("Matching rule: the shallowest depth" in text, "the rule is not stated")
    with tempfile.TemporaryDirectory(prefix="deqbench-findings-") as d:
        fixture(root, d, with_train=False)
        text, head = section(findings, deqbench, d)
        check("lack the DEQ's training run" in head, f"no eps-train: {head!r}")
        check(row(text, "| CPU | deq | 0.1 | 30 | 3 |"), "no eps-train: the table goes")
    if not FAILED:
        print("PASS")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
