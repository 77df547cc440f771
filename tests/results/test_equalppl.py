#!/usr/bin/python3
"""test_equalppl.py — meson test 'equalppl': the findings' sentence at
equal perplexity (plots/equalppl.py) on made-up report rows: the target,
steps, seconds and × unroll of each row (the priced ratio where the runs
ran beside another and were priced), a row that never reached it, and the
pending line for records without a valid curve.

usage: /usr/bin/python3 tests/results/test_equalppl.py SOURCE_ROOT
"""
import os
import sys


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def row(method, tt, labels=(), priced=None, config=None):
    return {"kind": "train", "impl": "deqbench", "method": method,
            "health": {"labels": list(labels)}, "priced": priced,
            "config": dict({"eval_every": 100}, **(config or {})), "to_target": tt}


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "plots"))
    import equalppl as E
    tt = lambda steps, s, x, px=None, k=3: {
        "target_ppl": 212.5, "target": "auto", "runs": 3, "reached": k,
        "steps": steps, "train_s": s, "train_s_x_unroll": x,
        "priced_s": None, "priced_s_x_unroll": px}
    ok = {"matched": True, "note": None}
    rows = [row("checkpoint L=16 k=4", tt(900, 230.0, 1.21)),
            row("unroll L=16", tt(900, 190.0, 1.0)),
            row("deq broyden/ift", tt(700, 140.0, 0.74, 0.69), ["beside 3/3"], ok,
                {"f_solver": "broyden", "f_history": 0, "f_max_iter": 30}),
            row("deq anderson/ift", tt(None, None, None, k=0), [], None,
                {"f_solver": "anderson", "anderson_m": 5})]
    s = E.sentence(rows, "cpu")
    want = ["valid perplexity 212.50", "resolution 100 steps",
            "unroll L=16 in 900 steps (190.0 s; 3/3 runs)",
            "checkpoint L=16 k=4 in 900 steps (230.0 s, 1.21× unroll's time; 3/3 runs)",
            "deq (Broyden, full history) in 700 steps (140.0 s, 0.69× unroll's time (priced)",
            "deq (Anderson, m = 5): not reached (0/3 runs)"]
    for w in want:
        if w not in s:
            fail(f"{w!r} not in: {s}")
    if s.index("unroll L=16 in") > s.index("checkpoint"):
        fail(f"unroll not first: {s}")
    none = E.sentence([row("unroll L=16", None)], "gpu")
    if "pending" not in none or "GPU" not in none:
        fail(f"no curve: {none}")
    if E.sentence([], "cpu") is not None:
        fail("a sentence without rows")
    print("ok: equal-perplexity sentence")
    return 0


if __name__ == "__main__":
    sys.exit(main())
