#!/usr/bin/env bash
# Every family's fixture pruned by alps and loaded by transformers (docs/architectures.md): for each fixture of
# tests/data/model, `alps prune` (ALPS 50% by default, or the flags after --), then scripts/check_hf_load.py with
# --source: the same tensor names, shapes and dtypes and the same config.json as the input (but for what a structured
# run changes), the same class in transformers with no key missing or unexpected, and transformers' perplexity equal
# to `alps eval`'s. Prints one line per fixture; exits 1 if any fails.
#
# Usage: scripts/check_families_hf.sh [--python PY] [--alps BIN] [--only "f1 f2"] [-- PRUNE FLAGS]
#   --python PY   a python with the pinned torch and transformers (default: python3; see scripts/make_model_fixtures.py)
#   --alps BIN    the alps binary (default build/apps/alps/alps)
#   --only LIST   these fixtures (default: every family's, below)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=python3 alps=$root/build/apps/alps/alps
only="qwen2_linear mistral_swa qwen3_qknorm olmo2_post gemma2_softcap gemma3_local_global gemma3_multimodal
phi3_longrope phi3_swa qwen3_moe_routed qwen2_moe_shared mixtral_top2 olmoe_clip"
flags=(--method alps --sparsity 0.5)
while (($#)); do
  case $1 in
    --python) python=$2; shift 2 ;;
    --alps) alps=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --) shift; flags=("$@"); break ;;
    *) echo "check_families_hf.sh: unknown argument '$1' (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
done
tok=$root/tests/data/real/models/stories260K-hf
calib=$root/tests/data/real/text/tinystories/tinystories.train.first200.txt
text=$root/tests/data/real/text/tinystories/tinystories.valid.txt  # scored by both: 8 windows of 64 tokens
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for f in $only; do
  # The fixtures carry no tokenizer: stories260K's SentencePiece files stand in (the ids are within every vocab).
  cp -r "$root/tests/data/model/$f" "$work/$f"
  cp "$tok"/{tokenizer.model,tokenizer_config.json,special_tokens_map.json} "$work/$f/"
  chmod -R u+w "$work/$f"
  if ! "$alps" -q prune --model "$work/$f" --out "$work/$f-out" --calib "$calib" --nsamples 16 --seqlen 64 \
      --device cpu "${flags[@]}" >"$work/$f.prune.log" 2>&1; then
    echo "$f: alps prune failed"; sed 's/^/  /' "$work/$f.prune.log" | tail -5; failed=1; continue
  fi
  if out=$("$python" "$root/scripts/check_hf_load.py" "$work/$f-out" --source "$work/$f" --alps "$alps" \
      --text "$text" --seqlen 64 --windows 8 --tokenizer "$tok" 2>&1); then
    echo "$f: ok; $(grep -E '^windows|^--source' <<<"$out" | tr '\n' ' ')"
  else
    echo "$f: FAILED"; { grep -E 'FAILED|^windows|Error' <<<"$out" || tail -3 <<<"$out"; } | sed 's/^/  /'; failed=1
  fi
done
exit $failed
