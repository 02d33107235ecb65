#!/usr/bin/env python3
"""Checks that a checkpoint written by `alps prune` loads in Hugging Face transformers as is, and that transformers
and `alps eval` agree on its perplexity (the windows of docs/pipeline.md) — an independent check of the pruned checkpoint.

Usage: python3 scripts/check_hf_load.py PRUNED_DIR [--alps build/apps/alps/alps] [--text FILE] [--seqlen 256]
           [--windows 8] [--tokenizer DIR]
--tokenizer loads transformers' tokenizer from another directory holding the same tokenizer files: transformers 5
picks the tokenizer class from config.json's model_type, so a Qwen2 or Mistral test fixture carrying
stories260K's SentencePiece files would otherwise be read as another tokenizer than the one alps reads.
Prints per-linear sparsity as transformers sees it and both NLLs; exits 1 when they differ by more than 1e-4
(relative).
"""
import argparse
import json
import math
import pathlib
import subprocess
import sys
import tempfile

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

root = pathlib.Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--alps", default=str(root / "build/apps/alps/alps"))
ap.add_argument("--text", default=str(root.parent / "shared/data/text/tinystories/tinystories.valid.txt"))
ap.add_argument("--seqlen", type=int, default=256)
ap.add_argument("--windows", type=int, default=8)
ap.add_argument("--tokenizer", help="directory to load the tokenizer from (default: the model's)")
args = ap.parse_args()

model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
tok = AutoTokenizer.from_pretrained(args.tokenizer or args.model)
for name, p in model.named_parameters():
    if name.endswith("proj.weight") or ".fc" in name or name.split(".")[-2] in ("w1", "w2", "w3"):
        print(f"{name:50s} sparsity {(p == 0).float().mean().item():.4f}")

# Leading whitespace is stripped: for a text that starts with a space, transformers' LlamaTokenizer (legacy=false)
# drops the extra "▁" piece that SentencePiece itself (and alps) produce, which shifts every window by one token.
text = open(args.text, encoding="utf-8").read().lstrip()
tmp = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8")
tmp.write(text)
tmp.close()
ids = tok(text, return_tensors="pt").input_ids
n = min(ids.numel() // args.seqlen, args.windows)
nlls = []
with torch.no_grad():
    for i in range(n):
        w = ids[:, i * args.seqlen:(i + 1) * args.seqlen]
        logits = model(w).logits.float()
        nlls.append(torch.nn.functional.cross_entropy(logits[0, :-1], w[0, 1:]).item())
hf = sum(nlls) / n

res = subprocess.run([args.alps, "-q", "eval", "--model", args.model, "--ppl", tmp.name, "--seqlen", str(args.seqlen),
                      "--max-windows", str(n), "--device", "cpu", "--json"], stdout=subprocess.PIPE, check=True, text=True)
ours = json.loads(res.stdout)["results"][0]["nll"]
rel = abs(ours - hf) / hf
print(f"windows {n} x {args.seqlen}: transformers nll {hf:.6f} (ppl {math.exp(hf):.4f}), alps nll {ours:.6f}, "
      f"relative difference {rel:.2e}")
sys.exit(0 if rel < 1e-4 else 1)
