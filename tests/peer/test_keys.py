#!/usr/bin/python3
"""test_keys.py — deqtorch's copies of deqbench's key table against the C
table (bench/config/config.c and the methods' key rows), without torch.

    test_keys.py BUILD/bench/deqbench SOURCE_ROOT

deqtorch (bench/pytorch/deqtorch) keeps its own lists on purpose: they say
what the PyTorch peer implements, so a key deqbench gains is refused there
until deqtorch learns it, instead of being accepted and ignored. This test
is what keeps the copies honest: it fails when they differ from what
`deqbench run --help-json` and a real record say, and names the keys.

  - config.KNOWN_KEYS: every key of `deqbench run --help-json`, no other;
  - config.METHOD_KEYS: the keys of a deqbench record's `method` object
    (its `label` aside: deqbench adds that to deqtorch's records itself);
  - DEFAULTS (`deqtorch.py grad key=value`'s starting point): every key's
    `--help-json` default, of the same JSON type, but `impl` (deqtorch runs
    only impl=pytorch);
  - the values config.check_config supports (method, model, device) are
    the C table's choices, each of them;
  - `deqtorch.py check` refuses eval_every > 0 (deqbench's valid curve)
    with exit 2 and its one line, and accepts eval_every=0;
  - the feature matrix (`requires` of each key in --help-json,
    bench/config/config_features.c): every feature it declares deqbench's
    alone (impls [deqbench]) is refused by deqtorch's check_config too, and
    every key deqtorch's own rules refuse outright is such a feature, so
    deqbench refuses it first with the matrix's message.
"""
import json
import os
import subprocess
import sys
import tempfile

DEQBENCH, ROOT = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(ROOT, "bench", "pytorch"))
from deqtorch import common, config  # noqa: E402  (neither imports torch)

TINY = ["corpus=synthetic", "d_model=8", "n_heads=2", "d_ff=16", "seq_len=4",
        "batch_size=2", "layers=2", "steps=2", "warmup_steps=0",
        "eval_tokens=0", "threads=1"]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def differ(what, ours, theirs):
    ours, theirs = set(ours), set(theirs)
    if ours != theirs:
        fail(f"{what}: deqtorch lacks {sorted(theirs - ours)}, has "
             f"{sorted(ours - theirs)} that deqbench does not; update "
             "bench/pytorch/deqtorch (and implement what it lacks)")


def record_method_keys():
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.jsonl")
        subprocess.run([DEQBENCH, "run", *TINY, f"out={out}"], check=True,
                       capture_output=True)
        with open(out) as f:
            rec = json.loads(f.readline())
    return [k for k in rec["method"] if k != "label"]


def deqbench_refuses_pytorch(key, value):
    """True when deqbench itself refuses key=value with impl=pytorch (exit
    2 naming it: method=managed, CUDA unified memory, is the C core's), so
    that deqtorch refusing it too is agreement, not a gap."""
    p = subprocess.run([DEQBENCH, "run", f"{key}={value}", "impl=pytorch",
                        "steps=1", "out=/dev/null"], capture_output=True,
                       text=True)
    return p.returncode == 2 and f"{key}={value}" in p.stderr


def main():
    keys = json.loads(subprocess.run([DEQBENCH, "run", "--help-json"],
                                     check=True, capture_output=True,
                                     text=True).stdout)
    names = [k["name"] for k in keys]
    differ("config.KNOWN_KEYS", config.KNOWN_KEYS, names)
    differ("config.METHOD_KEYS", config.METHOD_KEYS, record_method_keys())
    defaults = common.DEFAULTS
    differ("DEFAULTS' keys", defaults, [n for n in names if n != "impl"])
    for k in keys:
        if k["name"] == "impl":
            continue
        ours, want = defaults[k["name"]], k["default"]
        if ours != want or isinstance(ours, bool) != isinstance(want, bool) \
                or isinstance(ours, str) != isinstance(want, str):
            fail(f"DEFAULTS[{k['name']!r}] is {ours!r}; deqbench's default "
                 f"is {want!r}")
    for k in keys:
        if k["name"] not in ("method", "model", "device"):
            continue
        for v in k["choices"].split(", "):
            if k["name"] == "device" and v == "cuda":
                continue  # refused where torch has no CUDA: the machine's
            try:
                config.check_config({k["name"]: v})
            except config.Unsupported as e:
                if not deqbench_refuses_pytorch(k["name"], v):
                    fail(f"deqtorch refuses {k['name']}={v}, a value of "
                         f"deqbench's table: {e}")
    check_eval_every()
    n = check_features(keys)
    print(f"ok: {n} deqbench-only features refused by deqtorch too")
    print(f"ok: {len(names)} keys, {len(config.METHOD_KEYS)} method keys, "
          f"{len(defaults)} defaults as deqbench's")
    return 0


def non_default(k, row):
    """A value of key k (a --help-json entry) that turns feature row on."""
    if row["value"] is not None:
        return row["value"]
    d = k["default"]
    if isinstance(d, bool):
        return not d
    if isinstance(d, int):
        return d + 1
    fail(f"feature {k['name']}: no non-default value to try")


def check_features(keys):
    """deqtorch agrees with the matrix: deqbench-only features refused by
    check_config; deqtorch's outright refusals declared in the matrix."""
    n = 0
    by_name = {k["name"]: k for k in keys}
    for k in keys:
        for row in k.get("requires", []):
            if row["impls"] != ["deqbench"]:
                continue
            v = non_default(k, row)
            cfg = dict(common.DEFAULTS, impl="pytorch", **{k["name"]: v})
            try:
                config.check_config(cfg)
            except config.Unsupported:
                n += 1
                continue
            fail(f"{k['name']}={v} is deqbench's alone in the feature "
                 "matrix (bench/config/config_features.c), but deqtorch's "
                 "check_config accepts it")
    for key, bad, _ in config._RULES:
        if key in ("method", "model", "device", "impl", "precision"):
            continue  # value lists, checked against the choices above
        rows = by_name[key].get("requires", [])
        if not any(r["impls"] == ["deqbench"] for r in rows):
            fail(f"deqtorch refuses {key} outright, but the feature matrix "
                 "(bench/config/config_features.c) does not declare it "
                 "deqbench's alone: add the row, so deqbench refuses it "
                 "first")
    return n


def check_eval_every():
    """eval_every > 0 (deqbench's valid curve) is refused by `deqtorch.py
    check` with exit 2 and the standard line; eval_every=0 is accepted."""
    tool = os.path.join(ROOT, "bench", "pytorch", "deqtorch.py")
    for v, rc in ((0, 0), (5, 2)):
        cfg = dict(common.DEFAULTS, impl="pytorch", eval_every=v)
        p = subprocess.run([sys.executable, tool, "check"],
                           input=json.dumps([cfg]), capture_output=True,
                           text=True)
        if p.returncode != rc:
            fail(f"deqtorch.py check eval_every={v}: exit {p.returncode}, "
                 f"want {rc}: {p.stderr}")
        if rc and not (p.stderr.startswith(
                "deqtorch: eval_every=5 is not supported by impl=pytorch;")
                and p.stderr.count("\n") == 1):
            fail(f"deqtorch.py check eval_every=5: not the one line: "
                 f"{p.stderr!r}")


if __name__ == "__main__":
    sys.exit(main())
