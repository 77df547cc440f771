#!/usr/bin/env python3
"""test_html.py — `deqbench report --html` rendered in headless Chromium.

    test_html.py DEQBENCH SOURCE_ROOT

Runs a tiny suite (unroll and deq, trace=true), draws its figures with
plots/plot.py, puts a hostile SVG beside them (a <script>, an onload= and
a script after </svg>: G14), writes the HTML report, loads it in Debian's
chromium (--headless --dump-dom: what the browser built from the page)
and checks that every table and every figure is there: one table per
record file, one image per figure file drawn beside it, embedded as a
data: URI that holds exactly that file, no script anywhere in the page,
and no external reference (the page must open with no server and nothing
beside it). Exits 77 (meson's skip) with a message where chromium is
missing or cannot start.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def chromium():
    for c in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(c)
        if p:
            return p
    return None


def dump_dom(browser, page):
    r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--dump-dom", "file://" + page],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def main():
    deqbench, root = sys.argv[1], sys.argv[2]
    browser = chromium()
    if not browser:
        print("SKIP: no chromium (Debian: apt-get install chromium; scripts/setup.sh does)")
        return 77
    tmp = tempfile.mkdtemp(prefix="deqbench-html-")
    try:
        probe = os.path.join(tmp, "probe.html")
        open(probe, "w").write("<!DOCTYPE html><html><body><p id=x>ok</p></body></html>")
        rc, out, err = dump_dom(browser, probe)
        if rc != 0 or 'id="x"' not in out:
            print(f"SKIP: chromium cannot start here (exit {rc}): {err.strip()[-300:]}")
            return 77
        recs = os.path.join(tmp, "html.jsonl")
        suite = os.path.join(tmp, "s.json")
        json.dump({"name": "html", "base": {
            "corpus": "synthetic", "d_model": 16, "n_heads": 2, "d_ff": 32,
            "seq_len": 8, "batch_size": 2, "layers": 3, "steps": 12,
            "warmup_steps": 2, "lr_warmup": 1, "eval_tokens": 64, "threads": 1,
            "eval_warmup": 0, "trace": True, "out": recs},
            "axes": {"method": ["unroll", "deq"]}}, open(suite, "w"))
        r = subprocess.run([deqbench, "suite", suite], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"suite exited {r.returncode}: {r.stderr[-500:]}")
        env = dict(os.environ, DEQBENCH=deqbench, PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run(["/usr/bin/python3", os.path.join(root, "plots", "plot.py"), recs],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            fail(f"plot.py exited {r.returncode}: {r.stderr[-500:]}")
        if not any(f.startswith("html.") and f.endswith(".svg") for f in os.listdir(tmp)):
            fail("plot.py drew no SVG figure")
        with open(os.path.join(tmp, "html.zz-evil.svg"), "w") as f:
            f.write('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)">'
                    '<script>alert(2)</script></svg>\n<script>alert(3)</script>\n')
        svgs = sorted(f for f in os.listdir(tmp) if f.startswith("html.") and f.endswith(".svg"))
        page = os.path.join(tmp, "report.html")
        r = subprocess.run([deqbench, "report", "--html", page, recs],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"report --html exited {r.returncode}: {r.stderr[-500:]}")
        text = open(page).read()
        if re.search(r'(src|href)="(?!#|data:image/svg\+xml;base64,)', text):
            fail("the page refers to another file or address")
        if re.search(r"<script|\bon[a-z]+=|alert\(", text, re.I):
            fail("the page holds a script or an event handler")
        embedded = re.findall(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]*)"', text)
        files = [open(os.path.join(tmp, f), "rb").read() for f in svgs]
        if sorted(base64.b64decode(b) for b in embedded) != sorted(files):
            fail(f"the page's {len(embedded)} images are not the {len(svgs)} SVG files")
        rc, dom, err = dump_dom(browser, page)
        if rc != 0:
            fail(f"chromium exited {rc} on the report: {err[-500:]}")
        tables = dom.count("<table")
        figures = len(re.findall(r'<figure>\s*<img src="data:image/svg', dom))
        if re.search(r"<script|<svg", dom, re.I):
            fail("the rendered page holds a script or inline SVG markup")
        rows = dom.count("<tr>") - tables  # header rows aside
        if tables != 1 or figures != len(svgs) or rows != 2:
            fail(f"rendered {tables} tables, {figures} figures, {rows} rows; "
                 f"want 1, {len(svgs)} ({', '.join(svgs)}), 2")
        for want in ("unroll L=3", "deq broyden/ift", "step ms [95% CI]"):
            if want not in dom:
                fail(f"the rendered page lacks {want!r}")
        print(f"ok: 1 table, {figures} embedded figures, rendered by {browser}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
