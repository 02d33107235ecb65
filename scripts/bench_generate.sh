#!/usr/bin/env bash
# Greedy decoding speed: `alps generate` (KV cache) against transformers' `generate` (use_cache=True, greedy) on the
# same CPU, same checkpoint, same prompt ids, the same number of new tokens, one after the other. Both time from the
# prompt's forward to the last token (model loading excluded; transformers gets one warm-up call first), and the
# generated ids are compared.
#
# Usage (repository root): scripts/bench_generate.sh [MODEL=~/.cache/alps/models/SmolLM2-135M-Instruct]
#                          [TOKENS=128] [VENV=/tmp/lmeval-venv] [PROMPT="Once upon a time"] [REPEATS=3]
#   needs `alps` built in build/ and torch + transformers in VENV (scripts/make_zeroshot_golden.py's venv serves).
set -euo pipefail
MODEL=${1:-$HOME/.cache/alps/models/SmolLM2-135M-Instruct}
TOKENS=${2:-128}
VENV=${3:-/tmp/lmeval-venv}
PROMPT=${4:-Once upon a time}
REPEATS=${5:-3}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

for r in $(seq "$REPEATS"); do
  build/apps/alps/alps -q generate --model "$MODEL" --prompt "$PROMPT" --max-tokens "$TOKENS" --ignore-eos --json \
    > "$OUT/alps-$r.json"
  "$VENV/bin/python" - "$MODEL" "$OUT/alps-$r.json" "$TOKENS" > "$OUT/hf-$r.json" <<'PY'
import json, sys, time
import torch
from transformers import AutoModelForCausalLM
model_dir, alps_json, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
prompt = json.load(open(alps_json))["prompt_ids"]
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
ids = torch.tensor([prompt])
gen = dict(do_sample=False, use_cache=True, pad_token_id=0)
with torch.no_grad():
    model.generate(ids, max_new_tokens=2, min_new_tokens=2, **gen)  # warm-up
    t0 = time.perf_counter()
    out = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, **gen)
    seconds = time.perf_counter() - t0
print(json.dumps({"ids": out[0, len(prompt):].tolist(), "seconds": seconds, "threads": torch.get_num_threads(),
                  "torch": torch.__version__}))
PY
done

python3 - "$OUT" "$REPEATS" "$TOKENS" <<'PY'
import json, os, sys
out, repeats, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print("| run | tokens | alps s | alps first token s | transformers s | speed-up | ids equal (first differing) |")
print("|---:|---:|---:|---:|---:|---:|---|")
ratios = []
for r in range(1, repeats + 1):
    a = json.load(open(os.path.join(out, f"alps-{r}.json")))
    h = json.load(open(os.path.join(out, f"hf-{r}.json")))
    diff = next((i for i, (x, y) in enumerate(zip(a["ids"], h["ids"])) if x != y), None)
    ratios.append(h["seconds"] / a["seconds"])
    print(f"| {r} | {len(a['ids'])} | {a['seconds']:.2f} | {a['first_token_seconds']:.3f} | {h['seconds']:.2f} | "
          f"{ratios[-1]:.2f}x | {diff is None and len(a['ids']) == len(h['ids'])}"
          f"{'' if diff is None else f' ({diff})'} |")
print(f"\nprompt {len(a['prompt_ids'])} tokens, {tokens} new tokens; transformers: torch {h['torch']}, "
      f"{h['threads']} threads; median speed-up {sorted(ratios)[len(ratios) // 2]:.2f}x")
PY
