#!/usr/bin/python3
"""test_plot.py — meson test 'plots': plots/plot.py and plots/table.py on
records that deqbench itself writes.

usage: /usr/bin/python3 plots/test_plot.py DEQBENCH SOURCE_ROOT

Runs a tiny real suite (12 runs of a 2-head d_model=8 transformer on
synthetic tokens: unroll and checkpoint at L = 2 and 4, deq with Broyden and
Anderson at caps 2 and 4 and tolerances 0.1 and 1e-3, trace=true), adds one
copy of a record marked status "error" (what a failed run leaves), then
checks that plot.py draws all seven figures as PNG and SVG, notes the skipped
record, rewrites byte-identical files on a second run, and fails with exit
status 2 on a missing file; that the time-ratio estimate and interval are
report's step_mean_x_unroll, and that where a report row is priced (stub
rows for report --price, prices.jsonl beside the records) the figure draws
its priced ratio, interval and per-run values, marked "(priced)"; that the convergence figure's per-step flags
are the records' (their mean is solver.*.converged_fraction) and that the
fallback for traces without flags (residual <= tolerance) gives the same
flags; that table.py prints one row per non-unroll run with the converged
fractions for the deq rows and, like plot.py's budget labels, the
records' own method.label; that a tiny model saved with save_params and
evaluated by an eval suite gives kind "eval" records from which plot.py
draws eps-infer; that the ε figures' estimate over seeds
(epsseeds.gm_interval) is report's step_ms on seeded copies, from which
plot.py draws eps-sweep, and that a seed whose forward solves stop
converging reads as lost convergence; and that the reviewer-question suites in bench/suites expand to the expected
number of runs (--dry-run). Exits 77 (meson's skip) when matplotlib is
missing from this interpreter.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

try:
    import matplotlib  # noqa: F401  (only checking it is there)
except ImportError:
    print("skip: matplotlib missing; install python3-matplotlib (scripts/setup.sh)")
    sys.exit(77)

FIGURES = ["memory-vs-depth", "time-ratio", "memory-ratio", "eps-sweep", "residuals",
           "convergence", "step-trace"]

# The reviewer-question suites, and the PyTorch comparisons (selective
# in both impls; not with compile=true), and the runs each expands to.
SUITES = {"gc-vs-deq.json": 21, "gc-vs-deq-gpu.json": 30,
          "gc-vs-deq-trellisnet.json": 12, "depth.json": 114, "default.json": 9,
          "eps-train.json": 18, "eps-infer.json": 39,
          "vs-pytorch.json": 14, "vs-pytorch-gpu.json": 22}

TINY = {
    "name": "plots-test",
    "base": {"model": "transformer", "d_model": 8, "n_heads": 2, "d_ff": 16,
             "seq_len": 8, "batch_size": 2, "corpus": "synthetic", "steps": 3,
             "warmup_steps": 1, "lr_warmup": 1, "eval_tokens": 64, "threads": 1,
             "trace": True},
    "axes": {
        "method": ["unroll", {"method": "checkpoint", "k": 0},
                   {"method": "deq", "f_solver": "broyden", "b_solver": "broyden"},
                   {"method": "deq", "f_solver": "anderson", "b_solver": "anderson"}],
        "depth": [{"layers": 2, "f_max_iter": 2, "b_max_iter": 2},
                  {"layers": 4, "f_max_iter": 4, "b_max_iter": 4}],
        "eps": [{"f_tol": 0.1, "b_tol": 0.1}, {"f_tol": 0.001, "b_tol": 0.001}],
    },
    # unroll and checkpoint ignore the tolerance: one run per depth
    "exclude": [{"method": "unroll", "f_tol": 0.1}, {"method": "checkpoint", "f_tol": 0.1}],
}
N_RUNS = 12


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def check_convergence_flags(root, recs):
    """fig_traces.converged_flags on the tiny suite's deq records: the trace's
    flags average to the record's converged fraction, and with the flags
    removed (a record from before they existed) residual <= tolerance gives
    the same flags, as it must while converged means exactly that."""
    sys.dont_write_bytecode = True  # nothing into plots/
    sys.path.insert(0, os.path.join(root, "plots"))
    import fig_traces as plot  # noqa: E402  (needs the path above)
    n = 0
    for rec in recs:
        if rec["config"]["method"] != "deq":
            continue
        for side, sec in (("fwd", "forward"), ("bwd", "backward")):
            flags, derived = plot.converged_flags(rec, side)
            want = rec["solver"][sec]["converged_fraction"]
            if derived or len(flags) != rec["config"]["steps"]:
                fail(f"{side} flags: derived={derived}, {len(flags)} steps")
            if abs(sum(flags) / len(flags) - want) > 1e-9:
                fail(f"{side} flags average {sum(flags) / len(flags)}, record {want}")
            old = json.loads(json.dumps(rec))
            del old["trace"][f"{side}_converged"]
            flags2, derived2 = plot.converged_flags(old, side)
            if not derived2 or flags2 != flags:
                fail(f"{side}: flags from residual <= tol {flags2} != trace's {flags}")
            n += sum(flags)
    if n == 0:
        fail("no deq step of the tiny suite converged: the flags are not exercised")


def check_eval_figure(deqbench, tmp, env):
    """A trained tiny model saved with save_params, evaluated by an eval
    suite (deq at two tolerances and two caps, unroll at two depths): the
    records are kind "eval" and plot.py draws eps-infer from them (and no
    training figure)."""
    params = os.path.join(tmp, "p.safetensors")
    base = TINY["base"]
    kv = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in base.items()]
    rc, _, err = run([deqbench, "run", *kv, "method=deq", f"save_params={params}",
                      f"out={os.path.join(tmp, 'train.jsonl')}"])
    if rc != 0:
        fail(f"run with save_params exited {rc}: {err[-2000:]}")
    suite = dict(name="eval-test", command="eval",
                 base=dict(base, params=params, eval_warmup=0),
                 axes={"net": [{"method": "deq"}, {"method": "unroll"}],
                       "f_tol": [0.1, 0.001], "f_max_iter": [2, 4], "layers": [2, 4]},
                 exclude=[{"method": "unroll", "f_tol": 0.1},
                          {"method": "unroll", "f_max_iter": 4},
                          {"method": "deq", "layers": 4}])
    path = os.path.join(tmp, "eval.json")
    recs = os.path.join(tmp, "ev", "eval.jsonl")
    with open(path, "w") as f:
        json.dump(suite, f)
    rc, _, err = run([deqbench, "suite", path, f"out={recs}"])
    if rc != 0:
        fail(f"eval suite exited {rc}: {err[-2000:]}")
    with open(recs) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    if len(lines) != 6 or any(r.get("kind") != "eval" or r["status"] != "ok" for r in lines):
        fail(f"eval suite: {[(r.get('kind'), r['status']) for r in lines]}")
    rc, out, err = run([sys.executable, os.path.join(os.path.dirname(__file__), "plot.py"),
                        recs], env)
    stem = recs[: -len(".jsonl")]
    if rc != 0 or out.split() != [f"{stem}.eps-infer.png", f"{stem}.eps-infer.svg"]:
        fail(f"plot.py on eval records: exit {rc}, listed {out.split()}: {err}")


def check_time_estimator(deqbench, root, tmp, lines):
    """The time-ratio figure's bar and whiskers are report's estimator: two
    of the tiny suite's configurations given three seeds each (mean step
    times, every timing.step_ms figure, scaled by made-up factors),
    figbase.ratio_interval of each run's
    mean step time equals report's step_mean_x_unroll (ratio, lo, hi)."""
    sys.path.insert(0, os.path.join(root, "plots"))
    import figbase  # noqa: E402  (needs the path above)
    pick = [r for r in lines if r["config"]["layers"] == 2 and
            r["config"]["method"] in ("unroll", "checkpoint")]
    scale = {"unroll": (1.0, 1.1, 0.95), "checkpoint": (1.3, 1.2, 1.45)}
    path, means = os.path.join(tmp, "seeds.jsonl"), {}
    with open(path, "w") as f:
        for r in pick:
            m = r["config"]["method"]
            for i, k in enumerate(scale[m]):
                c = json.loads(json.dumps(r))
                c["config"]["seed"] = i + 1
                t = c["timing"]["step_ms"]  # every figure scaled: they stay consistent
                for key in t:
                    if isinstance(t[key], (int, float)) and not isinstance(t[key], bool):
                        t[key] *= k
                means.setdefault(m, []).append(c["timing"]["step_ms"]["mean"])
                f.write(json.dumps(c) + "\n")
    rc, out, err = run([deqbench, "report", "--format", "json", path])
    if rc != 0:
        fail(f"report on the seeded copies exited {rc}: {err}")
    rows = json.loads(out)
    row = next((r for r in rows if r["config"]["method"] == "checkpoint"), None)
    if row is None:
        fail(f"no checkpoint row in {[(r['method'], r['runs']) for r in rows]}; "
             f"picked {len(pick)}")
    want = row["step_mean_x_unroll"]
    got = figbase.ratio_interval(means["checkpoint"], means["unroll"])
    for g, k in zip(got, ("ratio", "lo", "hi")):
        if g is None or abs(g - want[k]) > 1e-9 * want[k]:
            fail(f"ratio_interval {got} vs report's step_mean_x_unroll {want}")


def check_priced_time(root, tmp, lines):
    """The time-ratio figure draws report's priced figure where the
    findings quote it (steptime.priced) and each run's measured mean step
    time elsewhere, matched by run identity (config), not by label: stub
    report rows stand in for deqbench report --price (no timing involved),
    one priced (checkpoint L=2: made-up ratio, interval and per-run
    values), one beside but not fully priced (a deq run: measured). With
    prices.jsonl beside the records plot_file asks report for them; with no
    report rows the figure draws measured times and says so."""
    sys.path.insert(0, os.path.join(root, "plots"))
    import figbase  # noqa: E402  (needs the path above)
    import plot as P  # noqa: E402
    import records as R  # noqa: E402
    import steptime  # noqa: E402
    ck = next(r for r in lines if r["config"]["method"] == "checkpoint"
              and r["config"]["layers"] == 2)
    dq = next(r for r in lines if r["config"]["method"] == "deq"
              and r["config"]["layers"] == 2)
    runs_ = [0.25, 0.3, 0.36]  # priced per-run step times (ms), made up
    priced = {"config": ck["config"], "kind": "train", "method": "not a label",
              "health": {"labels": ["beside 3/3"]},
              "priced": {"matched": True, "note": None,
                         "step_ms": {"gmean": figbase.gmean(runs_), "per_run": runs_},
                         "x_unroll": {"ratio": 0.5, "lo": 0.4, "hi": 0.625}}}
    unpriced = {"config": dq["config"], "kind": "train", "method": "deq",
                "health": {"labels": ["beside 1/1"]},
                "priced": dict(priced["priced"], note="a unit without a price")}
    if not steptime.priced(priced) or steptime.priced(unpriced):
        fail("the stub rows do not test what they should (steptime.priced)")
    recs_path = os.path.join(tmp, "priced", "tiny.jsonl")
    os.makedirs(os.path.dirname(recs_path))
    with open(recs_path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in lines))
    prices = os.path.join(tmp, "priced", "prices.jsonl")
    with open(prices, "w") as f:
        f.write("{}\n")  # only its presence matters: report is stubbed
    asked, drawn = [], []
    saved = P.report_rows, P.finish
    try:
        for stub in ([priced, unpriced], []):
            P.report_rows = lambda recs, args=(), stub=stub: asked.append(list(args)) or stub
            P.finish = lambda fig, what, *a: drawn.append((fig, what)) or True
            P.plot_file(recs_path, None, {"time-ratio"})
    finally:
        P.report_rows, P.finish = saved
    if asked != [["--price", prices]] * 2 or len(drawn) != 2:
        fail(f"time-ratio asked report {asked}, drew {len(drawn)} figures")
    runs = [r for r in figbase.runs_of(lines) if R.kind(r.rec) == "train"]
    figbase.label_series(runs)
    measured = {}  # each run's bar from its measured mean step times
    for r in runs:
        base = next(u for u in runs if u.group == r.group and R.method(u.rec) == "unroll")
        measured[R.run_key(r.rec)] = 1.0 if r is base else figbase.ratio_interval(
            r.step_means, base.step_means)[0]
    for (fig, what), with_report in zip(drawn, (True, False)):
        ax = fig.axes[0]
        heights = sorted(round(p.get_height(), 9) for p in ax.patches)
        want = sorted(round(0.5 if with_report and k == R.run_key(ck) else v, 9)
                      for k, v in measured.items())
        notes = {round(t.xy[0], 9): t.get_text() for t in ax.texts if hasattr(t, "xy")}
        marked = [round(p.get_height(), 9) for p in ax.patches
                  if "(priced)" in notes.get(round(p.get_x() + p.get_width() / 2, 9), "")
                  or notes.get(round(p.get_x() + p.get_width() / 2, 9), "").endswith("*")]
        sub = ax.get_title()
        if with_report:
            if marked != [0.5] or heights != want or "(priced)" not in sub \
                    or "priced" not in what:
                fail(f"priced time-ratio: bars {heights} (want {want}), marked {marked}, "
                     f"title {sub!r}")
        elif marked or heights != want or "no deqbench report" not in sub:
            fail(f"time-ratio without report: bars {heights}, marked {marked}, {sub!r}")
        plt_close(fig)
    key = {R.run_key(priced): priced}
    cell = next(c for (g, s), c in P.time_cells(runs, key)[3].items() if c.priced)
    pts = [v / (figbase.gmean(runs_) / 0.5) for v in runs_]
    if (cell.est, cell.lo, cell.hi) != (0.5, 0.4, 0.625) or \
            any(abs(a - b) > 1e-12 for a, b in zip(cell.points, pts)) or len(cell.points) != 3:
        fail(f"priced cell {cell.est, cell.lo, cell.hi} dots {cell.points}, want {pts}")


def plt_close(fig):
    import matplotlib.pyplot as plt  # noqa: E402  (matplotlib: checked at the top)
    plt.close(fig)


def check_eps_seeds(deqbench, root, tmp, lines, env):
    """The ε figures' seeds: three seeded copies of the tiny suite's deq
    runs at cap 2 (both tolerances) and of unroll L=2, step times scaled
    by made-up factors. epsseeds.gm_interval of the seeds' median step
    times is report's step_ms (gmean, lo, hi); plot.py draws eps-sweep
    from them; a copy whose forward solves stop converging in its last
    step is lost_convergence with its fractions, a converged one not."""
    sys.path.insert(0, os.path.join(root, "plots"))
    import epsseeds  # noqa: E402  (needs the path above)
    pick = [r for r in lines if r["config"]["layers"] == 2 and
            (r["config"]["method"] == "unroll" or
             (r["config"]["method"] == "deq" and r["config"]["f_solver"] == "broyden"))]
    path, med = os.path.join(tmp, "eps-seeds.jsonl"), {}
    with open(path, "w") as f:
        for r in pick:
            for i, k in enumerate((1.0, 1.2, 0.9)):
                c = json.loads(json.dumps(r))
                c["config"]["seed"] = i + 1
                for key, v in c["timing"]["step_ms"].items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        c["timing"]["step_ms"][key] = v * k
                tol = c["config"]["f_tol"] if c["config"]["method"] == "deq" else None
                med.setdefault((c["config"]["method"], tol), []).append(
                    c["timing"]["step_ms"]["median"])
                f.write(json.dumps(c) + "\n")
    rc, out, err = run([deqbench, "report", "--format", "json", path])
    if rc != 0:
        fail(f"report on the seeded ε copies exited {rc}: {err}")
    for row in json.loads(out):
        m = row["config"]["method"]
        want = row["step_ms"]
        got = epsseeds.gm_interval(med[(m, row["config"]["f_tol"] if m == "deq" else None)])
        for g, k in zip(got, ("gmean", "lo", "hi")):
            if g is None or abs(g - want[k]) > 1e-9 * want[k]:
                fail(f"gm_interval {got} vs report's step_ms {want} ({row['method']})")
    rc, out, err = run([sys.executable, os.path.join(root, "plots", "plot.py"),
                        "--figures", "eps-sweep", path], env)
    if rc != 0 or not out.split() or not out.split()[0].endswith("eps-seeds.eps-sweep.png"):
        fail(f"plot.py eps-sweep on 3 seeds: exit {rc}, listed {out.split()}: {err}")
    deq = next(r for r in pick if r["config"]["method"] == "deq")
    if epsseeds.lost_convergence(deq) and min(epsseeds.converged_split(deq)) >= 0.9:
        fail("a converged tiny deq run reads as lost")
    bad = json.loads(json.dumps(deq))
    n = len(bad["trace"]["fwd_converged"])
    bad["trace"]["fwd_converged"] = [i < n - 1 for i in range(n)]  # the last step not
    lost = epsseeds.lost_convergence(bad)
    if not lost or lost["last"] != 0.0 or abs(lost["all"] - sum(
            bad["trace"]["fwd_converged"]) / n) > 1e-12:
        fail(f"lost_convergence of a run that stopped converging: {lost}")


def check_key_table(root):
    """records.py takes which keys choose the method and which are output
    only from `deqbench run --help-json`, the table `deqbench report`
    groups by, not from a copied list."""
    sys.path.insert(0, os.path.join(root, "plots"))
    import records as R  # noqa: E402  (needs the path above)
    if R.OUTPUT_KEYS != {"out", "trace", "data_dir", "save_params"}:
        fail(f"output-only keys {sorted(R.OUTPUT_KEYS)}")
    for k in ("method", "k", "f_tol", "solver_batching", "pretrain_steps"):
        if k not in R.METHOD_KEYS:
            fail(f"{k} is not a method key in records.py")
    for k in ("layers", "d_model", "out", "seed"):
        if k in R.METHOD_KEYS:
            fail(f"{k} is a method key in records.py")
    names = [k["name"] for k in R.KEYS]
    if len(names) != len(set(names)) or "anderson_beta" not in names:
        fail("--help-json lists keys twice or misses anderson_beta")
    beta = next(k for k in R.KEYS if k["name"] == "anderson_beta")
    if not (beta["min"] == 0 and beta["min_open"]):
        fail(f"anderson_beta range {beta}")


def check_labels(root, lines, rows):
    """The plots show the records' own method.label (bench's method_label)
    instead of making one: table.py's row of each non-unroll record names
    it, and plot.budget_label gives it without its depth (deq aside: its
    label lacks the history the budget chart compares); a record without
    the label (an older record) still gets one from its config."""
    sys.path.insert(0, os.path.join(root, "plots"))
    import plot as P  # noqa: E402  (matplotlib is there: checked above)
    import records as R  # noqa: E402
    for rec in lines:
        lab = R.get(rec, "method.label")
        if not lab:
            fail(f"a record of this build lacks method.label: {rec['config']}")
        if R.method(rec) != "unroll" and not any(
                f"| transformer {lab} (unroll" in l for l in rows):
            fail(f"table.py has no row labelled {lab!r}:\n" + "\n".join(rows))
        run_ = type("Run", (), {"rec": rec})
        want = " ".join(w for w in lab.split() if not w.startswith("L="))
        if R.method(rec) != "deq" and P.budget_label(run_) != want:
            fail(f"budget_label {P.budget_label(run_)!r}, label {lab!r}")
        old = json.loads(json.dumps(rec))
        del old["method"]["label"]
        if not R.label(old) or R.label(old) == "?":
            fail(f"no label for a record without method.label: {rec['config']}")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    deqbench, root = sys.argv[1], sys.argv[2]
    os.environ["DEQBENCH"] = deqbench  # records.py's key table, in process
    check_key_table(root)
    plot = os.path.join(root, "plots", "plot.py")
    table = os.path.join(root, "plots", "table.py")
    # nothing into plots/; the key table from the deqbench under test
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", DEQBENCH=deqbench)
    py = sys.executable

    for name, n in SUITES.items():
        # device=cpu: the GPU suite expands the same in a build without CUDA
        rc, out, err = run([deqbench, "suite", os.path.join(root, "bench", "suites", name),
                            "--dry-run", "device=cpu"])
        if rc != 0:
            fail(f"{name} --dry-run exited {rc}: {err}")
        if f"{n} of {n} runs" not in out:
            fail(f"{name}: expected {n} runs, dry run says: {out.strip().splitlines()[-1]}")

    tmp = tempfile.mkdtemp(prefix="deqbench-plots-")
    try:
        suite = os.path.join(tmp, "tiny.json")
        recs = os.path.join(tmp, "res", "tiny.jsonl")
        with open(suite, "w") as f:
            json.dump(TINY, f)
        rc, out, err = run([deqbench, "suite", suite, f"out={recs}"])
        if rc != 0:
            fail(f"deqbench suite exited {rc}: {err[-2000:]}")
        with open(recs) as f:
            lines = [json.loads(l) for l in f if l.strip()]
        if len(lines) != N_RUNS or any(r["status"] != "ok" for r in lines):
            fail(f"expected {N_RUNS} ok records, got {[r['status'] for r in lines]}")
        bad = dict(lines[0], status="error", message="marked failed by test_plot.py")
        with open(recs, "a") as f:
            f.write(json.dumps(bad) + "\n")

        rc, out, err = run([py, plot, recs], env)
        if rc != 0:
            fail(f"plot.py exited {rc}: {err}")
        if "skipped" not in err or "marked failed by test_plot.py" not in err:
            fail(f"plot.py did not note the skipped record: {err!r}")
        stem = recs[: -len(".jsonl")]
        want = [f"{stem}.{fig}.{ext}" for fig in FIGURES for ext in ("png", "svg")]
        listed = out.split()
        for path in want:
            if path not in listed:
                fail(f"plot.py did not list {path}; it listed {listed}")
            if not os.path.isfile(path) or os.path.getsize(path) < 1000:
                fail(f"{path} missing or nearly empty")
            with open(path, "rb") as f:
                head = f.read(8)
            if path.endswith(".png") and head != b"\x89PNG\r\n\x1a\n":
                fail(f"{path} is not a PNG")
            if path.endswith(".svg"):
                ET.parse(path)  # raises on malformed XML
        first = {p: open(p, "rb").read() for p in want}
        rc, _, err = run([py, plot, recs], env)
        if rc != 0:
            fail(f"second plot.py run exited {rc}: {err}")
        for p in want:
            if open(p, "rb").read() != first[p]:
                fail(f"{p} differs between two runs on the same records")

        rc, _, err = run([py, plot, os.path.join(tmp, "missing.jsonl")], env)
        if rc != 2:
            fail(f"plot.py on a missing file exited {rc}, want 2")

        check_convergence_flags(root, lines)
        check_time_estimator(deqbench, root, tmp, lines)
        check_priced_time(root, tmp, lines)
        check_eval_figure(deqbench, tmp, env)
        check_eps_seeds(deqbench, root, tmp, lines, env)

        # one row per run that is not unroll: 2 checkpoint + 8 deq; the
        # deq rows give "fwd% / bwd%" converged, checkpoint rows a dash
        rc, out, err = run([py, table, recs], env)
        rows = [l for l in out.splitlines() if l.startswith("| transformer")]
        if rc != 0 or len(rows) != 10:
            fail(f"table.py: exit {rc}, {len(rows)} rows, want 10:\n{out}{err}")
        check_labels(root, lines, rows)
        head = [c.strip() for c in out.splitlines()[0].split("|")]
        col = head.index("fwd / bwd converged")
        for l in rows:
            cell = l.split("|")[col].strip()
            deq = " deq " in l
            if deq != (cell.count("%") == 2) or (not deq and cell != "—"):
                fail(f"table.py: converged cell {cell!r} in row {l}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"ok: {len(FIGURES)} figures in PNG and SVG, deterministic; table; "
          f"{len(SUITES)} suites expand")
    return 0


if __name__ == "__main__":
    sys.exit(main())
