#!/usr/bin/env python3
"""test_scripts.py — scripts/run.sh, scripts/setup.sh and
scripts/reproduce.sh against stand-ins, so that what the scripts decide
(arguments, budgets, signals, progress, CUDA) is checked without
installing, building or training.

    test_scripts.py SOURCE_ROOT [TEST ...]

Each test copies the scripts into a fresh folder (a tree of their own: no
git, Brown as 500 empty files) beside stand-ins: a deqbench
(build/bench/deqbench) that logs its calls and, for `suite`, appends a
record or waits for a signal; meson, ninja, dpkg-query, nvidia-smi,
apt-get, npm and taskset on PATH; scripts/cpu-rate.sh, plots/plot.sh and
plots/findings.py that leave a mark. Every process a test starts carries
DQ_TEST_TREE=<its folder> in its environment; a test fails if one is still
alive when the script under test has ended, and kills it (by its id).
"""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

ROOT = None
COMMIT = "0123456789ab"

# deqbench: logs each call to calls.jsonl (argv, pid, process group,
# session, $OPENBLAS_CORETYPE); `env` says OpenBLAS runs generic kernels
# with STUB_BLAS=generic; `suite` and `plan` append a record to out= or, with STUB_SUITE=hang,
# waits for SIGINT/SIGTERM (each one received is logged to sig.PID), lingers
# 0.5 s so that a second signal would be seen, and exits 128 + signal.
DEQBENCH = r'''#!PYTHON
import json, os, signal, sys, time
d = os.environ["STUB_DIR"]
a = sys.argv[1:]
with open(os.path.join(d, "calls.jsonl"), "a") as f:
    f.write(json.dumps({"argv": a, "pid": os.getpid(), "pgid": os.getpgid(0),
                        "sid": os.getsid(0),
                        "coretype": os.environ.get("OPENBLAS_CORETYPE")}) + "\n")
cmd = a[0] if a else ""
if cmd == "env":
    e = {"build": {"git_commit": "COMMIT"}}
    if os.environ.get("STUB_BLAS") == "generic":
        e["host"] = {"blas": {"core": "Prescott", "generic": True,
                              "cpu_allows": "SkylakeX"}}
    print(json.dumps(e))
elif cmd == "suite" and os.environ.get("STUB_SUITE") == "hang":
    got = []
    def on(sig, _):
        got.append(sig)
        with open(os.path.join(d, "sig.%d" % os.getpid()), "a") as f:
            f.write(signal.Signals(sig).name + "\n")
    signal.signal(signal.SIGINT, on)
    signal.signal(signal.SIGTERM, on)
    open(os.path.join(d, "running.%d" % os.getpid()), "w").close()
    while not got:
        time.sleep(0.02)
    end = time.time() + 0.5
    while time.time() < end:
        time.sleep(0.02)
    sys.exit(128 + got[0])
elif cmd == "compare":
    print("| group | method | time |")
    sys.exit(1 if os.environ.get("STUB_COMPARE") == "fail" else 0)
elif cmd == "price":
    out = [x[4:] for x in a if x.startswith("out=")][-1]
    with open(out, "a") as f:
        f.write(json.dumps({"kind": "price", "unit": "block_fwd",
                            "host": {"hostname": "h"},
                            "build": {"git_commit": "COMMIT"}}) + "\n")
elif cmd in ("suite", "plan") and "--dry-run" not in a:
    out = [x[4:] for x in a if x.startswith("out=")][-1]
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "a") as f:
        f.write(json.dumps({"host": {"hostname": "h"},
                            "build": {"git_commit": "COMMIT"}}) + "\n")
'''

# PATH stand-ins: name -> script. meson logs its arguments and makes the
# build folder (dq_build.h says whether CUDA was asked for); ninja prints
# progress as ninja does into a pipe; nvidia-smi succeeds with STUB_GPU=1.
PATH_STUBS = {
    "dpkg-query": "#!/bin/sh\nprintf 'install ok installed'\n",
    "apt-get": "#!/bin/sh\necho \"$@\" >>\"$STUB_DIR/apt-get\"\nexit 1\n",
    "npm": "#!/bin/sh\necho \"$@\" >>\"$STUB_DIR/npm\"\nexit 1\n",
    "nvidia-smi": "#!/bin/sh\n[ \"${STUB_GPU:-0}\" = 1 ] || exit 9\n"
                  "echo 'GPU 0: NVIDIA H100 (UUID: GPU-0)'\n",
    "taskset": "#!/bin/sh\nshift 2\nexec \"$@\"\n",
    "meson": r'''#!/bin/sh
echo "$@" >>"$STUB_DIR/meson"
[ "$1" = setup ] || [ "$1" = configure ] || exit 0
mkdir -p "$2"
touch "$2/build.ninja"
case " $* " in
*" -Dcuda=enabled "*) echo '#define DQ_CUDA_BUILD 1' >"$2/dq_build.h" ;;
*) echo '#define DQ_CUDA_BUILD 0' >"$2/dq_build.h" ;;
esac
''',
    "ninja": r'''#!/bin/sh
echo "$@" >>"$STUB_DIR/ninja"
echo "ninja: Entering directory \`$2'"
i=1
while [ $i -le 8 ]; do echo "[$i/8] Compiling C object x$i.o"; i=$((i + 1)); done
''',
}

MARK = "#!/bin/sh\necho \"$0 $*\" >>\"$STUB_DIR/marks\"\n"


def write(path, text, mode=0o755):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def make_tree():
    """A scripts tree in a new folder; returns (tree, env)."""
    tree = tempfile.mkdtemp(prefix="deqbench-scripts-")
    os.makedirs(os.path.join(tree, "scripts"))
    for s in ("run.sh", "setup.sh", "reproduce.sh", "fetch-brown.sh",
              "blas-coretype.sh", "price-check.sh"):
        shutil.copy(os.path.join(ROOT, "scripts", s), os.path.join(tree, "scripts", s))
    shutil.copytree(os.path.join(ROOT, "bench", "suites"), os.path.join(tree, "bench", "suites"))
    write(os.path.join(tree, "scripts", "cpu-rate.sh"), MARK)
    write(os.path.join(tree, "plots", "plot.sh"), MARK)
    write(os.path.join(tree, "scripts", "replay.py"),
          "import os, sys\nopen(os.environ['STUB_DIR'] + '/marks', 'a')"
          ".write('replay.py\\n')\n")
    write(os.path.join(tree, "plots", "findings.py"),
          "import os, sys\nopen(os.environ['STUB_DIR'] + '/marks', 'a')"
          ".write('findings.py\\n')\n")
    raw = os.path.join(tree, "data", "brown", "raw")
    os.makedirs(raw)
    for c in "abcde":
        for n in range(100):
            open(os.path.join(raw, f"c{c}{n:02d}"), "w").close()
    write(os.path.join(tree, "build", "bench", "deqbench"),
          DEQBENCH.replace("PYTHON", sys.executable).replace("COMMIT", COMMIT))
    stubs = os.path.join(tree, "stubs")
    for name, text in PATH_STUBS.items():
        write(os.path.join(stubs, name), text)
    os.makedirs(os.path.join(tree, "results", "cpu"))
    env = dict(os.environ, STUB_DIR=tree, DQ_TEST_TREE=tree,
               PATH=stubs + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
               GIT_DIR=os.path.join(tree, "no-git"), DQ_BUILDDIR="build",
               DQ_LOADAVG_FILE=os.path.join(tree, "loadavg"))
    write(os.path.join(tree, "loadavg"), "0.00 0.00 0.00 1/100 1\n", 0o644)
    for k in ("DQ_SKIP_SETUP", "DQ_CUDA", "DQ_REPRODUCE_ARGS", "STUB_GPU", "STUB_SUITE",
              "STUB_BLAS", "STUB_COMPARE", "OPENBLAS_CORETYPE"):
        env.pop(k, None)
    return tree, env


def calls(tree, cmd=None):
    p = os.path.join(tree, "calls.jsonl")
    if not os.path.exists(p):
        return []
    cs = [json.loads(line) for line in open(p)]
    return [c for c in cs if cmd is None or (c["argv"] and c["argv"][0] == cmd)]


def read(tree, name):
    p = os.path.join(tree, name)
    return open(p).read() if os.path.exists(p) else ""


def leftovers(tree):
    """Ids of live processes whose environment names this tree."""
    me, found = os.getpid(), []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and b"DQ_TEST_TREE=" + tree.encode() + b"\0" in env:
            found.append(int(pid))
    return found


def kill_leftovers(tree):
    pids = leftovers(tree)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def run(tree, env, args, timeout=60, **kw):
    return subprocess.run(args, cwd=tree, env=env, capture_output=True,
                          text=True, timeout=timeout, **kw)


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def one_line(r, *words):
    """r exited 2 with one line on stderr that holds every word."""
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    check(r.returncode == 2, f"exit {r.returncode}, not 2; stderr: {r.stderr[-600:]}")
    check(len(lines) == 1, f"{len(lines)} lines on stderr, not one: {r.stderr[-600:]}")
    for w in words:
        check(w in lines[0], f"the line does not say {w!r}: {lines[0]}")


# ---- scripts/run.sh ----

def t_run_key_first(tree, env):
    """G20.3: a key=value (or a flag) as the first argument is not the
    suite: the default suite runs with it."""
    env["DQ_SKIP_SETUP"] = "1"
    write(os.path.join(tree, "results", "cpu", "default.jsonl"), "{}\n", 0o644)
    r = run(tree, env, ["scripts/run.sh", "steps=3"])
    check(r.returncode == 0, f"run.sh steps=3: exit {r.returncode}: {r.stderr[-800:]}")
    s = calls(tree, "suite")
    check(len(s) == 1, f"{len(s)} suite calls")
    a = s[0]["argv"]
    check(a[1] == "bench/suites/default.json" and "steps=3" in a and
          "out=results/local/default.jsonl" in a, f"suite called as {a}")
    check(calls(tree, "compare"), "no compare after the suite")
    # the reference's shapes priced here (one thread, core 0),
    # then the reference re-priced and your runs measured beside priced
    p = calls(tree, "price")
    check(len(p) == 1 and p[0]["argv"][1] == "results/cpu/default.jsonl" and
          "core=0" in p[0]["argv"] and "threads=1" in p[0]["argv"] and
          "out=results/local/default.prices.jsonl" in p[0]["argv"],
          f"price called as {p}")
    rp = [c["argv"] for c in calls(tree, "report")]
    check(rp == [["report", "--price", "results/local/default.prices.jsonl", f]
                 for f in ("results/cpu/default.jsonl",
                           "results/local/default.jsonl")],
          f"report calls {rp}")
    check("re-priced on this machine" in r.stdout, r.stdout[-800:])


def t_run_dry_run(tree, env):
    """G20.3: run.sh --dry-run lists the default suite's runs; nothing is
    fetched, run or compared."""
    env["DQ_SKIP_SETUP"] = "1"
    shutil.rmtree(os.path.join(tree, "data"))
    r = run(tree, env, ["scripts/run.sh", "--dry-run"])
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-800:]}")
    s = calls(tree, "suite")
    check(len(s) == 1 and s[0]["argv"][1] == "bench/suites/default.json" and
          "--dry-run" in s[0]["argv"], f"suite calls {s}")
    check(not calls(tree, "compare"), "compare ran after a dry run")
    check(not read(tree, "npm"), "Brown fetched for a dry run")


def t_run_out_refused(tree, env):
    """G20.4: out= is the script's own: refused with one line that says
    where the records go, before anything is installed or run."""
    r = run(tree, env, ["scripts/run.sh", "bench/suites/default.json", "out=x.jsonl"])
    one_line(r, "out=", "results/local/")
    check(not calls(tree) and not read(tree, "meson"), "something ran")


def t_run_missing_suite(tree, env):
    """A suite file that is not there: one line, exit 2, nothing set up."""
    r = run(tree, env, ["scripts/run.sh", "nosuch.json"])
    one_line(r, "nosuch.json")
    check(not calls(tree) and not read(tree, "meson"), "something ran")


def t_run_suite_name_path(tree, env):
    """G21: a suite whose name would make results/local/NAME.jsonl a path
    elsewhere (../, /) is refused: exit 2, one line, nothing written."""
    env["DQ_SKIP_SETUP"] = "1"
    for bad in ("../../escape", "/tmp/x", "a/b", ".hidden", ""):
        with open(os.path.join(tree, "s.json"), "w") as f:
            json.dump({"name": bad, "base": {"corpus": "synthetic"}}, f)
        r = run(tree, env, ["scripts/run.sh", "s.json"])
        one_line(r, "name")
        check(not calls(tree, "suite"), f"name {bad!r}: the suite ran")
    check(not os.path.exists(os.path.join(tree, "escape.jsonl")) and
          not os.path.exists(os.path.join(tree, "results", "escape.jsonl")),
          "a record file was written outside results/local")
    write(os.path.join(tree, "s.json"), "{not json", 0o644)
    one_line(run(tree, env, ["scripts/run.sh", "s.json"]), "s.json")


def t_run_progress_and_cuda(tree, env):
    """A line per phase (packages, configuring, building with
    progress, Brown, the suite); no GPU: CUDA is not compiled and the
    line says so."""
    r = run(tree, env, ["scripts/run.sh", "steps=3"])
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-800:]}")
    err = r.stderr
    for pat in (r"setup: .*packages", r"setup: configuring build", r"CUDA",
                r"setup: building build", r"setup: built 8 of 8",
                r"fetch-brown: ", r"run.sh: running suite default"):
        check(re.search(pat, err), f"no line matching {pat!r} in:\n{err}")
    m = read(tree, "meson")
    check("-Dcuda=disabled" in m, f"meson setup without -Dcuda=disabled: {m}")
    check(err.index("setup: building") < err.index("run.sh: running suite"),
          "phases out of order")


def t_setup_cuda_choice(tree, env):
    """scripts/setup.sh compiles CUDA where a GPU is present (nvidia-smi
    -L), or when asked (DQ_CUDA=1, -Dcuda=...), and says which; an
    existing build keeps what it was configured with."""
    cases = [({"STUB_GPU": "1"}, [], "-Dcuda=auto"),
             ({"DQ_CUDA": "1"}, [], "-Dcuda=enabled"),
             ({}, ["-Dcuda=enabled"], "-Dcuda=enabled"),
             ({}, ["-Dcuda=auto"], "-Dcuda=auto"),
             ({}, [], "-Dcuda=disabled")]
    for i, (extra, args, want) in enumerate(cases):
        e = dict(env, DQ_BUILDDIR=f"b{i}", **extra)
        r = run(tree, e, ["scripts/setup.sh"] + args)
        check(r.returncode == 0, f"case {i}: exit {r.returncode}: {r.stderr}")
        line = read(tree, "meson").splitlines()[-1]
        check(line.startswith(f"setup b{i}") and want in line.split() and
              line.count("-Dcuda=") == 1, f"case {i}: meson {line}, want {want}")
        check("CUDA" in r.stderr, f"case {i}: no line about CUDA: {r.stderr}")
    n = len(read(tree, "meson").splitlines())
    r = run(tree, dict(env, DQ_BUILDDIR="b1"), ["scripts/setup.sh"])
    check(r.returncode == 0 and len(read(tree, "meson").splitlines()) == n,
          f"an existing build was configured again: {r.stderr}")
    check("CUDA backend: yes" in r.stderr, f"b1 has CUDA; setup says {r.stderr}")


def t_run_load_warning(tree, env):
    """A 1-minute load average above the cores gives a warning
    before the suite starts; a quiet machine none."""
    env["DQ_SKIP_SETUP"] = "1"
    r = run(tree, env, ["scripts/run.sh", "steps=3"])
    check("load average" not in r.stderr, f"warned on a quiet machine: {r.stderr}")
    write(os.path.join(tree, "loadavg"), f"{os.cpu_count() + 1.5:.2f} 0.5 0.5 3/99 1\n", 0o644)
    r = run(tree, env, ["scripts/run.sh", "steps=3"])
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    w = [x for x in r.stderr.splitlines() if "load average" in x]
    check(len(w) == 1 and "warning" in w[0], f"no one warning line: {r.stderr}")
    check(r.stderr.index("load average") < r.stderr.index("run.sh: running suite"),
          "the warning comes after the suite started")


def t_run_blas_core(tree, env):
    """Where OpenBLAS would run generic kernels on a CPU
    that allows faster ones, run.sh sets OPENBLAS_CORETYPE for the suite
    and says so; elsewhere it sets nothing; one the user set wins."""
    env["DQ_SKIP_SETUP"] = "1"
    r = run(tree, env, ["scripts/run.sh", "steps=3"])
    s = calls(tree, "suite")
    check(r.returncode == 0 and s and s[-1]["coretype"] is None,
          f"set a core on a machine that needs none: {r.stderr}")
    env["STUB_BLAS"] = "generic"
    r = run(tree, env, ["scripts/run.sh", "steps=3"])
    s = calls(tree, "suite")
    check(r.returncode == 0 and s[-1]["coretype"] == "SkylakeX",
          f"the suite ran with OPENBLAS_CORETYPE={s[-1]['coretype']}: {r.stderr}")
    check("OPENBLAS_CORETYPE=SkylakeX" in r.stderr and
          r.stderr.index("OPENBLAS_CORETYPE") < r.stderr.index("running suite"),
          f"no line before the suite: {r.stderr}")
    r = run(tree, dict(env, OPENBLAS_CORETYPE="Haswell"), ["scripts/run.sh", "steps=3"])
    check(calls(tree, "suite")[-1]["coretype"] == "Haswell"
          and "setting OPENBLAS_CORETYPE" not in r.stderr,
          f"the user's OPENBLAS_CORETYPE was overridden: {r.stderr}")
    r = run(tree, env, ["scripts/reproduce.sh", "cpu", "--resume"])
    got = {c["coretype"] for c in calls(tree, "suite")[3:]}
    check(r.returncode == 0 and got == {"SkylakeX"},
          f"reproduce: exit {r.returncode}, suites ran with {got}: {r.stderr[-600:]}")


# ---- scripts/reproduce.sh ----

def t_reproduce_budget_refused(tree, env):
    """G16: an empty or out-of-range budget is refused (exit 2, one line)
    before anything is removed or run."""
    rec = os.path.join(tree, "results", "cpu", "kept.jsonl")
    write(rec, "{}\n", 0o644)
    for b in (["--budget="], ["--budget", ""], ["--budget", "99999999999999999999999"],
              ["--budget=1000000001"], ["--budget", "0"], ["--budget", "-5"]):
        r = run(tree, env, ["scripts/reproduce.sh", "cpu"] + b)
        one_line(r, "--budget")
        check(os.path.exists(rec), f"{b}: results/cpu emptied")
        check(not calls(tree, "suite") and not read(tree, "meson"), f"{b}: something ran")


def t_reproduce_out_of_budget(tree, env):
    """G16: out of budget on cpu: the lanes' suites are stopped, no
    cpu-rate, plan, figures or findings, and exit 3 (go on with --resume)."""
    env["STUB_SUITE"] = "hang"
    r = run(tree, env, ["scripts/reproduce.sh", "cpu", "--resume", "--budget", "2"])
    left = kill_leftovers(tree)
    check(r.returncode == 3, f"exit {r.returncode}, not 3: {r.stderr[-800:]}")
    check(not read(tree, "marks"), f"ran past the budget: {read(tree, 'marks')}")
    check(not calls(tree, "plan"), "plan --run ran past the budget")
    check("--resume" in r.stderr, f"does not say to go on with --resume: {r.stderr}")
    check(not left, f"processes left running: {left}")


def t_reproduce_interrupt(tree, env):
    """G19: Ctrl-C (SIGINT to the script's process group, as a terminal
    sends it) stops reproduce.sh: each lane's suite gets the signal once,
    the script waits for them and exits 130; no process is left. Also when
    the script starts with SIGINT ignored (a background command of a shell
    without job control: `setsid bash -c 'exec scripts/reproduce.sh ...' &`),
    and for a SIGTERM to the script alone."""
    ignore = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731
    for sig, whom, pre in ((signal.SIGINT, "group", None), (signal.SIGINT, "group", ignore),
                           (signal.SIGTERM, "script", None)):
        for f in os.listdir(tree):
            if f.startswith(("running.", "sig.", "calls")):
                os.unlink(os.path.join(tree, f))
        env["STUB_SUITE"] = "hang"
        # started from the folder above, by a relative path, where SIGINT
        # is ignored: the script starts again by the same path
        cwd, path = (os.path.dirname(tree), os.path.basename(tree) + "/scripts/reproduce.sh") \
            if pre else (tree, "scripts/reproduce.sh")
        p = subprocess.Popen([path, "cpu", "--resume"], cwd=cwd,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, preexec_fn=pre)
        try:
            end = time.time() + 30
            while time.time() < end and \
                    len([f for f in os.listdir(tree) if f.startswith("running.")]) < 2:
                time.sleep(0.05)
            check(time.time() < end, "the two lanes' suites never started")
            if whom == "group":
                os.killpg(p.pid, sig)
            else:
                os.kill(p.pid, sig)
            try:
                out, err = p.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                raise Fail(f"{sig.name} to the {whom}{' (ignored at start)' if pre else ''}: "
                           "reproduce.sh still running 20 s later")
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            left = kill_leftovers(tree)
        check(p.returncode == 128 + sig, f"{sig.name}: exit {p.returncode}: {err[-600:]}")
        suites = calls(tree, "suite")
        check(len(suites) == 2, f"{sig.name}: {len(suites)} suites started, not 2")
        for s in suites:
            got = read(tree, f"sig.{s['pid']}").split()
            check(got == [sig.name], f"{sig.name}: suite {s['pid']} got {got}")
        check(not left, f"{sig.name}: processes left running: {left}")


def t_reproduce_complete(tree, env):
    """A whole cpu reproduce with quick suites: every suite as two shards,
    eps-infer after them in one lane (nothing beside it), then
    alone on core 0 the prices of the six time suites' records,
    cpu-rate.sh and two plan runs, exit 0; gpu: its six suites on
    device=cuda, and out of budget exit 3."""
    r = run(tree, env, ["scripts/reproduce.sh", "cpu", "--resume"])
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-800:]}")
    s = [c["argv"][1] for c in calls(tree, "suite")]
    check(len(s) == 15 and s[-1:] == ["bench/suites/eps-infer.json"],
          f"suites run: {s}")
    lanes = [c["argv"] for c in calls(tree, "suite")]
    check(all("--lanes" in a and a[a.index("--lanes") + 1] == "2" for a in lanes[:-1]),
          f"cpu lanes not marked --lanes 2: {lanes}")
    check("--lanes" not in lanes[-1] and "--shard" not in lanes[-1],
          f"eps-infer not one lane: {lanes[-1]}")
    check("cpu-rate.sh" in read(tree, "marks") and len(calls(tree, "plan")) == 2,
          f"marks {read(tree, 'marks')!r}, {len(calls(tree, 'plan'))} plan runs")
    p = [c["argv"] for c in calls(tree, "price")]
    want = ["gc-vs-deq", "gc-vs-deq-trellisnet", "eps-train", "default", "depth", "budget"]
    check([os.path.basename(a[1])[:-6] for a in p] == want and
          all("core=0" in a for a in p), f"prices: {p}")
    check(os.path.getsize(os.path.join(tree, "results/cpu/prices.jsonl")) > 0,
          "results/cpu/prices.jsonl not written")
    check(all(a[a.index("--price") + 1].endswith("results/cpu/prices.jsonl")
              for a in (c["argv"] for c in calls(tree, "plan")) if "--price" in a) and
          sum("--price" in c["argv"] for c in calls(tree, "plan")) == 2,
          f"plan not given the prices: {[c['argv'] for c in calls(tree, 'plan')]}")
    check("replay.py" in read(tree, "marks"),
          f"cpu reproduce did not replay the records: marks {read(tree, 'marks')!r}")
    r = run(tree, env, ["scripts/reproduce.sh", "gpu", "--resume"])
    g = [c["argv"] for c in calls(tree, "suite")][15:]
    check(r.returncode == 0 and len(g) == 6 and
          all("device=cuda" in a and "--lanes" not in a for a in g),
          f"gpu: exit {r.returncode}, suites {g}: {r.stderr[-800:]}")
    env["STUB_SUITE"] = "hang"
    r = run(tree, env, ["scripts/reproduce.sh", "gpu", "--resume", "--budget=1"])
    check(r.returncode == 3 and len(calls(tree, "suite")) in (21, 22),
          f"gpu out of budget: exit {r.returncode}: {r.stderr[-800:]}")
    check(not leftovers(tree), "processes left running")


def t_price_check(tree, env):
    """scripts/price-check.sh: the price-check suite, its prices
    on the same core, the A/A suite twice and compare --fail-above 10 of
    the pair; exit 3 when the pair reads FASTER or SLOWER."""
    out = os.path.join(tree, "pc")
    r = run(tree, env, ["scripts/price-check.sh", out])
    s = [c["argv"][1] for c in calls(tree, "suite")]
    check(r.returncode == 0 and s == ["bench/suites/price-check.json"] +
          ["bench/suites/aa.json"] * 2, f"exit {r.returncode}, suites {s}: {r.stderr}")
    p = [c["argv"] for c in calls(tree, "price")]
    check(len(p) == 1 and p[0][1] == f"{out}/runs.jsonl" and "core=0" in p[0],
          f"price calls {p}")
    c = [x["argv"] for x in calls(tree, "compare")]
    check(c == [["compare", "--fail-above", "10", f"{out}/aa1.jsonl", f"{out}/aa2.jsonl"]],
          f"compare calls {c}")
    r = run(tree, dict(env, STUB_COMPARE="fail"), ["scripts/price-check.sh", out])
    check(r.returncode == 3 and "FASTER or SLOWER" in r.stderr,
          f"an A/A pair that fails: exit {r.returncode}: {r.stderr}")


TESTS = [t_run_key_first, t_run_dry_run, t_run_out_refused, t_run_missing_suite,
         t_run_suite_name_path, t_run_progress_and_cuda, t_setup_cuda_choice,
         t_run_load_warning, t_run_blas_core, t_reproduce_budget_refused, t_reproduce_out_of_budget,
         t_reproduce_interrupt, t_reproduce_complete, t_price_check]


def main():
    global ROOT
    ROOT = os.path.abspath(sys.argv[1])
    pick = sys.argv[2:]
    failed = 0
    for t in TESTS:
        if pick and t.__name__ not in pick:
            continue
        tree, env = make_tree()
        try:
            t(tree, env)
            print(f"PASS {t.__name__}")
        except (Fail, subprocess.TimeoutExpired) as e:
            failed += 1
            print(f"FAIL {t.__name__}: {e}")
        finally:
            kill_leftovers(tree)
            shutil.rmtree(tree, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
