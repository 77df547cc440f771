#!/usr/bin/env python3
"""test_replay.py — scripts/replay.py tells a changed arithmetic from a
machine that cannot compare and from a harness failure.

    test_replay.py DEQBENCH SOURCE_ROOT

On copies of results/cpu/depth.jsonl (synthetic corpus: no data needed,
22 steps of a 4-layer net, well under a second a replay):
  - the record as committed replays `same`, and --write then --check passes;
  - the record with its final training loss one ulp off replays `differs`,
    naming that value, and --check against a replay.json that states `same`
    exits 1 saying how to record an intended change;
  - a record whose BLAS core needs instructions this CPU lacks (flags made
    up) is `not compared`, naming the core, and --check with nothing
    comparable exits 77;
  - a deqbench whose runs fail is a harness failure: exit 1, not a finding.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

FAILED = []


def check(cond, msg):
    if not cond:
        FAILED.append(msg)
        print(f"FAIL: {msg}")


def results_with(tmp, recs, name="depth.jsonl"):
    d = os.path.join(tmp, "results")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "cpu"))
    with open(os.path.join(d, "cpu", name), "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    return d


def replay(root, deqbench, *args):
    return subprocess.run(["/usr/bin/python3", os.path.join(root, "scripts", "replay.py"),
                           "--deqbench", deqbench] + list(args),
                          capture_output=True, text=True)


def main():
    deqbench, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    sys.path.insert(0, os.path.join(root, "scripts"))
    import replay as R
    with open(os.path.join(root, "results", "cpu", "depth.jsonl")) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    first = R.first_config(recs)
    tmp = tempfile.mkdtemp(prefix="deqbench-test-replay-")
    try:
        # as committed: same, --write, then --check passes
        d = results_with(tmp, [first])
        p = replay(root, deqbench, "--write", d)
        if "depth.jsonl: not compared" in p.stdout:
            skipped = p.stdout.strip()
        else:
            skipped = None
            bitwise(root, deqbench, tmp, d, first, p)
        machine_free(root, deqbench, tmp, first, R)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILED:
        print(f"{len(FAILED)} checks failed")
        return 1
    if skipped:
        print(f"the bit-for-bit checks skipped: this machine cannot compare the "
              f"record: {skipped}")
        return 77
    print("replay: all checks passed")
    return 0


def bitwise(root, deqbench, tmp, d, first, p):
    """The committed record replays same; one ulp off, it differs."""
    check(p.returncode == 0 and "depth.jsonl: same" in p.stdout,
          f"the committed record does not replay same:\n{p.stdout}{p.stderr}")
    p = replay(root, deqbench, "--check", d)
    check(p.returncode == 0, f"--check after --write: exit {p.returncode}\n{p.stdout}")
    # one ulp off: differs, named; --check against 'same' fails
    off = json.loads(json.dumps(first))
    v = off["quality"]["train_loss_final"]
    off["quality"]["train_loss_final"] = math.nextafter(v, math.inf)
    stated = os.path.join(d, "cpu", "replay.json")
    with open(stated) as f:
        state = json.load(f)
    d = results_with(tmp, [off])
    with open(os.path.join(d, "cpu", "replay.json"), "w") as f:
        json.dump(state, f)
    p = replay(root, deqbench, "--check", d)
    check(p.returncode == 1, f"--check of a record one ulp off: exit {p.returncode}")
    check("depth.jsonl: differs" in p.stdout and "quality.train_loss_final" in p.stdout,
          f"the difference is not named:\n{p.stdout}")
    check("scripts/replay.py --write" in p.stdout,
          f"--check does not say how to record an intended change:\n{p.stdout}")
    p = replay(root, deqbench, "--write", d)
    p = replay(root, deqbench, "--check", d)
    check(p.returncode == 0, f"--check after --write states the change: exit "
          f"{p.returncode}\n{p.stdout}")
    with open(os.path.join(d, "cpu", "replay.json")) as f:
        o = json.load(f)["files"]["depth.jsonl"]
    made = ((first.get("build") or {}).get("git_commit") or "")[:12]
    check(o["outcome"] == "differs" and o["records_commit"] == made,
          f"replay.json's entry: {o} (the record's commit is {made})")


def machine_free(root, deqbench, tmp, first, R):
    """What does not hang on this machine's arithmetic."""
    # a core this CPU lacks (made-up flags): not compared, and --check
    # with nothing comparable skips
    R.cpu_flags = lambda: {"sse2", "sse3"}
    check(not R.core_available("Haswell", {"cpu_allows": None}) and
          R.core_available("Prescott", {"cpu_allows": None}),
          "core_available: Haswell on an SSE-only CPU")
    named = json.loads(json.dumps(first))
    named["host"]["blas"] = {"core": "Haswell", "library": "OpenBLAS 0.3.21"}
    rp = R.Replayer(deqbench, tmp, 8)
    try:
        o = R.replay_file(rp, os.path.join(results_with(tmp, [named]), "cpu",
                                           "depth.jsonl"), None)
    finally:
        rp.close()
    check(o["outcome"] == "not compared" and "Haswell" in o["why"] and
          "avx2" in o["why"], f"a core this CPU lacks: {o}")
    ev = json.loads(json.dumps(first))
    ev.update(kind="eval")
    ev["config"]["params"] = "results/params/absent.safetensors"
    p = replay(root, deqbench, "--check", results_with(tmp, [ev]))
    check(p.returncode == 77 and "not committed" in p.stdout,
          f"nothing comparable: exit {p.returncode}\n{p.stdout}")

    # a harness failure is not a finding
    fake = os.path.join(tmp, "deqbench")
    with open(fake, "w") as f:
        f.write(f"#!/bin/sh\n[ \"$1\" = env ] && exec {deqbench} env\n"
                "echo 'deqbench: out of memory' >&2\nexit 1\n")
    os.chmod(fake, 0o755)
    p = replay(root, fake, "--check", results_with(tmp, [first]))
    check(p.returncode == 1 and "harness" in p.stdout,
          f"a failing deqbench: exit {p.returncode}\n{p.stdout}")


if __name__ == "__main__":
    sys.exit(main())
