#!/usr/bin/env python3
"""replay.py — does this build still compute the committed CPU records?

    replay.py [--write | --check] [--deqbench BIN] [--steps N] [RESULTS_DIR]

For each records file RESULTS_DIR/cpu/*.jsonl, takes the first record of
the suite's first configuration (lowest suite.combo), reruns its config at
this build for a few steps (--steps, default 8; threads=1 as recorded,
OPENBLAS_CORETYPE set to the record's BLAS core) and compares what the
record holds per step bit for bit:

  - a record with a trace: the first N entries of every trace array but the
    times (loss, grad_norm, lr, solver iterations, residuals, converged
    bits, host reads, jac_loss), and quality.train_loss_first. N stays
    within lr_warmup + 1 steps, the steps whose learning rate does not
    depend on `steps` (bench/run/train_step.c: lr_at);
  - a record without a trace: the whole run when it has at most 40 steps
    (quality's losses, the gradient norm's median and maximum, the
    evaluation counts), else its first step's loss;
  - an eval record: its valid and test loss and evaluations per batch,
    where its params= file is at hand.

Each file ends as one outcome: `same` (every value equal), `differs` (the
first value that is not, named: the arithmetic changed since the records'
commit), or `not compared` with why (the record's BLAS core is not one this
CPU runs, no Brown corpus, another compiler or OpenBLAS than the records',
no torch or another torch for impl=pytorch, no params file). A run that
fails, or a record without the values to compare, is a harness failure:
exit 1.

The records made before host.blas existed do not say which OpenBLAS
core they ran: --write tries this CPU's cores and keeps, per file, the one
whose kernels reproduce the record (Haswell, SkylakeX, Sandybridge and
Prescott, one core per kernel set, in that order), or says that none did;
--check uses that core.

--write writes RESULTS_DIR/cpu/replay.json (plots/findings.py states it in
the findings). --check (tests/meson.build: test `replay`) replays again and
exits 1 when an outcome that this machine could compare is not the one
replay.json states (the arithmetic changed since it was written, or the
records were regenerated: rerun --write and commit it), 77 (skip) when it
could compare none, else 0. Neither: print the outcomes.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

TIMES = ("step_ms", "forward_ms", "backward_ms")
LAST = ("last_fwd_residual_trace", "last_bwd_residual_trace")
# keys a replay sets: where output goes, and the corpus's directory
OWN = ("out", "trace", "save_params", "data_dir")
# the CPU flags (/proc/cpuinfo) an OpenBLAS x86-64 core's kernels need;
# the generic SSE cores (Prescott, Core2, Nehalem, ...) run on any x86-64
AVX512 = ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd")
NEEDS = {"SkylakeX": AVX512, "Cooperlake": AVX512 + ("avx512_bf16",),
         "SapphireRapids": AVX512 + ("avx512_bf16", "amx_tile"),
         "Haswell": ("avx2", "fma"), "Zen": ("avx2", "fma"), "Sandybridge": ("avx",)}
# the cores tried for records that do not name theirs, one per kernel set
TRY_CORES = ("Haswell", "SkylakeX", "Sandybridge", "Prescott")
FULL_MAX_STEPS = 40


class Harness(Exception):
    """The replay itself failed: not a statement about the arithmetic."""


def records(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def first_config(recs):
    runs = [r for r in recs if r.get("kind", "train") in ("train", "eval")]
    if not runs:
        return None
    return min(runs, key=lambda r: (r.get("suite") or {}).get("combo", 0))


def machine_env(deqbench):
    out = subprocess.run([deqbench, "env"], capture_output=True, text=True)
    if out.returncode != 0:
        raise Harness(f"deqbench env: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def core_available(core, host_blas):
    """This CPU runs OpenBLAS's core `core`: its kernels' instructions are
    among the CPU's flags (off x86-64: it is the core OpenBLAS picked)."""
    flags = cpu_flags()
    if flags is None or host_blas.get("cpu_allows") is None and "sse2" not in flags:
        return core == host_blas.get("core")
    return all(f in flags for f in NEEDS.get(core, ()))


class Replayer:
    def __init__(self, deqbench, root, steps):
        self.deqbench, self.root, self.steps = deqbench, root, steps
        self.tmp = tempfile.mkdtemp(prefix="deqbench-replay-")
        self.env = machine_env(deqbench)

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run(self, rec, n, core):
        """The replay's record: rec's config for n steps (eval: as it was)
        under OPENBLAS_CORETYPE=core. Keys of another method than the
        record's (a suite's base gives them to every method; HEAD refuses
        them) are dropped, one at a time, as deqbench names them."""
        c = {k: v for k, v in rec["config"].items() if k not in OWN}
        out = os.path.join(self.tmp, "replay.jsonl")
        if os.path.exists(out):
            os.remove(out)
        c.update(out=out, save_params="")
        if rec.get("kind") == "eval":
            c.pop("steps", None)
        else:
            c.update(trace=True)
            if n < rec["config"]["steps"]:
                # warmup_steps only leaves steps out of the timing; the
                # valid curve (eval_every) reads the model, never changes it
                c.update(steps=n, eval_tokens=0, warmup_steps=0,
                         eval_every=0)
        if c.get("corpus") != "synthetic":
            c["data_dir"] = os.path.join(self.root, "data")
        if c.get("params"):
            c["params"] = os.path.join(self.root, c["params"])
        env = dict(os.environ, OPENBLAS_CORETYPE=core,
                   DQ_RUNS_DIR=os.path.join(self.tmp, "runs"))
        cmd = "eval" if rec.get("kind") == "eval" else "run"
        for _ in range(64):
            cfg = os.path.join(self.tmp, "config.json")
            with open(cfg, "w") as f:
                json.dump(c, f)
            p = subprocess.run([self.deqbench, cmd, cfg], capture_output=True,
                               text=True, env=env, cwd=self.tmp)
            m = re.search(r"deqbench: (\w+)=\S* has no effect with method=", p.stderr)
            if p.returncode == 2 and m and m.group(1) in c:
                del c[m.group(1)]
                continue
            break
        if p.returncode == -4:
            return None  # SIGILL: the core's kernels do not run on this CPU
        if p.returncode != 0:
            raise Harness(f"deqbench {cmd} of the record's config: exit {p.returncode}: "
                          f"{p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''}")
        got = records(out)
        if len(got) != 1 or got[0].get("status") != "ok":
            raise Harness(f"deqbench {cmd}: no ok record in {out}")
        return got[0]


def pairs(rec, got, n):
    """(name, recorded, replayed) of every value compared, in step order."""
    out = []
    if rec.get("kind") == "eval":
        for k in ("valid_loss", "test_loss"):
            out.append((f"quality.{k}", rec["quality"][k], got["quality"][k]))
        k = "forward_evals_per_batch"
        return out + [(f"inference.{k}", rec["inference"][k], got["inference"][k])]
    full = n >= rec["config"]["steps"]
    tr, gt = rec.get("trace"), got.get("trace") or {}
    if tr:
        for i in range(n):
            for k, arr in tr.items():
                if k in TIMES or k in LAST or i >= len(arr):
                    continue
                if k not in gt or i >= len(gt[k]):
                    raise Harness(f"the replay's trace lacks {k}[{i}]")
                out.append((f"step {i} {k}", arr[i], gt[k][i]))
        if full:
            out += [(f"trace.{k}", tr[k], gt.get(k)) for k in LAST if k in tr]
    out.append(("quality.train_loss_first", rec["quality"]["train_loss_first"],
                got["quality"]["train_loss_first"]))
    if full:
        for k in ("train_loss_final", "valid_loss", "test_loss"):
            out.append((f"quality.{k}", rec["quality"][k], got["quality"][k]))
        for k in ("grad_norm_median", "grad_norm_max"):
            out.append((f"health.{k}", rec["health"][k], got["health"][k]))
        for k in ("forward_evals_total", "vjp_evals_total"):
            out.append((f"evals.{k}", rec["evals"][k], got["evals"][k]))
    return out


def first_difference(rec, got, n):
    ps = pairs(rec, got, n)
    if not any(a is not None for _, a, _ in ps):
        raise Harness("the record holds none of the values a replay compares")
    for name, a, b in ps:
        if a != b:
            return f"{name}: {a!r} recorded, {b!r} replayed"
    return None


def steps_of(rec, want):
    """How many steps to replay: rec's whole run, or the first `want`
    within lr_warmup + 1 (the learning rate of later steps depends on
    `steps`)."""
    c = rec["config"]
    if rec.get("kind") == "eval":
        return 0
    if not rec.get("trace"):
        return c["steps"] if c["steps"] <= FULL_MAX_STEPS else 1
    return min(c["steps"], want, c.get("lr_warmup", 0) + 1)


def why_not(rp, rec, core):
    """Why this machine cannot replay rec under core, or None."""
    blas = rp.env["host"].get("blas") or {}
    c = rec["config"]
    rb, lib = rec.get("build") or {}, blas.get("library")
    if core and not core_available(core, blas):
        return (f"the records' OpenBLAS core {core} needs {' '.join(NEEDS.get(core, ()))}, "
                f"which this CPU ({rp.env['host'].get('cpu_model')}) lacks")
    if rb.get("blas") and lib and rb["blas"] != lib:
        return f"this build runs {lib}, the records {rb['blas']}"
    if c.get("corpus") != "synthetic" and \
            not os.path.isdir(os.path.join(rp.root, "data", c.get("corpus", ""))):
        return f"no {c.get('corpus')} corpus in data/ (scripts/fetch-brown.sh)"
    if c.get("params") and not os.path.exists(os.path.join(rp.root, c["params"])):
        return (f"its params file {c['params']} is not committed; "
                f"scripts/reproduce.sh cpu makes it")
    if str(rec.get("impl", "deqbench")).startswith("pytorch"):
        v = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True).stdout.strip()
        if rec["impl"] != f"pytorch-{v}":
            return (f"impl={rec['impl']}: this machine has "
                    f"{'torch ' + v if v else 'no torch'} at /usr/bin/python3")
    return None


def compiler_differs(rec, got):
    a, b = (rec.get("build") or {}), (got.get("build") or {})
    for k in ("compiler", "buildtype", "sanitize"):
        if a.get(k) != b.get(k):
            return f"this build's {k} is {b.get(k)}, the records' {a.get(k)}"
    return None


def replay_file(rp, path, stated):
    """The outcome of one records file (a dict), stated: replay.json's
    entry for it (its core, for records that name none)."""
    recs = records(path)
    rec = first_config(recs)
    name = os.path.basename(path)
    if rec is None:
        return {"outcome": "not compared", "why": "no run record"}
    n = steps_of(rec, rp.steps)
    base = {"records_commit": (rec.get("build") or {}).get("git_commit"),
            "suite": (rec.get("suite") or {}).get("name"),
            "combo": (rec.get("suite") or {}).get("combo"),
            "seed": rec["config"].get("seed"), "kind": rec.get("kind", "train"),
            "steps": n, "of": rec["config"].get("steps") if rec.get("kind") != "eval" else None}
    core = ((rec.get("host") or {}).get("blas") or {}).get("core")
    cores, source = ([core], "record") if core else (None, "inferred")
    if not core and stated and stated.get("core") and \
            stated.get("records_commit") == base["records_commit"]:
        cores = [stated["core"]]
    if cores is None:
        blas = rp.env["host"].get("blas") or {}
        cores = [c for c in TRY_CORES if core_available(c, blas)]
    why = why_not(rp, rec, cores[0] if len(cores) == 1 else None)
    if why:
        return dict(base, outcome="not compared", why=why)
    diffs = []
    for c in cores:
        got = rp.run(rec, n, c)
        if got is None:
            return dict(base, outcome="not compared",
                        why=f"OpenBLAS's {c} kernels stopped on an illegal instruction here")
        if (got["host"].get("blas") or {}).get("core") not in (c, None) and \
                NEEDS.get(got["host"]["blas"]["core"]) != NEEDS.get(c):
            return dict(base, outcome="not compared",
                        why=f"OpenBLAS ran {got['host']['blas']['core']} for OPENBLAS_CORETYPE={c}")
        why = compiler_differs(rec, got)
        if why:
            return dict(base, outcome="not compared", why=why)
        d = first_difference(rec, got, n)
        if d is None:
            return dict(base, outcome="same", core=c, core_source=source,
                        replayed_at=got["build"]["git_commit"])
        diffs.append((c, d, got))
    c, d, got = diffs[0]
    return dict(base, outcome="differs", core=c if len(cores) == 1 else None,
                core_source=source, tried=cores, first_difference=d,
                replayed_at=got["build"]["git_commit"])


def comparable(o):
    return o["outcome"] in ("same", "differs")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    ap.add_argument("--deqbench", default=os.environ.get("DEQBENCH", "build/bench/deqbench"))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("results", nargs="?", default="results")
    a = ap.parse_args()
    root = os.path.dirname(os.path.abspath(a.results))
    d = os.path.join(a.results, "cpu")
    state_path = os.path.join(d, "replay.json")
    state = {}
    if os.path.exists(state_path):
        with open(state_path) as f:
            state = json.load(f)
    files = sorted(f for f in os.listdir(d) if f.endswith(".jsonl"))
    rp = Replayer(os.path.abspath(a.deqbench), root, a.steps)
    out, rc = {}, 0
    try:
        for f in files:
            stated = (state.get("files") or {}).get(f)
            try:
                o = replay_file(rp, os.path.join(d, f), None if a.write else stated)
            except Harness as e:
                print(f"FAIL {f}: harness: {e}")
                rc = 1
                continue
            out[f] = o
            print(f"{f}: {o['outcome']}: " + json.dumps(
                {k: v for k, v in o.items() if k != "outcome"}))
            if a.check and comparable(o):
                keep = ("outcome", "records_commit", "first_difference")
                if not stated or any(stated.get(k) != o.get(k) for k in keep):
                    print(f"FAIL {f}: replay.json states "
                          f"{json.dumps({k: (stated or {}).get(k) for k in keep})}, this "
                          f"build gives {json.dumps({k: o.get(k) for k in keep})}: where "
                          f"the arithmetic changed on purpose, or the records were "
                          f"regenerated, run /usr/bin/python3 scripts/replay.py --write "
                          f"and commit results/cpu/replay.json (the findings state it)")
                    rc = 1
    finally:
        rp.close()
    if a.write and rc == 0:
        blas = rp.env["host"].get("blas") or {}
        with open(state_path, "w") as f:
            json.dump({"made_by": "scripts/replay.py --write",
                       "host": rp.env["host"].get("cpu_model"),
                       "cpu_allows": blas.get("cpu_allows"),
                       "files": out}, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{state_path}: written")
    if a.check and rc == 0 and not any(comparable(o) for o in out.values()):
        print("replay: no records file could be compared on this machine (see above)")
        return 77
    return rc


if __name__ == "__main__":
    sys.exit(main())
