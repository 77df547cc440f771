#!/bin/sh
# plot.sh — plots/plot.py under Debian's /usr/bin/python3, which has
# python3-matplotlib (scripts/setup.sh); a python3 earlier on PATH (pyenv, a
# venv) usually has no matplotlib.
#   plots/plot.sh results/*.jsonl            figures beside the records
#   plots/plot.sh --out-dir DIR FILE.jsonl   figures in DIR
exec /usr/bin/python3 "$(dirname "$0")/plot.py" "$@"
