#!/usr/bin/env python3
"""Checks that a checkpoint written by `alps prune` loads in Hugging Face transformers as is, and that transformers
and `alps eval` agree on its perplexity (the windows of docs/pipeline.md) — an independent check of the pruned checkpoint.

Usage: python3 scripts/check_hf_load.py PRUNED_DIR [--alps build/apps/alps/alps] [--text FILE] [--seqlen 256]
           [--windows 8] [--tokenizer DIR]
--tokenizer loads transformers' tokenizer from another directory holding the same tokenizer files: transformers 5
picks the tokenizer class from config.json's model_type, so a Qwen2 or Mistral test fixture carrying
stories260K's SentencePiece files would otherwise be read as another tokenizer than the one alps reads.
--source DIR names the checkpoint the run read: the output must then hold the same tensors (names, shapes and dtypes,
read from the safetensors headers) and the same config.json, except what a structured run changes by design (its
report's steps: the counts they name, head_dim, the removed units' tensors), and transformers must load it as the
same class with no key missing, unexpected or of another shape.
Prints per-linear sparsity as transformers sees it and both NLLs; exits 1 when they differ by more than 1e-4
(relative) or a --source check fails.
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
ap.add_argument("--source", help="the checkpoint the run read: same tensors and config (see above)")
args = ap.parse_args()


def stored_tensors(d):
    """{name: (dtype, shape)} from the safetensors headers of checkpoint directory d (one file, or an index's)."""
    d = pathlib.Path(d)
    index = d / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    out = {}
    for f in files:
        with open(d / f, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
        out.update({k: (v["dtype"], v["shape"]) for k, v in header.items() if k != "__metadata__"})
    return out


def flat(cfg, prefix=""):
    """config.json as {dotted key: value}, nested configs (Gemma 3's text_config) flattened."""
    out = {}
    for k, v in cfg.items():
        if isinstance(v, dict) and k.endswith("_config"):
            out.update(flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


failures = []
if args.source:
    src, out = stored_tensors(args.source), stored_tensors(args.model)
    report_file = pathlib.Path(args.model) / "alps-report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    structured = report.get("extra", {}).get("structured")
    if structured is None:
        for name in sorted(set(src) | set(out)):
            if src.get(name) != out.get(name):
                failures.append(f"tensor {name}: source {src.get(name)}, output {out.get(name)}")
        changed = set()
    else:  # fewer units: shapes (and, for experts, names) change; every tensor that stays keeps its dtype
        for name in sorted(set(src) & set(out)):
            if src[name][0] != out[name][0]:
                failures.append(f"tensor {name}: dtype {src[name][0]} became {out[name][0]}")
        changed = {s["field"] for s in structured["steps"]} | {"head_dim", "num_experts", "num_local_experts"}
    a = flat(json.loads((pathlib.Path(args.source) / "config.json").read_text()))
    b = flat(json.loads((pathlib.Path(args.model) / "config.json").read_text()))
    # The counts a structured run may change: the language model's, at the top level or in a multimodal config's
    # text_config (a vision tower's are carried as they were).
    excepted = sorted(k for k in set(a) | set(b) if k.split(".")[-1] in changed and k.count(".") <= 1 and
                      (k.count(".") == 0 or k.startswith("text_config.")))
    for key in sorted(set(a) | set(b)):
        if key not in excepted and a.get(key) != b.get(key):
            failures.append(f"config.json {key}: source {a.get(key)!r}, output {b.get(key)!r}")
    excepted = [k for k in excepted if k in b]
    print(f"--source: {len(out)} tensors{' (structured run)' if structured else ''}, config.json as read"
          f"{' except the structured counts (' + ', '.join(excepted) + ')' if structured else ''}")

model, info = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, output_loading_info=True)
model.eval()
if args.source:
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        if info.get(kind):
            failures.append(f"transformers: {kind} {sorted(info[kind])[:5]}")
    want = json.loads((pathlib.Path(args.model) / "config.json").read_text())["architectures"][0]
    if type(model).__name__ != want:
        failures.append(f"transformers loaded {type(model).__name__}, config.json says {want}")
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
for f in failures:
    print("FAILED", f)
sys.exit(0 if rel < 1e-4 and not failures else 1)
