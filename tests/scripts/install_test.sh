#!/usr/bin/env bash
# `cmake --install` as README describes it: the installed alps finds its SentencePiece module and its data (the data
# the repository ships, in PREFIX/share/alps/data) beside itself, not in the build tree, not relative to the working
# directory; and README's quick start runs with it from an unrelated directory.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset ALPS_DATA_DIR ALPS_SENTENCEPIECE_SHIM

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
alps="$tmp/prefix/bin/alps"
[ -x "$alps" ] || fail "no $alps"
[ -f "$tmp/prefix/lib/alps/libalps_sentencepiece_shim.so" ] || fail "SentencePiece module not installed"
[ -f "$tmp/prefix/share/alps/data/models/stories260K-hf/config.json" ] || fail "shipped data not installed"

mkdir "$tmp/work"
cd "$tmp/work"
"$alps" --version >"$tmp/version" || fail "--version"
grep -qx "data directory: $tmp/prefix/share/alps/data (installed with alps)" "$tmp/version" ||
  fail "installed alps does not read its own data: $(cat "$tmp/version")"

# README's quick start (its evaluation cut to a few windows), run from a directory that holds nothing of alps's.
"$alps" --log-level debug prune --model stories260K-hf --sparsity 0.7 --eval wikitext2 --eval-max-windows 8 \
  --out pruned >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; fail "quick start failed"; }
grep -q "SentencePiece module: $tmp/prefix/lib/alps/libalps_sentencepiece_shim.so" "$tmp/err" ||
  fail "the module was not loaded from the installation: $(grep -i sentencepiece "$tmp/err")"
grep -q "from $tmp/prefix/share/alps/data/text/c4/" "$tmp/err" || fail "calibration not from the installed data"
grep -q "^wikitext2  *perplexity" "$tmp/out" || fail "no perplexity in the summary: $(cat "$tmp/out")"
[ -f pruned/model.safetensors ] && [ -f pruned/alps-report.json ] || fail "no checkpoint written"
echo "ok"
