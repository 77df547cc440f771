#!/usr/bin/env python3
"""beside.py — a suite's rows from your records beside the committed
reference rows of the same suite (what scripts/run.sh prints at the end).

    beside.py [--deqbench BIN] MINE.jsonl REFERENCE.jsonl

Rows are `deqbench report --format json`'s (seeds aggregated); a row of
yours is paired with the reference row of the same method label and group.
Step times depend on the machine: compare the ratios × unroll, the memory
(exact) and the perplexity; the reference's host is printed above.
"""
import argparse
import json
import os
import subprocess
import sys


def rows(deqbench, path):
    out = subprocess.run([deqbench, "report", "--format", "json", path],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def host(path):
    with open(path) as f:
        r = json.loads(next(line for line in f if line.strip()))
    h = r.get("host") or {}
    return f"{h.get('cpu_model', '?')}, commit {(r.get('build') or {}).get('git_commit', '?')}"


def f(x, d=2):
    return "–" if x is None else f"{x:.{d}f}"


def cell(r, key, sub=None, d=2):
    if r is None:
        return "–"
    v = r.get(key)
    if sub:
        v = (v or {}).get(sub)
    return f(v, d)


def health(r):
    if r is None:
        return "–"
    labels = r["health"]["labels"]
    return ", ".join(labels) if labels else "healthy"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--deqbench", default=os.environ.get("DEQBENCH", "build/bench/deqbench"))
    ap.add_argument("mine")
    ap.add_argument("reference")
    a = ap.parse_args()
    mine = rows(a.deqbench, a.mine)
    if not os.path.exists(a.reference):
        print(f"(no committed reference {a.reference} at this commit)")
        return 0
    ref = {(r["group"], r["method"]): r for r in rows(a.deqbench, a.reference)}
    print(f"yours: {a.mine}\nreference: {a.reference} ({host(a.reference)})\n")
    print("| method | step ms yours / ref | × unroll yours / ref | depth+solver MiB yours / ref "
          "| valid ppl yours / ref | health yours / ref |")
    print("|---|---:|---:|---:|---:|---|")
    for r in mine:
        q = ref.get((r["group"], r["method"]))
        print(f"| {r['method']} | {cell(r, 'step_ms', 'median')} / {cell(q, 'step_ms', 'median')} "
              f"| {cell(r, 'step_x_unroll', 'ratio')} / {cell(q, 'step_x_unroll', 'ratio')} "
              f"| {cell(r, 'depth_solver_mib')} / {cell(q, 'depth_solver_mib')} "
              f"| {cell(r, 'valid_ppl', 'mean')} / {cell(q, 'valid_ppl', 'mean')} "
              f"| {health(r)} / {health(q)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
