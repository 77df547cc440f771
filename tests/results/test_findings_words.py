#!/usr/bin/env python3
"""test_findings_words.py — the findings' wording on fixture records.

    test_findings_words.py DEQBENCH SOURCE_ROOT

Memory: the rows `deqbench report --format json` gives for the committed
results/cpu/gc-vs-deq.jsonl (checkpointing 0.281×, the full-history DEQ
0.475×), and the same rows with two limited-memory DEQs added (Broyden
history 8 and Anderson m = 5, their depth+solver figures made up below
checkpointing's): every DEQ memory figure of §1's sentence, its table, the
headline and the GPU answer's sentence names its solver and history, and
the findings say plainly which keeps less, checkpointing or each DEQ.

Replay: plots/replayed.py on made-up results/cpu/replay.json files: `same`,
`differs` (the arithmetic changed since the records' commit, stated with
the first value that differs), `not compared` and an entry for other
records (stale).
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

FAILED = []


def check(cond, msg):
    if not cond:
        FAILED.append(msg)
        print(f"FAIL: {msg}")


class Src:
    """A findings.Source without deqbench: fixed rows."""

    def __init__(self, rows, machine="cpu", suite="gc-vs-deq"):
        self.rows, self.machine, self.suite = rows, machine, suite

    def device(self):
        return "Fixture CPU"

    def where(self):
        return f"`{self.machine}/{self.suite}.jsonl`"


def limited(rows, f):
    """rows plus a Broyden-history-8 and an Anderson m = 5 DEQ row, made from
    the full-history DEQ's row with depth+solver × unroll f(name)."""
    dq = next(r for r in rows if r["method"].startswith("deq"))
    out = list(rows)
    for name, cfg in (("broyden8", {"f_history": 8, "b_history": 8}),
                      ("anderson", {"f_solver": "anderson", "b_solver": "anderson",
                                    "anderson_m": 5})):
        r = copy.deepcopy(dq)
        r["config"].update(cfg)
        r["method"] = f"deq {cfg.get('f_solver', 'broyden')}/ift f_history=..."
        r["depth_solver_x_unroll"] = f(name)
        out.append(r)
    return out


def figures_named(text, rows, W):
    """Every DEQ row's depth+solver figure in text is named by its solver
    within its clause (the figure's 3 decimals, then ×)."""
    for r in rows:
        if not W.is_deq(r):
            continue
        fig = f"{r['depth_solver_x_unroll']:.3f}×"
        name = W.solver_name(r["config"])
        for m in re.finditer(re.escape(fig), text):
            around = text[max(0, m.start() - 60):m.end() + len(name) + 4]
            check(name in around, f"the DEQ figure {fig} is not named ({name}) in: "
                  f"…{around}…")


def memory(deqbench, root, F, W):
    rows = F.report_rows(deqbench, os.path.join(root, "results", "cpu", "gc-vs-deq.jsonl"))
    # the committed rows the fixtures start from: whole-batch unroll,
    # checkpointing and the full-history DEQ (the others are made below)
    rows = [r for r in rows
            if (r["config"]["method"] == "unroll" and
                r["config"].get("microbatches", 1) == 1) or
            r["config"]["method"] == "checkpoint" or
            (W.is_deq(r) and W.solver_name(r["config"]) == "Broyden, full history")]
    s = F.gc_vs_deq_sentence(Src(rows))
    check("the DEQ (Broyden, full history) keeps 0.475×" in s,
          f"§1 does not name the committed DEQ's solver:\n{s}")
    check("Checkpointing every 4 layers keeps less depth+solver memory than the DEQ: "
          "0.281× of unroll's against 0.475× (Broyden, full history)." in s,
          f"§1 does not say plainly that checkpointing keeps less:\n{s}")
    figures_named(s, rows, W)
    table = "\n".join(F.method_lines(Src(rows)))
    check("deq (Broyden, full history)" in table and "deq broyden/ift |" not in table,
          f"§1's table does not name the DEQ's solver:\n{table}")

    lm = limited(rows, {"broyden8": 0.15, "anderson": 0.13}.get)
    s = F.gc_vs_deq_sentence(Src(lm))
    for want in ("the DEQ (Broyden, history 8) 0.150× at",
                 "the DEQ (Anderson, m = 5) 0.130× at",
                 "keeps less depth+solver memory than the DEQ with Broyden, full history: "
                 "0.281× of unroll's against 0.475× (Broyden, full history).",
                 "The DEQs with Broyden, history 8 and Anderson, m = 5 keep less than "
                 "checkpointing: 0.150× (Broyden, history 8), 0.130× (Anderson, m = 5) "
                 "against 0.281×."):
        check(want in s, f"§1 with limited-memory DEQs lacks {want!r}:\n{s}")
    figures_named(s, lm, W)
    table = "\n".join(F.method_lines(Src(lm)))
    check("deq (Broyden, history 8)" in table and "deq (Anderson, m = 5)" in table,
          f"§1's table does not name the limited-memory DEQs:\n{table}")
    h = F.gc_headline(Src(lm), "16-layer transformer, CPU")
    check("The DEQs with Broyden, history 8 and Anderson, m = 5 keep less" in h,
          f"the headline does not say which keeps less:\n{h}")
    figures_named(h, lm, W)

    # selective recomputation and two micro-batches beside them:
    # named in §1's sentence; the whole-batch unroll stays the baseline
    un = next(r for r in rows if r["method"].startswith("unroll"))
    sel, mb = copy.deepcopy(un), copy.deepcopy(un)
    sel["method"], sel["config"]["method"] = "selective L=16", "selective"
    sel["depth_solver_x_unroll"] = 0.625
    mb["method"], mb["config"]["microbatches"] = "unroll L=16 microbatches=2", 2
    mb["depth_solver_x_unroll"] = 0.5
    s = F.gc_vs_deq_sentence(Src([mb] + rows + [sel]))
    check("selective recomputation (the attention probabilities recomputed) keeps "
          "0.625× at" in s and "accumulating two micro-batches keeps 0.500× at" in s,
          f"§1 does not name selective and micro-batches:\n{s}")
    check(F.find([mb] + rows, "unroll") is not mb,
          "the micro-batched unroll row was taken as unroll's")

    # one limited DEQ above checkpointing, one below; the GPU answer's words
    mixed = limited(rows, {"broyden8": 0.3, "anderson": 0.13}.get)
    s = F.answer_sentence(Src(mixed, "gpu", "h100/answer"))
    check("than the DEQs with Broyden, full history and Broyden, history 8: 0.281× of "
          "unroll's against 0.475× (Broyden, full history), 0.300× (Broyden, history 8)."
          in s and "The DEQ with Anderson, m = 5 keeps less than checkpointing: 0.130× "
          "(Anderson, m = 5) against 0.281×." in s,
          f"the GPU answer's sentence on mixed rows:\n{s}")
    figures_named(s, mixed, W)
    check(W.solver_name({"f_solver": "broyden", "f_history": 30, "f_max_iter": 30,
                         "b_mode": "phantom"}) == "Broyden, full history, phantom backward",
          "a phantom-gradient DEQ is not named as such")


def replay_words(root, R):
    tmp = tempfile.mkdtemp(prefix="deqbench-test-words-")
    try:
        d = os.path.join(tmp, "cpu")
        os.makedirs(d)
        shutil.copy(os.path.join(root, "results", "cpu", "depth.jsonl"), d)
        shutil.copy(os.path.join(root, "results", "cpu", "budget.jsonl"), d)
        out = "\n".join(R.lines(tmp))
        check("Replay: not made" in out, f"no replay.json:\n{out}")

        def state(files):
            with open(os.path.join(d, "replay.json"), "w") as f:
                json.dump({"host": "Fixture CPU", "files": files}, f)
            return "\n".join(R.lines(tmp))
        with open(os.path.join(d, "depth.jsonl")) as f:
            made = (json.loads(f.readline()).get("build") or {}).get("git_commit")
        same = {"outcome": "same", "records_commit": made, "kind": "train",
                "steps": 22, "of": 22, "core": "Haswell", "core_source": "inferred",
                "replayed_at": "abc123"}
        diff = dict(same, outcome="differs", steps=40, of=40,
                    first_difference="step 3 loss: 9.1 recorded, 9.2 replayed")
        out = state({"depth.jsonl": same, "budget.jsonl": diff})
        check("gives the records' numbers bit for bit: depth (22 of 22 steps)" in out,
              f"same:\n{out}")
        check(f"**The arithmetic changed since commit {made}**: at commit abc123, "
              "budget's first configuration differs from its records at step 3 loss: "
              "9.1 recorded, 9.2 replayed" in out, f"differs:\n{out}")
        out = state({"depth.jsonl": same, "budget.jsonl": dict(
            outcome="not compared", records_commit=made, why="no corpus")})
        check("- Not replayed: budget (no corpus)." in out, f"not compared:\n{out}")
        out = state({"depth.jsonl": dict(same, records_commit="0000000")})
        check("Not replayed against the committed records: budget, depth" in out,
              f"stale or missing entries:\n{out}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    deqbench, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    sys.path.insert(0, os.path.join(root, "plots"))
    import deqwords as W
    import findings as F
    import replayed as R
    memory(deqbench, root, F, W)
    replay_words(root, R)
    if FAILED:
        print(f"{len(FAILED)} checks failed")
        return 1
    print("findings words: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
