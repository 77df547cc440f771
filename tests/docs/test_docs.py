#!/usr/bin/env python3
"""test_docs.py — the lists the docs keep by hand against the registries.

    test_docs.py DEQBENCH SOURCE_ROOT

The key table of docs/configuration.md is checked byte for byte by
tests/test_config.c (config/docs_key_table_current); this test checks what
prose lists, with the registries read from `deqbench run --help-json` (the
`method` and `model` keys' values):

  - every registered method is named in README.md's first paragraph, has a
    row in docs/methods.md's method table, its file (`<name>.c`) in
    docs/ARCHITECTURE.md, a place in results/SCHEMA.md's `method` row and
    in bench/pytorch/README.md's first paragraph;
  - every registered model has its entry in docs/models.md's "Models" list,
    its paragraph in docs/ARCHITECTURE.md §Model and its file (`<kind>.c`)
    in the directory table, a place in results/SCHEMA.md's `model.kind` row
    and in bench/pytorch/README.md's first paragraph;
  - docs/ARCHITECTURE.md's recipes "Adding a model" and "Adding a method"
    name every document this test holds to the registry, and every file
    they name exists (`<kind>` / `<name>` for each registered one; a
    `methods/<name>.h` for one at least: only methods with keys have one);
  - docs/commands.md's bench-block preset is the one `deqbench bench-block
    --help` prints;
  - every command of `deqbench --help` is in docs/commands.md's synopsis
    and in docs/ARCHITECTURE.md's command list; every config key is in
    docs/configuration.md; README.md stays a front door of at most 200
    lines, and every relative link of README.md and docs/*.md points at a
    file that exists;
  - no file under bench/ compares a backend's name (strcmp with "cuda",
    "cpu" or "cpu64"): backend_caps says what a backend can do.
"""
import json
import os
import re
import subprocess
import sys


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def read(root, path):
    with open(os.path.join(root, path)) as f:
        return f.read()


def schema_row(root, section, field):
    """The meaning cell of results/SCHEMA.md's row for `field` in section
    `## \`section\``."""
    text = read(root, "results/SCHEMA.md").split(f"\n## `{section}`\n")[1]
    text = text.split("\n## ")[0]
    row = re.search(rf"^\| `{field}` \|[^|]*\|(.*)\|$", text, re.M)
    if not row:
        fail(f"results/SCHEMA.md's `{section}` section has no `{field}` row")
    return row.group(1)


def first_paragraph(root, path):
    return read(root, path).split("\n\n")[1]


# The documents that must name every registered method / model (each
# checked below); the recipes name each of them.
METHOD_DOCS = ["README.md", "docs/methods.md", "docs/ARCHITECTURE.md",
               "results/SCHEMA.md", "bench/pytorch/README.md"]
MODEL_DOCS = ["docs/models.md", "docs/ARCHITECTURE.md", "results/SCHEMA.md",
              "bench/pytorch/README.md"]


def check_methods(root, methods, intro, arch, mdoc):
    schema = schema_row(root, "method", "method")
    peer = first_paragraph(root, "bench/pytorch/README.md")
    for m in methods:
        if not re.search(rf"\(`{m}`[):]", intro):
            fail(f"README.md's first paragraph does not name method `{m}`")
        if not re.search(rf"^\| `{m}` \|", mdoc, re.M):
            fail(f"docs/methods.md's method table has no row for `{m}`")
        if f"`{m}.c`" not in arch:
            fail(f"docs/ARCHITECTURE.md does not name methods/{m}.c")
        if f"`{m}`" not in schema:
            fail(f"results/SCHEMA.md's method.method row does not name `{m}`")
        if f"`{m}`" not in peer:
            fail(f"bench/pytorch/README.md's first paragraph does not name `{m}`")


def check_models(root, models, arch):
    mdoc = read(root, "docs/models.md")
    dirs = next(l for l in arch.splitlines() if l.startswith("| `models/` |"))
    model_sec = arch.split("\n## Model\n")[1].split("\n## ")[0]
    schema = schema_row(root, "model", "kind")
    peer = first_paragraph(root, "bench/pytorch/README.md")
    for k in models:
        if not re.search(rf"^- `{k}` — ", mdoc, re.M):
            fail(f"docs/models.md's Models list has no entry `- `{k}` — ...`")
        if f"`{k}.c`" not in dirs:
            fail(f"docs/ARCHITECTURE.md's models/ row does not name `{k}.c`")
        if f"**{k}**" not in model_sec:
            fail(f"docs/ARCHITECTURE.md §Model has no paragraph **{k}**")
        if f"`{k}`" not in schema:
            fail(f"results/SCHEMA.md's model.kind row does not name `{k}`")
        if f"`{k}`" not in peer:
            fail(f"bench/pytorch/README.md's first paragraph does not name `{k}`")


def check_recipes(root, arch, methods, models):
    """Each recipe names the documents above; every path it names exists
    (`<kind>` and `<name>` for each registered model and method)."""
    for title, docs, names, var in (
            ("Adding a model", MODEL_DOCS, models, "<kind>"),
            ("Adding a method", METHOD_DOCS, methods, "<name>")):
        if f"\n## {title}\n" not in arch:
            fail(f"docs/ARCHITECTURE.md has no section '{title}'")
        text = arch.split(f"\n## {title}\n")[1].split("\n## ")[0]
        flat = " ".join(text.split())
        for d in docs:
            if d not in flat and not (d == "docs/ARCHITECTURE.md" and "here" in flat):
                fail(f"docs/ARCHITECTURE.md '{title}' does not name {d}")
        paths = set(re.findall(r"`?((?:models|methods|bench|tests|docs|kernels|plots|results)"
                               r"/[A-Za-z0-9_./<>-]+\.(?:c|h|py|md|build))", flat))
        if not paths:
            fail(f"docs/ARCHITECTURE.md '{title}' names no file")
        for p in paths:
            found = [p.replace(var, n) for n in names] if var in p else [p]
            there = [f for f in found if os.path.exists(os.path.join(root, f))]
            # a header only where the method has keys: one at least
            if not there or (len(there) < len(found) and not p.endswith(".h")):
                missing = sorted(set(found) - set(there))
                fail(f"docs/ARCHITECTURE.md '{title}' names {missing[0]}, "
                     "which does not exist")


def check_bench_block(deqbench, cmds_doc):
    """docs/commands.md's bench-block preset is what --help prints."""
    out = subprocess.run([deqbench, "bench-block", "--help"], check=True,
                         capture_output=True, text=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("    "))
    defaults = dict(w.split("=", 1) for w in line.split())
    para = " ".join(cmds_doc.split("- `bench-block`")[1].split("\n- ")[0].split())
    if "defaults are a preset" not in para:
        fail("docs/commands.md's bench-block paragraph does not give its preset")
    preset = para.split("defaults are a preset")[1].split("--help")[0]
    said = re.findall(r"`([a-z_]+=[^`]+)`", preset)
    words = [w for s in said for w in s.split()]
    if not words:
        fail("docs/commands.md's bench-block paragraph gives no preset")
    for w in words:
        k, v = w.split("=", 1)
        if defaults.get(k) != v:
            fail(f"docs/commands.md says bench-block's {w}; its --help says "
                 f"{k}={defaults.get(k)}")


def check_no_backend_names(root):
    """No file under bench/ compares a backend's name: what a backend can
    do comes from backend_caps (kernels/backend.h), a device string of a
    record from the config's table (config_device_parse)."""
    pat = re.compile(r'str(?:n)?cmp\([^;]*"(?:cuda|cpu|cpu64)"')
    for d, _, files in os.walk(os.path.join(root, "bench")):
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            p = os.path.join(d, f)
            with open(p, encoding="utf-8") as fh:
                for no, line in enumerate(fh, 1):
                    if pat.search(line):
                        fail(f"{os.path.relpath(p, root)}:{no} compares a backend "
                             "name; ask backend_caps (kernels/backend.h)")


def main():
    deqbench, root = sys.argv[1], sys.argv[2]
    keys = json.loads(subprocess.run([deqbench, "run", "--help-json"], check=True,
                                     capture_output=True, text=True).stdout)
    methods = next(k for k in keys if k["name"] == "method")["choices"].split(", ")
    readme = read(root, "README.md")
    intro = readme.split("\n## ")[0]
    arch = read(root, "docs/ARCHITECTURE.md")
    mdoc = read(root, "docs/methods.md")
    conf = read(root, "docs/configuration.md")
    cmds_doc = read(root, "docs/commands.md")
    models = next(k for k in keys if k["name"] == "model")["choices"].split(", ")
    check_methods(root, methods, intro, arch, mdoc)
    check_models(root, models, arch)
    check_recipes(root, arch, methods, models)
    check_bench_block(deqbench, cmds_doc)
    for k in keys:
        if f"| `{k['name']}` |" not in conf:
            fail(f"docs/configuration.md lacks key `{k['name']}`")
    usage = subprocess.run([deqbench, "--help"], capture_output=True, text=True).stdout
    cmds = re.findall(r"^  ([a-z][a-z-]*)\b", usage, re.M)
    arch_cmds = arch.split("Commands (docs/commands.md):")[1].split(".")[0]
    for c in cmds:
        if not re.search(rf"^deqbench {c}\b", cmds_doc, re.M):
            fail(f"docs/commands.md's synopsis lacks `deqbench {c}`")
        if f"`{c}" not in arch_cmds:
            fail(f"docs/ARCHITECTURE.md's command list lacks `{c}`")
    n = readme.count("\n")
    if n > 200:
        fail(f"README.md has {n} lines; keep it a front door (at most 200) and move "
             "reference to docs/")
    for doc in ["README.md"] + ["docs/" + f for f in os.listdir(os.path.join(root, "docs"))
                                if f.endswith(".md")]:
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", read(root, doc)):
            if link.startswith(("http:", "https:", "mailto:")):
                continue
            target = os.path.normpath(os.path.join(root, os.path.dirname(doc), link))
            if not os.path.exists(target):
                fail(f"{doc}: link to {link}, which does not exist")
    check_no_backend_names(root)
    print(f"ok: {len(methods)} methods, {len(models)} models, recipes, "
          f"{len(cmds)} commands, {len(keys)} keys, README {n} lines, links resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
