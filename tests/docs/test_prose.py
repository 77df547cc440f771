#!/usr/bin/env python3
"""test_prose.py — the prose budget of README.md and docs/*.md.

    test_prose.py SOURCE_ROOT [--report]

Measures the prose a reader reads, outside fenced code, tables, headings,
HTML comments and the blocks generated between `<!-- NAME:begin` and
`<!-- NAME:end -->` markers:

  - a paragraph is a run of non-blank prose lines; a list item starts a
    new one;
  - a sentence ends at `.`, `!` or `?` followed by white space and a
    capital letter, a backtick, a digit or `(`; "e.g." and "i.e." do not
    end one;
  - a word is a run of non-white characters.

Fails (exit 1) when, across all those files together, the mean sentence
is longer than MAX_MEAN_SENTENCE words or the median paragraph longer than
MAX_MEDIAN_PARAGRAPH words, or when docs/ARCHITECTURE.md has MAX_ARCH_LINES
lines or more. --report prints each file's figures and passes.
"""
import glob
import os
import re
import statistics
import sys

MAX_MEAN_SENTENCE = 22
MAX_MEDIAN_PARAGRAPH = 60
MAX_ARCH_LINES = 600

GENERATED = re.compile(r"<!-- ([a-z-]+):begin.*?<!-- \1:end -->", re.S)
ITEM = re.compile(r"\s*([-*+]|\d+\.)\s")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(0-9])")
ABBREV = re.compile(r"\b(e\.g|i\.e|cf|vs|et al)\.$")


def paragraphs(text):
    """The prose paragraphs of a Markdown text, each one string."""
    out, cur, code = [], [], False

    def flush():
        if cur:
            out.append(" ".join(cur))
            cur.clear()
    for line in GENERATED.sub("", text).split("\n"):
        s = line.strip()
        if s.startswith("```"):
            code = not code
            flush()
            continue
        if code or not s or s.startswith(("|", "#", "<!--", "<")):
            flush()
            continue
        if ITEM.match(line):
            flush()
        cur.append(s)
    flush()
    return out


def sentences(par):
    """The sentences of one paragraph."""
    out, cur = [], ""
    for piece in SENTENCE_END.split(par):
        cur = f"{cur} {piece}".strip()
        if not ABBREV.search(cur):
            out.append(cur)
            cur = ""
    if cur:
        out.append(cur)
    return out


def measure(path):
    """(paragraph word counts, sentence word counts) of one file."""
    with open(path, encoding="utf-8") as f:
        pars = paragraphs(f.read())
    return ([len(p.split()) for p in pars],
            [len(s.split()) for p in pars for s in sentences(p)])


def files(root):
    return [os.path.join(root, "README.md")] + \
        sorted(glob.glob(os.path.join(root, "docs", "*.md")))


def main():
    root = sys.argv[1]
    report = "--report" in sys.argv[2:]
    pars, sents = [], []
    for path in files(root):
        p, s = measure(path)
        pars += p
        sents += s
        if report:
            print(f"{os.path.relpath(path, root):26s} paragraphs {len(p):4d} "
                  f"median {statistics.median(p) if p else 0:6.1f} words; "
                  f"sentences {len(s):4d} mean {statistics.mean(s) if s else 0:5.1f} words")
    mean_s, med_p = statistics.mean(sents), statistics.median(pars)
    with open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8") as f:
        arch = sum(1 for _ in f)
    print(f"all: mean sentence {mean_s:.1f} words (at most {MAX_MEAN_SENTENCE}), "
          f"median paragraph {med_p:.1f} words (at most {MAX_MEDIAN_PARAGRAPH}), "
          f"docs/ARCHITECTURE.md {arch} lines (under {MAX_ARCH_LINES})")
    if report:
        return 0
    bad = []
    if mean_s > MAX_MEAN_SENTENCE:
        bad.append(f"the mean sentence has {mean_s:.1f} words")
    if med_p > MAX_MEDIAN_PARAGRAPH:
        bad.append(f"the median paragraph has {med_p:.1f} words")
    if arch >= MAX_ARCH_LINES:
        bad.append(f"docs/ARCHITECTURE.md has {arch} lines")
    if bad:
        print("FAIL: " + "; ".join(bad) + " (tests/docs/test_prose.py --report: per file)")
        return 1
    print("ok: prose budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
