#!/usr/bin/python3
"""test_vspytorch.py — meson test 'vspytorch': the findings' sentence on
deqbench against PyTorch (plots/vspytorch.py) on made-up report rows and a
made-up records file: the mean step of each row, the ratio with Welch's
interval where both sides have two runs and without one where a side has
one, the compile mode and counts read from the records, max-autotune said
missing until a record has it, and no sentence without a deqbench row.

usage: /usr/bin/python3 tests/results/test_vspytorch.py SOURCE_ROOT
"""
import json
import os
import sys
import tempfile


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def row(impl, compiled, per_run):
    g = 1.0
    for x in per_run:
        g *= x
    return {"kind": "train", "impl": impl, "method": "unroll L=16",
            "config": {"compile": compiled, "d_model": 512, "layers": 16, "batch_size": 16,
                       "seq_len": 128, "precision": "bf16", "steps": 300},
            "step_mean_ms": {"gmean": g ** (1 / len(per_run)), "per_run": per_run}}


def records(path, modes):
    with open(path, "w") as f:
        for m in modes:
            f.write(json.dumps({"compile": {"mode": m, "compile_s": 40.2, "graphs": 1,
                                            "graph_breaks": 0}}) + "\n")
        f.write(json.dumps({"compile": None}) + "\n")


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "plots"))
    import vspytorch as V
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "vs-pytorch.jsonl")
        records(p, ["reduce-overhead"])
        rows = [row("deqbench", False, [10.0, 10.4]), row("pytorch-2.11", True, [4.0]),
                row("pytorch-2.11", False, [30.0, 40.0])]
        s = V.sentence(rows, p, "H100")
        for w in ["deqbench with CUDA graphs 10.20 ms (2 runs)",
                  "mode reduce-overhead; compiled in 40 s, 1 graph(s), 0 graph breaks",
                  "4.00 ms (1 run): deqbench's step takes 2.55× (no interval: 1 run on one side)",
                  "PyTorch eager 34.64 ms (2 runs): deqbench's step takes 0.29× [",
                  "max-autotune (GEMM autotuning) not measured yet", "on H100"]:
            if w not in s:
                fail(f"{w!r} not in: {s}")
        if "2.55× that of PyTorch compiled (mode reduce-overhead)" not in V.short(rows, p):
            fail(f"short: {V.short(rows, p)}")
        records(p, ["max-autotune"])
        if "not measured" in V.sentence(rows, p, "H100"):
            fail("max-autotune said missing though a record has it")
        if V.sentence(rows[1:], p, "H100") is not None or V.short(rows[:1], p) != "":
            fail("a sentence without a deqbench or a compiled row")
        if V.source_path(os.path.join(d, "answer.jsonl")) != p or \
                V.source_path(os.path.join(d, "x", "answer.jsonl")) is not None:
            fail("source_path")
    print("ok: deqbench against PyTorch sentence")
    return 0


if __name__ == "__main__":
    sys.exit(main())
