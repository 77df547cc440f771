#!/usr/bin/env python3
"""test_docs.py — the lists the docs keep by hand against the registries.

    test_docs.py DEQBENCH SOURCE_ROOT

The key table of docs/configuration.md is checked byte for byte by
tests/test_config.c (config/docs_key_table_current); this test checks what
prose lists: every method of the registry (`deqbench run --help-json`, the
`method` key's values) is named in README.md's first paragraph, has a row
in docs/methods.md's method table and a file under methods/ named in
docs/ARCHITECTURE.md; every command of `deqbench --help` is in
docs/commands.md's synopsis and in docs/ARCHITECTURE.md's command list;
every config key is in docs/configuration.md; README.md stays a front
door of at most 200 lines, and every relative link of README.md and
docs/*.md points at a file that exists.
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
    for m in methods:
        if not re.search(rf"\(`{m}`[):]", intro):
            fail(f"README.md's first paragraph does not name method `{m}`")
        if not re.search(rf"^\| `{m}` \|", mdoc, re.M):
            fail(f"docs/methods.md's method table has no row for `{m}`")
        if f"`{m}.c`" not in arch:
            fail(f"docs/ARCHITECTURE.md does not name methods/{m}.c")
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
    print(f"ok: {len(methods)} methods, {len(cmds)} commands, {len(keys)} keys, "
          f"README {n} lines, links resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
