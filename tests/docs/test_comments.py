#!/usr/bin/env python3
"""test_comments.py — no issue numbers or dates in the code's comments.

    test_comments.py SOURCE_ROOT

A comment says why the code is as it is, not when or under which ticket it
changed: the tracker's numbers and the calendar mean nothing to a reader
of the code. Scanned: the C, CUDA, Python, shell and meson files under
DIRS and the top-level meson files. What counts as a comment:

  - C and CUDA (.c .h .cu .cuh): `//` and `/* */` comments, outside string
    and character literals;
  - Python: `#` comments and docstrings (a module's, class's or
    function's first statement when it is a string);
  - shell and meson: `#` comments outside quotes (shell here-documents are
    data and are skipped).

Code, string literals and data stay free to hold dates (a field's
`ADDED_*` date, a record's timestamp). Flagged in a comment, also where
it spans two lines of one comment (N a number, Mon a month's name):

  - a tracker reference: the word for a tracker's item (or its plural)
    followed by N or #N, by a colon or by a quoted title; its
    possessive; the word after "in the";
  - a date: YYYY-MM-DD, YYYY-MM, Mon YYYY, D Mon YYYY, Mon D, YYYY. A
    timestamp (YYYY-MM-DDThh:mm:ssZ) is an example of a format, not a
    date of the history, and is not flagged.

Fails (exit 1) naming FILE:LINE and the text of each hit.
"""
import ast
import io
import os
import re
import sys
import tokenize

DIRS = ["bench", "methods", "kernels", "models", "plots", "scripts",
        "tests", ".ci"]
TOP = ["meson.build", "meson_options.txt", "meson.options"]
C_EXT = (".c", ".h", ".cu", ".cuh", ".cc", ".cpp", ".hpp")
SH_EXT = (".sh", ".sbatch", ".bash")
LEAD = re.compile(r"^\s*(?:/\*+|\*+(?!/)|//+|#+)?\s*")

MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|"
         r"June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|"
         r"Nov(?:ember)?|Dec(?:ember)?)")
YEAR = r"(?:19|20)\d\d"
PATTERNS = [
    ("issue", re.compile(r"\bissues?\s*#?\s*\d+", re.I)),
    ("issue", re.compile(r"\bissue's\b|\bin the issue\b", re.I)),
    ("issue", re.compile(r"\bissues?\s*(?::|\"|“|'(?!s\b))", re.I)),
    ("date", re.compile(
        rf"(?<![\w-]){YEAR}-(?:0[1-9]|1[0-2])(?:-\d\d)?(?![\w-])")),
    ("date", re.compile(rf"\b{MONTH}\.?\s+(?:\d{{1,2}},?\s+)?{YEAR}\b")),
    ("date", re.compile(rf"\b\d{{1,2}}\s+{MONTH}\.?,?\s+{YEAR}\b")),
]


def c_comments(text):
    """(line, text) of each line of each comment of C or CUDA source."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in "\"'":
            i += 1
            while i < n and text[i] != c and text[i] != "\n":
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append((line, text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k, part in enumerate(text[i:j].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, j)
            i = j
        else:
            i += 1
    return out


def py_comments(text):
    """(line, text) of each `#` comment and each docstring line."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string))
    except (tokenize.TokenError, SyntaxError):
        pass
    lines = text.split("\n")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
            continue
        body = node.body
        if (body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            e = body[0]
            for ln in range(e.lineno, e.end_lineno + 1):
                out.append((ln, lines[ln - 1]))
    return out


def hash_comments(text, shell):
    """(line, text) of each `#` comment of shell or meson source: a `#`
    outside quotes that starts a word (shell) or anywhere outside quotes
    (meson)."""
    out, quote, heredoc = [], None, []
    for ln, s in enumerate(text.split("\n"), 1):
        if heredoc and quote is None:
            if s.strip() == heredoc[0] or s == heredoc[0]:
                heredoc.pop(0)
            continue
        i, n = 0, len(s)
        while i < n:
            c = s[i]
            if quote:
                if shell and quote == '"' and c == "\\":
                    i += 2
                    continue
                if not shell and c == "\\":
                    i += 2
                    continue
                if s.startswith(quote, i):
                    i += len(quote)
                    quote = None
                    continue
                i += 1
                continue
            if c == "\\":
                i += 2
                continue
            if not shell and s.startswith("'''", i):
                quote = "'''"
                i += 3
                continue
            if c == "'" or (shell and c == '"'):
                quote = c
                i += 1
                continue
            if c == "#" and (not shell or i == 0 or s[i - 1] in " \t;|&("):
                out.append((ln, s[i:]))
                break
            if shell and s.startswith("<<", i) and not s.startswith("<<<", i):
                m = re.match(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1", s[i:])
                if m:
                    heredoc.append(m.group(2))
                    i += m.end()
                    continue
            i += 1
        if not shell and quote == "'":
            quote = None  # a meson '...' string ends with its line
    return out


def comments(path, text):
    name = os.path.basename(path)
    if name.endswith(C_EXT):
        return c_comments(text)
    if name.endswith(".py"):
        return py_comments(text)
    if name.endswith(SH_EXT):
        return hash_comments(text, True)
    if name in TOP:
        return hash_comments(text, False)
    return None


def files(root):
    for t in TOP:
        if os.path.isfile(os.path.join(root, t)):
            yield t
    for d in DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, d)):
            dirnames[:] = sorted(x for x in dirnames
                                 if x != "__pycache__" and x != "corpus")
            for f in sorted(filenames):
                yield os.path.relpath(os.path.join(dirpath, f), root)


def scan(root):
    hits, scanned = [], 0
    for rel in files(root):
        if not os.path.basename(rel).endswith(C_EXT + SH_EXT + (".py",)) \
                and os.path.basename(rel) not in TOP:
            continue
        with open(os.path.join(root, rel), encoding="utf-8",
                  errors="replace") as f:
            text = f.read()
        found = comments(rel, text)
        if found is None:
            continue
        scanned += 1
        # one text of all comments, the lines of a comment joined by a
        # space (their leading markers cut) so that a hit may span two
        stream, starts, prev = [], [], None
        for ln, part in sorted(found):
            if prev is not None and ln == prev + 1:
                part = LEAD.sub("", part)
                stream.append(" ")
            elif prev is not None:
                stream.append("\0")
            starts.append((sum(map(len, stream)), ln))
            stream.append(part)
            prev = ln
        stream = "".join(stream)
        spans = []
        for what, rx in PATTERNS:
            for m in rx.finditer(stream):
                if any(a < m.end() and m.start() < b for a, b in spans):
                    continue  # one hit where two patterns match one date
                spans.append(m.span())
                ln = max(l for at, l in starts if at <= m.start())
                hits.append((rel, ln, f"{what} \"{m.group(0)}\""))
    hits.sort(key=lambda h: (h[0], h[1]))
    hits = [f"{rel}:{ln}: {text} in a comment" for rel, ln, text in hits]
    return hits, scanned


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1])
        sys.exit(2)
    hits, scanned = scan(sys.argv[1])
    if scanned < 50:
        print(f"FAIL: only {scanned} files scanned under {sys.argv[1]}")
        sys.exit(1)
    for h in hits:
        print(h)
    if hits:
        print(f"FAIL: {len(hits)} issue numbers or dates in comments; say "
              f"the reason instead of the history")
        sys.exit(1)
    print(f"ok: {scanned} files, no issue numbers or dates in comments")


if __name__ == "__main__":
    main()
