#!/usr/bin/env python3
"""test_fingerprint.py — build.fingerprint (scripts/fingerprint.py).

    test_fingerprint.py DEQBENCH SOURCE_ROOT [OPTION ...]

OPTIONs are meson.build's fingerprint_opts, the list the build passed the
script. Checks:
  - records: `deqbench env`, a tiny `run`, an `eval` of its parameters and a
    `suite` carry build.fingerprint, and it equals what the script computes
    now over SOURCE_ROOT with those options (a stale dq_fingerprint.h, or a
    writer without the field, fails here);
  - the script on a temporary copy of the tree: the same in another folder;
    a changed or added file under kernels/, models/ or methods/ changes it,
    and so does an option; a changed file under bench/ or docs/, a file of
    another kind under kernels/ (README.md) do not;
  - --header writes the header and leaves it untouched (same mtime) when the
    fingerprint has not changed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

TINY = ["model=transformer", "d_model=8", "n_heads=2", "d_ff=16", "seq_len=8",
        "batch_size=2", "corpus=synthetic", "steps=2", "warmup_steps=1",
        "lr_warmup=1", "eval_tokens=64", "threads=1", "layers=2",
        "method=unroll"]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def load_script(root):
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.join(root, "scripts"))
    import fingerprint  # noqa: E402  (needs the path above)
    return fingerprint


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout


def read_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check_records(deqbench, want, tmp):
    got = {"env": json.loads(run([deqbench, "env"]))["build"]}
    params = os.path.join(tmp, "p.safetensors")
    train = os.path.join(tmp, "train.jsonl")
    run([deqbench, "run", *TINY, f"save_params={params}", f"out={train}"])
    got["run"] = read_records(train)[-1]["build"]
    ev = os.path.join(tmp, "eval.jsonl")
    run([deqbench, "eval", *TINY, f"params={params}", "eval_warmup=0",
         f"out={ev}"])
    got["eval"] = read_records(ev)[-1]["build"]
    suite = os.path.join(tmp, "s.json")
    base = {k: int(v) if v.isdigit() else v
            for k, v in (kv.split("=", 1) for kv in TINY)}
    with open(suite, "w") as f:
        json.dump({"name": "fp-test", "base": base,
                   "axes": {"layers": [1, 2]}}, f)
    recs = os.path.join(tmp, "suite.jsonl")
    run([deqbench, "suite", suite, f"out={recs}"])
    for i, r in enumerate(read_records(recs)):
        got[f"suite record {i}"] = r["build"]
    for where, build in got.items():
        fp = build.get("fingerprint")
        if fp != want:
            fail(f"{where}: build.fingerprint {fp!r}, the script computes "
                 f"{want!r} over the source tree (a stale dq_fingerprint.h? "
                 "ninja -C build rewrites it)")
    v = subprocess.run([deqbench, "validate", "--strict", train, ev, recs],
                       capture_output=True, text=True)
    if v.returncode != 0:
        fail(f"validate --strict: {v.stdout}{v.stderr}")
    print(f"ok: {len(got)} records carry {want}")


def edit(path, text="\n/* changed */\n"):
    with open(path, "a") as f:
        f.write(text)


def check_script(fpmod, root, opts, tmp):
    a = os.path.join(tmp, "a")
    for d in ("kernels", "models", "methods", "bench", "docs"):
        shutil.copytree(os.path.join(root, d), os.path.join(a, d),
                        ignore=shutil.ignore_patterns("__pycache__"))
    base = fpmod.fingerprint(a, opts)
    if base != fpmod.fingerprint(root, opts):
        fail("a copy of the sources has another fingerprint than the tree")
    b = os.path.join(tmp, "elsewhere", "b")
    shutil.copytree(a, b)
    if fpmod.fingerprint(b, opts) != base:
        fail("the fingerprint depends on where the checkout lives")

    def same(what):
        if fpmod.fingerprint(a, opts) != base:
            fail(f"{what} changed the fingerprint")

    def changed(what, o=opts):
        nonlocal base
        now = fpmod.fingerprint(a, o)
        if now == base:
            fail(f"{what} left the fingerprint {base}")
        if o is opts:
            base = now

    edit(os.path.join(a, "bench", "cmd", "main.c"))
    same("a change under bench/")
    edit(os.path.join(a, "docs", "ARCHITECTURE.md"), "\nmore\n")
    same("a change under docs/")
    edit(os.path.join(a, "kernels", "README.md"), "\nmore\n")
    same("a .md file under kernels/")
    edit(os.path.join(a, "kernels", "backend.c"))
    changed("a change to kernels/backend.c")
    edit(os.path.join(a, "models", "model.h"))
    changed("a change to models/model.h")
    edit(os.path.join(a, "methods", "deq.c"))
    changed("a change to methods/deq.c")
    with open(os.path.join(a, "kernels", "cuda", "new.cuh"), "w") as f:
        f.write("\n")
    changed("a new file kernels/cuda/new.cuh")
    edit(os.path.join(a, "kernels", "meson.build"), "\n# flags\n")
    changed("a change to kernels/meson.build")
    changed("another option", opts + ["c_args=-ffast-math"])
    changed("no options", [])
    print("ok: the script follows kernels/, models/, methods/ and the "
          "options only")


def check_header(script, root, opts, tmp):
    h = os.path.join(tmp, "dq_fingerprint.h")
    cmd = [sys.executable, script, "--header", h, root, *opts]
    run(cmd)
    with open(h) as f:
        text = f.read()
    want = run([sys.executable, script, root, *opts]).strip()
    if f'#define DQ_FINGERPRINT "{want}"' not in text:
        fail(f"header {text!r} lacks {want}")
    os.utime(h, (1, 1))
    run(cmd)
    if os.stat(h).st_mtime != 1:
        fail("--header rewrote an unchanged header (everything would "
             "recompile at every build)")
    print("ok: --header")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: test_fingerprint.py DEQBENCH SOURCE_ROOT [OPTION ...]")
    deqbench, root, opts = sys.argv[1], sys.argv[2], sys.argv[3:]
    fpmod = load_script(root)
    want = fpmod.fingerprint(root, opts)
    with tempfile.TemporaryDirectory() as tmp:
        check_script(fpmod, root, opts, tmp)
        check_header(os.path.join(root, "scripts", "fingerprint.py"), root,
                     opts, tmp)
        check_records(deqbench, want, tmp)


if __name__ == "__main__":
    main()
