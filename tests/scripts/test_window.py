#!/usr/bin/env python3
"""test_window.py — scripts/gpu-window.sh (the lent GPU window) on the CPU
with DQ_STANDIN=1: the real deqbench trains tiny models on synthetic
tokens in the window's order, so that packing, the order of the parts, the
deadline, the suite's resume across windows, the archive sent back and
unpack are checked without a GPU.

    test_window.py SOURCE_ROOT DEQBENCH
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT, DEQBENCH = sys.argv[1], sys.argv[2]
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, file=sys.stderr)


def tree(tmp):
    """A copy of what the device tool carries: the scripts, the suites,
    deqtorch, and a build folder holding only deqbench."""
    t = os.path.join(tmp, "tree")
    shutil.copytree(os.path.join(ROOT, "scripts"), os.path.join(t, "scripts"))
    for d in ("suites", "pytorch"):
        shutil.copytree(os.path.join(ROOT, "bench", d),
                        os.path.join(t, "bench", d))
    os.makedirs(os.path.join(t, "build-reproduce", "bench"))
    shutil.copy(DEQBENCH, os.path.join(t, "build-reproduce", "bench"))
    return t


def sh(t, args, out, limit, parts=None):
    env = dict(os.environ, DQ_STANDIN="1", OUT=out, LIMIT=str(limit),
               DQ_STANDIN_PYTHON=sys.executable)
    env.pop("PARTS", None)
    if parts:
        env["PARTS"] = parts
    return subprocess.run(["scripts/gpu-window.sh"] + args, cwd=t, env=env,
                          capture_output=True, text=True, timeout=600)


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def window_log(t):
    w = os.path.join(t, "results", "gpu", "standin", "windows")
    last = sorted(os.listdir(w))[-1]
    with open(os.path.join(w, last, "window.log")) as f:
        return os.path.join(w, last), f.read()


def main():
    tmp = tempfile.mkdtemp(prefix="dq-window-")
    try:
        t = tree(tmp)
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        p = sh(t, ["pack"], out, 300)
        check(p.returncode == 0, f"pack exits 0 ({p.returncode}: {p.stderr})")
        carry = os.path.join(t, "results", "tmp", "carry.tar.xz")
        check(os.path.isfile(carry), "pack leaves results/tmp/carry.tar.xz")
        with tarfile.open(carry) as a:
            names = a.getnames()
        check("build-reproduce/bench/deqbench" in names,
              "the archive carries deqbench")
        check(any(n.startswith("build-reproduce/lib/libjansson")
                  for n in names), "the archive carries libjansson")

        # window 1: every part, in order
        p = sh(t, ["run"], out, 400)
        wdir, log = window_log(t)
        torch2 = "torch >= 2" not in open(
            os.path.join(wdir, "torch-compile.log")).read()
        check(p.returncode == (0 if torch2 else 1),
              f"run exits 0, or 1 with compile refused ({p.returncode})")
        starts = [ln.split("start ")[1].split(" ")[0]
                  for ln in log.splitlines() if " start " in ln]
        check(starts == ["answer-seed1", "bench-block-d512-bf16",
                         "torch-deqbench-1", "torch-compile", "torch-eager",
                         "torch-deqbench-2", "answer-rest"],
              f"the parts run in the window's order ({starts})")
        r = os.path.join(t, "results", "gpu", "standin")
        ans = records(os.path.join(r, "answer.jsonl"))
        check(len(ans) == 12, f"the answer suite's 12 runs ({len(ans)})")
        first = [(a["config"]["seed"], a["config"]["method"])
                 for a in ans[:4]]
        check(all(s == 1 for s, _ in first) and
              [m for _, m in first] == ["unroll", "checkpoint", "deq", "deq"],
              f"seed 1's four methods come first ({first})")
        check(all(a["status"] == "ok" for a in ans), "every answer run is ok")
        vs = records(os.path.join(r, "vs-pytorch.jsonl"))
        impls = [v.get("impl", "deqbench").split("-")[0] for v in vs]
        check(impls[0] == "deqbench" and impls[-1] == "deqbench" and
              "pytorch" in impls,
              f"deqbench, PyTorch, deqbench ({impls})")
        check("bench-block" in open(
            os.path.join(wdir, "bench-block-d512-bf16.log")).read(),
            "the prices part ran bench-block")
        arch = os.path.join(out, "window.tgz")
        with tarfile.open(arch) as a:
            names = a.getnames()
        check("results/gpu/standin/answer.jsonl" in names and
              not any(n.endswith(".lock") for n in names),
              "window.tgz holds the records and no lock file")

        # unpack into another tree; an archive reaching outside is refused
        t2 = os.path.join(tmp, "here")
        shutil.copytree(os.path.join(t, "scripts"),
                        os.path.join(t2, "scripts"))
        p = sh(t2, ["unpack", arch], out, 300)
        check(p.returncode == 0 and os.path.isfile(os.path.join(
            t2, "results", "gpu", "standin", "answer.jsonl")),
            f"unpack puts the records under results/gpu ({p.stderr})")
        bad = os.path.join(tmp, "bad.tgz")
        with tarfile.open(bad, "w:gz") as a:
            a.add(os.path.join(t, "scripts", "gpu-window.sh"),
                  arcname="scripts/gpu-window.sh")
        p = sh(t2, ["unpack", bad], out, 300)
        check(p.returncode == 2 and "outside results/gpu" in p.stderr,
              f"unpack refuses files outside results/gpu ({p.returncode})")

        # window 2 resumes: nothing of the suite runs again
        p = sh(t, ["run"], out, 400, parts="seed1 rest")
        wdir, log = window_log(t)
        check(p.returncode == 0, f"a resumed window exits 0 ({p.stderr})")
        check(len(records(os.path.join(r, "answer.jsonl"))) == 12,
              "a resumed window appends no answer run twice")
        check("nothing ran" in open(os.path.join(wdir, "answer-rest.log"))
              .read(), "the resumed suite says nothing ran")

        # recompute (named only): its suite's 12 runs into recompute.jsonl
        p = sh(t, ["run"], out, 300, parts="recompute")
        _, log = window_log(t)
        rc = records(os.path.join(r, "recompute.jsonl")) if os.path.exists(
            os.path.join(r, "recompute.jsonl")) else []
        check(p.returncode == 0 and len(rc) == 12 and
              all(x["status"] == "ok" for x in rc),
              f"PARTS=recompute runs recompute-gpu's 12 runs ({len(rc)}, "
              f"{p.returncode}: {p.stderr[-300:]})")
        check(sum(1 for x in rc if x["config"].get("selective")) == 3,
              "three of them checkpoint with selective segments")

        # fused (named only): prices of both paths, then a DEQ run each
        p = sh(t, ["run"], out, 300, parts="fused")
        fp = os.path.join(r, "fused-prices.jsonl")
        fr = os.path.join(r, "fused.jsonl")
        pr = records(fp) if os.path.exists(fp) else []
        fu = records(fr) if os.path.exists(fr) else []
        kinds = sorted({x["shape"].get("solver_kernels") for x in pr})
        check(p.returncode == 0 and kinds == ["fused", "ops"] and
              len(fu) == 2 and all(x["status"] == "ok" for x in fu),
              f"PARTS=fused prices both paths ({kinds}) and runs the DEQ "
              f"with each ({len(fu)}, {p.returncode}: {p.stderr[-300:]})")

        # epilogue (named only): bench-block with each, then a run each
        p = sh(t, ["run"], out, 300, parts="epilogue")
        er = os.path.join(r, "epilogue.jsonl")
        ep = records(er) if os.path.exists(er) else []
        _, log = window_log(t)
        check(p.returncode == 0 and len(ep) == 2 and
              sorted(x["config"].get("epilogue") for x in ep) ==
              ["fused", "separate"] and
              "start bench-block-epi-fused-bf16" in log,
              f"PARTS=epilogue runs bench-block and a run with each "
              f"({len(ep)}, {p.returncode}: {p.stderr[-300:]})")

        # autotune: Inductor's cache goes back in window.tgz, and unpack
        # takes it (into results/tmp, carried into the next window)
        p = sh(t, ["run"], out, 300, parts="autotune")
        _, log = window_log(t)
        check("start torch-compile-max-autotune" in log,
              "PARTS=autotune runs the max-autotune row")
        with tarfile.open(arch) as a:
            names = a.getnames()
        check("results/tmp/inductor-cache.tgz" in names,
              f"window.tgz carries Inductor's cache ({names[:3]})")
        p = sh(t2, ["unpack", arch], out, 300)
        check(p.returncode == 0 and os.path.isfile(os.path.join(
            t2, "results", "tmp", "inductor-cache.tgz")),
            f"unpack puts the cache under results/tmp ({p.stderr})")

        # a window with no time left skips its parts and exits 3
        p = sh(t, ["run"], out, 10, parts="seed1 prices")
        _, log = window_log(t)
        check(p.returncode == 3 and "skip answer-seed1 (deadline)" in log,
              f"a window out of time skips and exits 3 ({p.returncode})")
        p = sh(t, ["run"], "", 10)
        check(p.returncode == 2 and "OUT is not set" in p.stderr,
              "run without OUT is bad use")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print(f"{len(FAILS)} checks failed", file=sys.stderr)
        sys.exit(1)
    print("gpu-window: all checks passed")


if __name__ == "__main__":
    main()
