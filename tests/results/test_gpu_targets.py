#!/usr/bin/env python3
"""test_gpu_targets.py — plots/gpu_targets.py's arithmetic on made-up
traces: the marginal cost of a solver iteration (least squares of step
time on forward and backward iterations) and bench-block's price lines.

    test_gpu_targets.py SOURCE_ROOT
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(sys.argv[1], "plots"))
import gpu_targets as G  # noqa: E402

FAILS = []


class Records:
    """plots/records.py's get, without its key table (read from a
    deqbench binary at import)."""

    @staticmethod
    def get(rec, path):
        for k in path.split("."):
            rec = rec.get(k) if isinstance(rec, dict) else None
        return rec


G.R = Records


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, file=sys.stderr)


def near(a, b, tol=1e-9):
    return a is not None and abs(a - b) <= tol * max(1.0, abs(b))


def main():
    # y = 2 + 0.3 f + 0.5 b, f and b varying apart: both slopes exact
    f = [10 + (i % 7) for i in range(60)]
    b = [12 + (i * 5 % 11) for i in range(60)]
    y = [2 + 0.3 * x + 0.5 * z for x, z in zip(f, b)]
    fit = G.ols2(y, f, b)
    check(fit and near(fit[0], 0.3) and near(fit[1], 0.5),
          f"two slopes recovered ({fit})")
    # b = f + 3: one slope on their sum
    b2 = [x + 3 for x in f]
    y2 = [1 + 0.4 * (x + z) for x, z in zip(f, b2)]
    fit = G.ols2(y2, f, b2)
    check(fit and near(fit[0], 0.4) and fit[1] is None,
          f"collinear iterations give one slope on the sum ({fit})")
    check(G.ols2([1.0] * 60, [5] * 60, [6] * 60) is None,
          "nothing varies: no slope")
    check(G.ols2(y[:5], f[:5], b[:5]) is None, "too few steps: no slope")
    # marginal skips the warmup steps (their times are compile/first-touch)
    rec = {"config": {"warmup_steps": 5},
           "trace": {"step_ms": [1000.0] * 5 + y, "fwd_iters": [1] * 5 + f,
                     "bwd_iters": [1] * 5 + b}}
    m = G.marginal(rec)
    check(m and near(m[0], 0.3) and near(m[1], 0.5) and m[2] == 60,
          f"marginal leaves the warmup steps out ({m})")
    check(G.marginal({"config": {}, "trace": None}) is None,
          "no trace: no marginal cost")
    # bench-block's price lines
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "bench-block-x.log"), "w") as fh:
            fh.write("bench-block: model=transformer device=cuda (GPU X) "
                     "precision=bf16 B=16 T=128 d_model=512 n_heads=8\n"
                     "block forward, no tape     0.2500 ms (median; ...)\n"
                     "block vjp, input only      0.4000 ms (median; ...)\n"
                     "ratio block/gemm 0.500  (gemm share of block time 40%)\n"
                     "other ops (median ms): attention fwd 0.1; attention + "
                     "layernorms 31% of block time\n")
        os.makedirs(os.path.join(d, "windows", "w1"))
        with open(os.path.join(d, "windows", "w1", "bench-block-y.log"), "w") as fh:
            fh.write("bench-block: model=transformer device=cuda (GPU X) "
                     "precision=fp32 B=16 T=128 d_model=512 n_heads=8\n"
                     "ratio block/gemm 0.600  (gemm share of block time 40%)\n")
        rows = G.bench_block(d)
    check(len(rows) == 2, f"a window's bench-block log is read too ({len(rows)})")
    bf = [r for r in rows if r["precision"] == "bf16"][0]
    check(bf.get("fwd0_ms") == 0.25 and bf.get("vjp0_ms") == 0.4 and
          bf.get("other") == 31, f"price and share lines parsed ({bf})")
    # a PyTorch baseline: whole step compiled, or eager, from a deqtorch
    # that records `compile`; anything older is not accepted
    old = {"config": {"compile": True}}
    check(G.baseline_problem(old) and "invalid baseline" in G.baseline_problem(old),
          "a record without `compile` is an invalid baseline")
    part = {"config": {"compile": True}, "compile": {"scope": "block"}}
    check(G.baseline_problem(part), "a block-only compile is an invalid baseline")
    whole = {"config": {"compile": True},
             "compile": {"scope": "step", "mode": "reduce-overhead"}}
    check(G.baseline_problem(whole) is None, "a whole-step compile is a baseline")
    eager = {"config": {"compile": False}, "compile": None}
    check(G.baseline_problem(eager) is None, "a new eager row is a baseline")
    # section 7: a price configuration's iteration against its block_fwd
    # at the DEQ runs' mean history (their work), or at h = 8
    def price(unit, ms, k, solver=None, fit=None):
        return {"kind": "price", "unit": unit, "median_ms": ms,
                "solver": solver, "fit": fit,
                "shape": {"d_model": 128, "precision": "bf16",
                          "solver_kernels": k}}
    prices = [price("block_fwd", 0.10, "fused"),
              price("solver_update", 0.02, "fused", "broyden",
                    {"a_ms": 0.004, "b_ms": 0.001}),
              price("block_fwd", 0.10, "ops"),
              price("solver_update", 0.09, "ops", "broyden",
                    {"a_ms": 0.05, "b_ms": 0.005})]
    run = {"config": {"method": "deq", "d_model": 128,
                      "solver_kernels": "fused", "f_solver": "broyden"},
           "work": {"solver_update": {"per_step_timed": 40.0},
                    "solver_history_sum": {"per_step_timed": 240.0}}}
    G.R.num = staticmethod(lambda rec, path: G.R.get(rec, path))
    rows = G.solver_iter_rows([("fused.jsonl", run)], prices)
    fused = [r for r in rows if "| fused |" in r]
    ops = [r for r in rows if "| ops |" in r]
    # fused: (0.10 + 0.004 + 0.001 · 6) / 0.10 = 1.10, met at h̄ = 6
    check(len(fused) == 1 and "| 6.0 | 1.10 | **met** |" in fused[0],
          f"fused row at the runs' mean history ({fused})")
    # ops: no run, h = 8: (0.10 + 0.05 + 0.04) / 0.10 = 1.90, missed
    check(len(ops) == 1 and "8.0 (no run) | 1.90 | **missed** |" in ops[0],
          f"ops row at h = 8 without a run ({ops})")
    check(G.section_solver_iter([], []) == [] and G.section_epilogue([]) == [],
          "no prices, no epilogue logs: no sections")
    if FAILS:
        sys.exit(1)
    print("gpu_targets: all checks passed")


if __name__ == "__main__":
    main()
