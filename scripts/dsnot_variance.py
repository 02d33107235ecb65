#!/usr/bin/env python3
"""How much DSnoT's choice of variance matters: alps's default var_j over all calibration tokens against the
reference's mean of the per-sequence variances (alps's `--option variance=sequences`), measured on the attention
inputs of the dense model. The reference is github.com/zyxxmu/DSnoT; the commit read was not recorded, and its variance
is the one described here at commit 4c029dfa66cae3dba7f4a77c78a524e272fc638c.

For each attention linear's input (q/k/v share one; o_proj another), over NSEQ windows of SEQLEN tokens drawn from
the first C4 train documents: the relative difference of the two variances per input feature, and on the Wanda mask
at SPARSITY, the fraction of rows whose first DSnoT regrow pick (argmax / argmin of W_ij mu_j / var_j over the pruned
j, by the sign of the row's e) differs between the two.

Usage: python3 scripts/dsnot_variance.py MODEL_DIR C4_JSONL [--nseq 8] [--seqlen 2048] [--sparsity 0.6]
"""
import argparse
import json
import random

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("c4")
ap.add_argument("--nseq", type=int, default=8)
ap.add_argument("--seqlen", type=int, default=2048)
ap.add_argument("--sparsity", type=float, default=0.6)
args = ap.parse_args()

tok = AutoTokenizer.from_pretrained(args.model)
model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
docs = [json.loads(line)["text"] for line in open(args.c4)]
random.seed(0)
windows = []
while len(windows) < args.nseq:
    ids = tok(random.choice(docs), return_tensors="pt").input_ids
    if ids.shape[1] <= args.seqlen:
        continue
    i = random.randint(0, ids.shape[1] - args.seqlen - 1)
    windows.append(ids[:, i:i + args.seqlen])

inputs = {}
hooks = []
for li, layer in enumerate(model.model.layers):
    for name in ("q_proj", "o_proj"):
        lin = getattr(layer.self_attn, name)
        key = (li, name)
        hooks.append(lin.register_forward_hook(
            lambda m, x, y, key=key: inputs.setdefault(key, []).append(x[0][0].double())))
with torch.no_grad():
    for w in windows:
        model(w)
for h in hooks:
    h.remove()

rel, changed, rows = [], 0, 0
for (li, name), xs in sorted(inputs.items()):
    X = torch.cat(xs)                                    # [T, in]
    mu = X.mean(0)
    var_all = X.var(0, unbiased=False)                   # alps: G_jj / T - mu_j^2
    var_seq = torch.stack([x.var(0, unbiased=False) for x in xs]).mean(0)  # the reference's (equal lengths)
    rel.append((var_seq / var_all - 1).abs())
    for lin_name in (("q_proj", "k_proj", "v_proj") if name == "q_proj" else ("o_proj",)):
        W = getattr(model.model.layers[li].self_attn, lin_name).weight.double()
        score = W.abs() * X.norm(dim=0)                  # Wanda's score
        k = int(args.sparsity * W.shape[1])
        pruned = torch.zeros_like(W, dtype=torch.bool).scatter_(1, score.argsort(1)[:, :k], True)
        M = W * mu
        e = (M * pruned).sum(1)
        picks = []
        for var in (var_all, var_seq):
            r = torch.where(pruned, M / var, torch.full_like(M, float("nan")))
            pick_max = torch.nan_to_num(r, nan=-float("inf")).argmax(1)
            pick_min = torch.nan_to_num(r, nan=float("inf")).argmin(1)
            picks.append(torch.where(e > 0, pick_max, pick_min))
        changed += int((picks[0] != picks[1]).sum())
        rows += W.shape[0]
rel = torch.cat(rel)
q = torch.quantile(rel.float(), torch.tensor([0.5, 0.9, 0.99]))
print(f"{args.nseq} x {args.seqlen} tokens, {len(inputs)} attention inputs, {rel.numel()} features")
print(f"|var_seq / var_all - 1|: median {q[0]:.2e}, 90th percentile {q[1]:.2e}, 99th {q[2]:.2e}, max {rel.max():.2e}")
print(f"first regrow pick differs in {changed} of {rows} rows ({100 * changed / rows:.2f}%) "
      f"at sparsity {args.sparsity}")
