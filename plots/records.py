"""records.py — reading deqbench run records (results/SCHEMA.md) for the
plotting and table scripts in plots/.

Standard library only, so plots/table.py runs on any python3; plots/plot.py
adds matplotlib. Readers ignore fields they do not know (SCHEMA.md), so
everything here goes through get(), which turns a missing key or a null into
None.
"""

import json
import math
import os
import statistics
import subprocess
import sys

MIB = 1048576.0  # bytes per MiB: the memory axes are in MiB (2^20 bytes)


def get(obj, path, default=None):
    """Value at a dotted path ("timing.step_ms.median"); default when a key
    is missing, a section is null or the value is null."""
    cur = obj
    for key in path.split("."):
        if not isinstance(cur, dict) or cur.get(key) is None:
            return default
        cur = cur[key]
    return cur


def num(obj, path):
    """Finite number at a dotted path, or None."""
    x = get(obj, path)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def load(paths, note=print):
    """Reads JSONL files. Returns (ok, skipped): lists of (path, line, record)
    with status "ok", and the others (price records of `deqbench price`
    among them: prices, not runs). A malformed line raises ValueError
    naming path:line (a half-written line is a bug: records are appended with
    one write each). Each skipped record gets one note line."""
    ok, skipped = [], []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{lineno}: malformed record: {e}") from e
                if not isinstance(rec, dict):
                    raise ValueError(f"{path}:{lineno}: a record must be a JSON object")
                if rec.get("kind") == "price":
                    skipped.append((path, lineno, rec))
                    note(f"note: {path}:{lineno}: skipped, a price record "
                         "(deqbench price), not a run")
                elif rec.get("status") == "ok":
                    ok.append((path, lineno, rec))
                else:
                    skipped.append((path, lineno, rec))
                    note(
                        f"note: {path}:{lineno}: skipped, status "
                        f"{rec.get('status')!r}: {rec.get('message') or 'no message'}"
                    )
    return ok, skipped


def cfg(rec, key, default=None):
    """Config key of a record; the method's resolved value where the method
    section has it (k=0 becomes round(sqrt(L)), f_history=0 becomes
    f_max_iter)."""
    v = get(rec, "method." + key)
    if v is None:
        v = get(rec, "config." + key, default)
    return v


def method(rec):
    return get(rec, "config.method", "?")


def depth_of(rec):
    """The depth axis of the depth plots: L for unroll, checkpoint and
    revolve, the forward iteration cap f_max_iter for deq (the number of
    block applications the solve may make)."""
    if method(rec) == "deq":
        return cfg(rec, "f_max_iter")
    return cfg(rec, "layers")


# Method keys (config_key_is_method in bench/config/config.c: method, k and the deq
# group) and output-only keys: what is left identifies the experiment a row
# belongs to, as deqbench report groups rows.
def _key_table():
    """Key metadata from `deqbench run --help-json` (bench/config/config.c's key
    table, the one place that says which keys choose the method and which
    only say where output goes). The binary is $DEQBENCH, else
    build/bench/deqbench beside this folder; exit status 2 without it."""
    here = os.path.dirname(os.path.abspath(__file__))
    exe = os.environ.get("DEQBENCH") or os.path.join(
        here, "..", "build", "bench", "deqbench")
    try:
        out = subprocess.run([exe, "run", "--help-json"], check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        print(f"plots: cannot read the key table from {exe} ({e}); build "
              "deqbench (scripts/setup.sh) or set DEQBENCH=path/to/deqbench",
              file=sys.stderr)
        sys.exit(2)


KEYS = _key_table()
METHOD_KEYS = {k["name"] for k in KEYS if k["method"]}
OUTPUT_KEYS = {k["name"] for k in KEYS if k["output"]}


# Keys records may lack (results/SCHEMA.md): absent means the default, so
# at their default they are left out of a run's identity, as
# bench/records/record.c's record_run_identity does.
DEFAULTED = {"precision": "fp32", "compile": False, "device_mem_cap_mib": 0,
             "managed_prefetch": True, "cuda_graphs": False,
             "microbatches": 1, "eval_every": 0, "curve_tokens": 0}


def identity(rec):
    """Config apart from output keys and the seed, as deqbench report's
    rows (bench/report/report.c report_key): data_dir stays unless the corpus is
    synthetic (the other corpora are read from it: two directories, two
    datasets); seeds are replicates, combined like repeats; precision and
    compile only where not at their defaults."""
    c = get(rec, "config", {})
    keep = set() if c.get("corpus") == "synthetic" else {"data_dir"}
    return {k: v for k, v in c.items()
            if (k not in OUTPUT_KEYS or k in keep) and k != "seed"
            and not (k in DEFAULTED and DEFAULTED[k] == v)}


def group_key(rec):
    """Run identity apart from method keys (JSON text, sorted): rows
    with equal keys are compared with the unroll row among them."""
    c = {k: v for k, v in identity(rec).items() if k not in METHOD_KEYS}
    c[" kind"] = kind(rec)
    return json.dumps(c, sort_keys=True)


def run_key(rec):
    """Run identity (config apart from output keys and the seed): records
    with equal keys are repeats of one configuration."""
    c = identity(rec)
    c[" kind"] = kind(rec)
    return json.dumps(c, sort_keys=True)


def kind(rec):
    """"train" or "eval" (older records lack the field: train)."""
    return rec.get("kind") or "train"


def variant(rec, with_tol=False, with_cap=False):
    """Short label of the method as configured, without the depth: what
    one line of a depth plot or one bar colour stands for. A series name
    across depths (checkpoint k=0 stays "k=round(√L)"), so it is made from
    the config, not from the record's method.label (one run's label);
    " microbatches=M" after it where the step accumulates M > 1."""
    mb = get(rec, "config.microbatches", 1) or 1
    s = _variant(rec, with_tol, with_cap)
    return s + (f" microbatches={mb}" if mb > 1 else "")


def _variant(rec, with_tol, with_cap):
    m = method(rec)
    if m == "unroll":
        return "unroll"
    if m == "checkpoint":
        k = get(rec, "config.k", 0)
        return "checkpoint k=round(√L)" if k == 0 else f"checkpoint k={k}"
    if m == "revolve":
        s = get(rec, "config.slots", 0)
        return "revolve slots=round(log2 L)" if s == 0 else f"revolve slots={s}"
    if m != "deq":
        return m
    fs, bs = cfg(rec, "f_solver", "?"), cfg(rec, "b_solver", "?")
    s = "deq " + (fs if fs == bs else f"{fs}/{bs}")
    if get(rec, "config.b_mode") == "jfb":
        s += " jfb"
    if get(rec, "config.b_mode") == "phantom":
        s += (f" phantom k={cfg(rec, 'phantom_steps')}"
              f" λ={fmt_g(cfg(rec, 'phantom_tau'))}")
    if (get(rec, "config.jac_loss_weight") or 0) > 0:
        s += f" JR γ={fmt_g(cfg(rec, 'jac_loss_weight'))}"
    if "broyden" in (fs, bs):
        fh = get(rec, "config.f_history", 0)
        # 0 (older records) or the cap (resolved): every update
        full = fh == 0 or fh >= get(rec, "config.f_max_iter", 0)
        s += " full history" if full else f" history={fh}"
    if "anderson" in (fs, bs):
        s += f" m={cfg(rec, 'anderson_m')}"
    if with_cap:
        s += f" f_max_iter={cfg(rec, 'f_max_iter')}"
    if with_tol:
        s += f" ε={fmt_g(cfg(rec, 'f_tol'))}"
    return s


def fmt_g(x):
    return "?" if x is None else f"{x:g}"


def recorded_label(rec):
    """The record's method.label (bench's method_label: "unroll L=12",
    "checkpoint L=16 k=4", "deq broyden/ift"), None in records made before
    the field."""
    lab = get(rec, "method.label")
    return lab if isinstance(lab, str) else None


def label_without_depth(rec):
    """The record's method.label without its depth token (" L=16"):
    "checkpoint k=4", "unroll"; None without the label."""
    lab = recorded_label(rec)
    if lab is None:
        return None
    return " ".join(w for w in lab.split(" ") if not w.startswith("L="))


def label(rec):
    """Method with its depth, as deqbench report prints it: the record's
    method.label; made from the config in records without it."""
    lab = recorded_label(rec)
    if lab is not None:
        return lab
    m = method(rec)
    if m == "unroll":
        return f"unroll L={cfg(rec, 'layers')}"
    if m == "checkpoint":
        return f"checkpoint L={cfg(rec, 'layers')} k={cfg(rec, 'k')}"
    if m == "revolve":
        return f"revolve L={cfg(rec, 'layers')} slots={cfg(rec, 'slots')}"
    return variant(rec, with_tol=True, with_cap=True)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def device_text(rec):
    """The device a record ran on: the GPU's name, or the CPU model and
    threads for device=cpu."""
    dev = get(rec, "config.device", "?")
    if dev == "cuda":
        return f"cuda {get(rec, 'device.name', '?')}"
    threads = get(rec, "config.threads", 0) or get(rec, "host.online_cpus", "?")
    return (f"{dev} {get(rec, 'host.cpu_model', '?')} "
            f"({threads} thread{'' if threads == 1 else 's'})")


def describe(recs):
    """One line saying what was run, from the keys all records share: suite,
    model, width, depth, device, corpus, batch, steps. Keys that differ are
    left out (they are on an axis of the figure)."""
    if not recs:
        return ""

    def common(f):
        vals = {json.dumps(f(r), sort_keys=True) for r in recs}
        return f(recs[0]) if len(vals) == 1 else None

    parts = []
    suite = common(lambda r: get(r, "suite.name"))
    if suite:
        parts.append(suite + ":")
    model = common(lambda r: get(r, "config.model"))
    if model:
        parts.append(model)
    for key, name in (("d_model", "d_model"), ("layers", "L")):
        v = common(lambda r, key=key: get(r, "config." + key))
        if v is not None and (key != "layers" or any(method(r) != "deq" for r in recs)):
            parts.append(f"{name}={v}")
    bt = common(lambda r: (get(r, "config.batch_size"), get(r, "config.seq_len")))
    if bt:
        parts.append(f"B×T={bt[0]}×{bt[1]}")
    corpus = common(lambda r: get(r, "config.corpus"))
    if corpus:
        parts.append(f"corpus={corpus}")
    steps = common(lambda r: get(r, "config.steps"))
    if all(kind(r) == "eval" for r in recs):
        parts.append("eval of trained parameters")
    elif steps is not None:
        parts.append(f"{steps} steps")
    dev = common(device_text)
    parts.append("· " + (dev if dev else "several devices"))
    return " ".join(parts)


def stem(path):
    """Output name prefix of a records file: results/x.jsonl -> results/x."""
    base, ext = os.path.splitext(path)
    return base if ext == ".jsonl" else path
