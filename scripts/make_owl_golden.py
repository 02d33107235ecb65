#!/usr/bin/env python3
"""Golden for alps's OWL block sparsities (--sparsity-profile owl), from OWL's own code run on SmolLM2-135M-Instruct.

With --pattern P:M the script runs OWL's mixed N:M variant instead (its README's wanda_owl_structure,
`prune_wanda_outlier_structure`; P:M in OWL's notation, P pruned of every M) and records each block's pruned count.

OWL (Yin et al., ICML 2024) is github.com/luuyin/OWL; this script imports its lib/prune_all.py from a checkout given
by --owl (none of its code is copied here) and calls its `prune_wanda_outlier` on the model in fp32 on the CPU. It
stops that function once the allocation is made (at its second call of get_loaders, which starts the pruning), and
records what OWL computed: each block's outlier ratio (percent of the block's pooled Wanda scores |W| sqrt(||x_j||^2 /
nsamples) above M times their mean, measured on the dense model's activations) and the allocation 1 - r_b.

What the script supplies around OWL's code, and why:
- the calibration text: OWL's get_c4 reads the C4 train shard through `datasets` from the Hub; here the same
  function reads the first 1000 documents of that shard shipped in the data directory (`alps prune --calib c4`'s
  source), so OWL's own sampling loop (CPython's random, SparseGPT's get_c4) picks the windows alps picks;
- the tokenizer: tokenizer.json through `tokenizers` (transformers' AutoTokenizer would take tokenizer_config's
  GPT2Tokenizer and drop the Digits pre-tokenizer; alps reads tokenizer.json). The tokenizers release that
  transformers 4.44 takes cannot read this tokenizer.json, so the documents are tokenised beforehand by another
  Python with a recent `tokenizers` (--tokenize-with) and OWL's loop looks their ids up;
- transformers 4.44.2 with tokenizers 0.19.1: OWL calls each decoder layer with position_ids alone and takes
  element [0] of its result, which later releases no longer accept (they want position_embeddings and return a
  tensor). Pinned environment (torch from PyPI, CPU):
      python3 -m venv ~/.cache/alps/venv-owl
      echo <a site-packages holding torch==2.11.0 and numpy> > ~/.cache/alps/venv-owl/lib/python3.*/site-packages/zz-torch.pth
      ~/.cache/alps/venv-owl/bin/pip install --no-deps transformers==4.44.2 tokenizers==0.19.1
- fewer windows than OWL's 128 (--nsamples, default 8) so that the dense pass takes minutes on a CPU; OWL's
  windows are 2048 tokens long whatever model.seqlen says, and so are these.

Usage (from the repository root, after scripts/get_smollm2.sh and a checkout of luuyin/OWL):
    ~/.cache/alps/venv-owl/bin/python scripts/make_owl_golden.py --owl PATH/TO/OWL \
        [--model ~/.cache/alps/models/SmolLM2-135M-Instruct] [--data-dir ../shared/data] \
        [--out tests/data/owl/smollm2_owl_golden.json]
    ... --pattern 5:8 --m 6 --lamda 2 --out tests/data/owl/smollm2_owl_nm_golden.json   (the README's N:M run)
"""
import argparse
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import types

import numpy as np
import torch
import transformers
from transformers import LlamaForCausalLM

root = pathlib.Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--owl", required=True, help="a checkout of github.com/luuyin/OWL")
ap.add_argument("--model", default=os.path.expanduser("~/.cache/alps/models/SmolLM2-135M-Instruct"))
ap.add_argument("--data-dir", default=str(root.parent / "shared" / "data"))
ap.add_argument("--out", default=str(root / "tests/data/owl/smollm2_owl_golden.json"))
ap.add_argument("--nsamples", type=int, default=8)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--sparsity", type=float, default=0.7)
ap.add_argument("--m", type=float, default=5.0, help="OWL's Hyper_m, the outlier threshold")
ap.add_argument("--lamda", type=float, default=0.08, help="OWL's Lamda, half the width of the sparsity range")
ap.add_argument("--pattern", default="", help="P:M: OWL's mixed N:M variant, P pruned of every M (OWL's notation)")
ap.add_argument("--tokenize-with", default=os.path.expanduser("~/.cache/alps/venv-torch-2.11.0/bin/python"),
                help="a Python whose `tokenizers` reads the model's tokenizer.json (0.20 or later)")
args = ap.parse_args()

torch.set_num_threads(os.cpu_count() or 1)
c4 = pathlib.Path(args.data_dir) / "text/c4/c4-train.00000-of-01024.first1000.jsonl"
docs = [json.loads(line)["text"] for line in open(c4, encoding="utf-8")]


class Validation:  # OWL joins valdata[:1100]['text'] and never uses it for the allocation
    def __getitem__(self, rows):
        return {"text": docs[rows][:4]}


def local_c4(path, name=None, data_files=None, split=None):
    return [{"text": t} for t in docs] if split == "train" else Validation()


# OWL's lib/data.py imports load_dataset from `datasets` (the Hub); this one reads the shipped documents.
sys.modules["datasets"] = types.SimpleNamespace(load_dataset=local_c4)
sys.path.insert(0, args.owl)
import lib.data as owl_data  # noqa: E402  (OWL's modules, from the checkout)
import lib.prune_all as owl  # noqa: E402

TOKENIZE = """
import json, sys, tokenizers
tok = tokenizers.Tokenizer.from_file(sys.argv[1])
docs = [json.loads(line)["text"] for line in open(sys.argv[2], encoding="utf-8")]
print(json.dumps([e.ids for e in tok.encode_batch(docs)]))
"""
ids_of = dict(zip(docs, json.loads(subprocess.run(
    [args.tokenize_with, "-c", TOKENIZE, os.path.join(args.model, "tokenizer.json"), str(c4)], capture_output=True,
    text=True, check=True).stdout)))


def tokenize(text, return_tensors=None):
    # Every training document was tokenised above; the validation text OWL joins is never used for the allocation.
    return types.SimpleNamespace(input_ids=torch.tensor([ids_of.get(text, [0] * 8)]))


windows = []
calls = []


class Allocated(Exception):
    pass


def get_loaders(name, nsamples=128, seed=0, seqlen=2048, tokenizer=None):
    calls.append(name)
    if len(calls) > 1:  # OWL starts pruning: the allocation is made
        raise Allocated()
    loader, val = owl_data.get_loaders(name, nsamples=nsamples, seed=seed, seqlen=seqlen, tokenizer=tokenizer)
    windows.extend(inp[0, :16].tolist() for inp, _ in loader)
    return loader, val


printed = {}


def capture(*values, **_):
    if values and isinstance(values[0], str) and values[0] in ("before adjustment", "after adjustment"):
        printed[values[0]] = values[1]


owl.get_loaders = get_loaders
owl.print = capture  # module globals come before builtins: OWL's progress prints land here

model = LlamaForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32, attn_implementation="sdpa")
model.eval()
model.seqlen = 2048
model.hf_device_map = {}
owl_args = types.SimpleNamespace(nsamples=args.nsamples, seed=args.seed, Hyper_m=args.m, Lamda=args.lamda,
                                 sparsity_ratio=args.sparsity, model="smollm2")
prune_n, prune_m = (int(x) for x in args.pattern.split(":")) if args.pattern else (0, 0)
with torch.no_grad():
    try:
        if args.pattern:
            owl.prune_wanda_outlier_structure(owl_args, model, tokenize, device=torch.device("cpu"), prune_n=prune_n,
                                              prune_m=prune_m)
        else:
            owl.prune_wanda_outlier(owl_args, model, tokenize, device=torch.device("cpu"))
    except Allocated:
        pass
ratios = [float(r) for r in printed["before adjustment"]]
allocation = np.asarray(printed["after adjustment"], dtype=np.float64)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def owl_revision():
    try:
        return subprocess.run(["git", "-C", args.owl, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


out = {
    "what": "OWL's block sparsities for SmolLM2-135M-Instruct, from luuyin/OWL's prune_wanda_outlier "
            "(scripts/make_owl_golden.py)",
    "owl_revision": owl_revision(),
    "model_sha256": sha256(os.path.join(args.model, "model.safetensors")),
    "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                 "numpy": np.__version__},
    "calibration": {"source": "c4 (first 1000 documents of c4-train.00000-of-01024)", "nsamples": args.nsamples,
                    "seqlen": 2048, "seed": args.seed, "windows_first16": windows},
    "m": args.m,
    "lambda": args.lamda,
    "sparsity": args.sparsity,
    "outlier_ratio_percent": ratios,
}
if args.pattern:  # OWL's "after adjustment": each block's pruned count of every M
    out["what"] = out["what"].replace("prune_wanda_outlier", "prune_wanda_outlier_structure (mixed N:M)")
    del out["sparsity"]  # the N:M variant's target is the pattern
    out["pattern_owl"] = args.pattern
    out["block_pruned_per_group"] = [int(round(float(p))) for p in allocation]
    out["block_sparsity"] = [float(p) / prune_m for p in allocation]
else:
    out["block_sparsity"] = [float(1.0 - r) for r in allocation]
pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
with open(args.out, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(f"wrote {args.out}: {len(ratios)} blocks, sparsities {min(out['block_sparsity']):.4f} .. "
      f"{max(out['block_sparsity']):.4f}, mean {np.mean(out['block_sparsity']):.6f}")
