#!/usr/bin/env python3
"""test_results_text.py — the text around the committed results says only
what the committed records and logs say (results audit F12).

    test_results_text.py DEQBENCH SOURCE_ROOT

  - plots/gpu_targets.py's note on torch.compile is read from the logs
    beside the records (deqtorch's "torch.compile of ..." line), not typed
    in the generator;
  - no suite description (bench/suites/*.json) gives a duration (measured
    ones are in results/README.md's generated table, from reproduce.log),
    every file a description names exists, and a `git show C:PATH` it
    cites names a file of commit C (where git is);
  - plots/made.py counts the records of results/cpu and results/gpu only;
  - no lock file under results/ is tracked, and .gitignore ignores them
    (where git is).
"""
import glob
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


def targets(deqbench, root, d):
    r = subprocess.run([sys.executable, os.path.join(root, "plots", "gpu_targets.py"),
                        "--deqbench", deqbench, d], capture_output=True, text=True)
    check(r.returncode == 0, f"gpu_targets.py {d}: exit {r.returncode}: {r.stderr}")
    return r.stdout


def compile_note(deqbench, root):
    """F12: TARGETS.md §5 says what compile=true compiled only from the logs."""
    d = tempfile.mkdtemp(prefix="deqbench-targets-")
    try:
        shutil.copy(os.path.join(root, "results", "gpu", "check",
                                 "nvidia-h200-vs-pytorch.jsonl"), d)
        out = targets(deqbench, root, d)
        check("compiles the block only" not in out,
              "gpu_targets.py prints a fixed note on what compile=true compiles")
        check("not known from this folder" in out,
              "without a log, §5 does not say that what was compiled is unknown")
        with open(os.path.join(d, "torch-compile.log"), "w") as f:
            f.write("deqtorch: unroll training, 60 steps\n"
                    "deqtorch: torch.compile of unroll's layers: 3 graphs, 1 graph breaks\n")
        out = targets(deqbench, root, d)
        check("torch-compile.log: unroll's layers, 3 graphs, 1 graph breaks" in out,
              f"§5 does not give the log's compile line:\n{out}")
    finally:
        shutil.rmtree(d)


PATH = re.compile(r"\b(?:results|bench|docs|plots|scripts|tests)/[\w./-]*\w\.(?:md|json|jsonl|py|sh|c|h)\b")
SHOW = re.compile(r"git show ([0-9a-f]{7,40}):([\w./-]*\w)")
DURATION = re.compile(r"\b\d+(?:\.\d+)?\s*(?:ms|s|min|minutes|hours?)\b|\b(?:about|estimated) "
                      r"(?:a few|\d+) (?:min|minutes|hours?)\b", re.I)


def descriptions(root, git):
    """F12: suite descriptions cite no durations and no file that is not
    there."""
    for p in sorted(glob.glob(os.path.join(root, "bench", "suites", "*.json"))):
        name = os.path.basename(p)
        with open(p) as f:
            text = json.load(f).get("description", "")
        for m in DURATION.finditer(text):
            check(False, f"{name}: a duration in its description: {m[0]!r}")
        shown = set()
        for m in SHOW.finditer(text):
            shown.add(m[2])
            if git:
                r = subprocess.run(["git", "-C", root, "cat-file", "-e", f"{m[1]}:{m[2]}"],
                                   capture_output=True)
                check(r.returncode == 0, f"{name}: cites {m[1]}:{m[2]}, which is not there")
        for m in PATH.finditer(text):
            if m[0] in shown:
                continue
            check(os.path.exists(os.path.join(root, m[0])),
                  f"{name}: names {m[0]}, which is not in the tree")


def lock_files(root):
    """F12: the records' lock files are neither committed nor committable."""
    tracked = subprocess.run(["git", "-C", root, "ls-files", "results"],
                             capture_output=True, text=True).stdout.split()
    locks = [p for p in tracked if p.endswith(".lock")]
    check(not locks, f"lock files are committed: {locks}")
    r = subprocess.run(["git", "-C", root, "check-ignore", "-q", "--no-index",
                        "results/cpu/gc-vs-deq.jsonl.lock"])
    check(r.returncode == 0, ".gitignore does not ignore results/*/*.jsonl.lock")


def made_counts(root):
    """The generated "how these results were made" table counts the
    committed records only: results/cpu and results/gpu, not results/local
    (a user's own runs, which made `meson test findings` fail after
    scripts/run.sh)."""
    sys.path.insert(0, os.path.join(root, "plots"))
    import made
    d = tempfile.mkdtemp(prefix="deqbench-made-")
    try:
        rec = json.dumps({"suite": {"name": "s"}}) + "\n"
        for sub, n in (("cpu", 1), ("gpu/check", 2), ("local", 4), ("params", 8)):
            os.makedirs(os.path.join(d, "results", sub))
            with open(os.path.join(d, "results", sub, "s.jsonl"), "w") as f:
                f.write(rec * n)
        got = made.record_files(os.path.join(d, "results"))
        check(got == {"s": [("results/cpu/s.jsonl", 1), ("results/gpu/check/s.jsonl", 2)]},
              f"made.py counts records outside results/cpu and results/gpu: {got}")
    finally:
        shutil.rmtree(d)


def main():
    deqbench, root = sys.argv[1], os.path.abspath(sys.argv[2])
    git = subprocess.run(["git", "-C", root, "rev-parse", "--git-dir"],
                         capture_output=True).returncode == 0
    compile_note(deqbench, root)
    descriptions(root, git)
    made_counts(root)
    if git:
        lock_files(root)
    else:
        print("no git here: the lock-file and git show checks are left out")
    if not FAILED:
        print("PASS")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
