#!/usr/bin/env python3
"""Turns SmolLM2-135M (a dense LLaMA) into a mixture of experts (MixtralForCausalLM), the MoE test model of docs/moe.md.

No real mixture-of-experts checkpoint can be had where alps is developed, so one is made from a real dense model by
MoEfication (Zhang et al., 2022): each layer's 1536 MLP neurons are split into E experts of 1536 / E neurons (balanced
k-means on the neurons' normalised gate and up weight rows), and a router is fitted on calibration activations: for
each token of the calibration text, the norm of each expert's output (its neurons' share of the dense MLP's output)
is regressed on the MLP's input by ridge least squares, so the router scores the experts by how much they would add.
Each token then runs its top-k experts only: a real language model with sparse routing, not the dense one.

Mixtral renormalises the top-k routing weights to sum to 1. To sum the chosen experts' outputs as the dense MLP sums
its neurons', each expert's down projection is multiplied by k and the router's scores scaled down until the largest is
--logit-scale (1e-3), so that the chosen experts' weights are 1/k within a fraction of a percent, while the ranking
(which decides the routing) is the fitted one.

With --shared S, the S neurons that add the most to the MLP's output on average form a shared expert that every
token passes (Qwen2MoeForCausalLM's form, its sigmoid gate's weight zero and its down projection doubled), and the
other neurons are split into the routed experts.

The attention, norms, embeddings and tokenizer are SmolLM2's, unchanged (Mixtral's attention is LLaMA's when
sliding_window is null). The output loads in transformers as MixtralForCausalLM and in alps.

Made with (pinned): python3 -m venv /tmp/venv-arch && /tmp/venv-arch/bin/pip install torch==2.15.0
    transformers==5.23.0 safetensors sentencepiece protobuf
Usage: python3 scripts/make_moe_smollm2.py --dense ~/.cache/alps/models/SmolLM2-135M-Instruct --out OUT
           [--experts 8] [--top-k 2] [--shared 0] [--calib ../shared/data/text/c4/c4-train.00000-of-01024.first1000.jsonl]
           [--tokens 32768] [--seed 0]
OUT must not exist; it is written under a temporary name and renamed into place when complete.
"""
import argparse
import json
import os
import shutil
import tempfile

import torch
import transformers
from transformers import (AutoModelForCausalLM, AutoTokenizer, MixtralConfig, MixtralForCausalLM, Qwen2MoeConfig,
                          Qwen2MoeForCausalLM)

PINNED = {"torch": "2.15.0", "transformers": "5.23.0"}


def balanced_kmeans(x, k, iterations, generator):
    """Clusters the rows of x [n, d] (n divisible by k) into k clusters of n / k rows each: k-means whose assignment
    step fills the clusters greedily by similarity, most confident rows first."""
    n = x.shape[0]
    size = n // k
    centroids = x[torch.randperm(n, generator=generator)[:k]].clone()
    for _ in range(iterations):
        sim = x @ centroids.T  # [n, k]
        assign, counts, placed = [-1] * n, [0] * k, 0
        for flat in torch.argsort(sim.flatten(), descending=True).tolist():
            row, cluster = divmod(flat, k)
            if assign[row] >= 0 or counts[cluster] >= size:
                continue
            assign[row] = cluster
            counts[cluster] += 1
            placed += 1
            if placed == n:
                break
        assign = torch.tensor(assign)
        centroids = torch.stack([torch.nn.functional.normalize(x[assign == c].mean(0), dim=0) for c in range(k)])
    return assign


def calibration_ids(tokenizer, path, tokens, seqlen):
    ids = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            ids.extend(tokenizer(json.loads(line)["text"])["input_ids"])
            if len(ids) >= tokens:
                break
    ids = ids[: tokens // seqlen * seqlen]
    return torch.tensor(ids).view(-1, seqlen)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dense", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--shared", type=int, default=0,
                    help="neurons of a shared expert every token passes (Qwen2MoeForCausalLM); 0: none (Mixtral)")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--calib", default=os.path.join(here, "..", "..", "shared", "data", "text", "c4",
                                                     "c4-train.00000-of-01024.first1000.jsonl"))
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--logit-scale", type=float, default=1e-3,
                    help="the router's largest logit on the calibration tokens")
    args = ap.parse_args()
    for module, version in PINNED.items():
        found = __import__(module).__version__.split("+")[0]
        if found != version:
            raise SystemExit(f"{module} {found} found, the model is made with {version}")
    if os.path.exists(args.out):
        raise SystemExit(f"{args.out} exists; give a new directory")
    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)

    dense = AutoModelForCausalLM.from_pretrained(args.dense, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(args.dense)
    c = dense.config
    E, k, F, S = args.experts, args.top_k, c.intermediate_size, args.shared
    if (F - S) % E != 0 or not 1 <= k <= E or not 0 <= S < F:
        raise SystemExit(f"--experts {E} must divide intermediate_size {F} less --shared {S}, and --top-k {k} lie "
                         f"in 1..{E}")

    # Each layer's MLP input over the calibration tokens.
    ids = calibration_ids(tok, args.calib, args.tokens, 512)
    inputs = {}
    hooks = [layer.mlp.register_forward_hook(
        lambda mod, inp, out, i=i: inputs.setdefault(i, []).append(inp[0].reshape(-1, c.hidden_size)))
        for i, layer in enumerate(dense.model.layers)]
    with torch.no_grad():
        for batch in ids.split(4):
            dense(input_ids=batch)
    for h in hooks:
        h.remove()

    common = dict(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads, num_key_value_heads=c.num_key_value_heads,
        max_position_embeddings=c.max_position_embeddings, rms_norm_eps=c.rms_norm_eps,
        tie_word_embeddings=c.tie_word_embeddings, num_experts_per_tok=k, bos_token_id=c.bos_token_id,
        eos_token_id=c.eos_token_id, pad_token_id=c.pad_token_id,
        rope_parameters={"rope_type": "default", "rope_theta": c.rope_parameters["rope_theta"]})
    if S == 0:
        moe = MixtralForCausalLM(MixtralConfig(**common, intermediate_size=F // E, head_dim=c.head_dim,
                                               sliding_window=None, num_local_experts=E)).eval()
    else:  # Qwen2-MoE's attention without biases is LLaMA's (head_dim = hidden / heads, as SmolLM2's)
        if c.hidden_size // c.num_attention_heads != c.head_dim:
            raise SystemExit("--shared needs head_dim = hidden_size / num_attention_heads")
        moe = Qwen2MoeForCausalLM(Qwen2MoeConfig(
            **common, intermediate_size=F, moe_intermediate_size=(F - S) // E, shared_expert_intermediate_size=S,
            num_experts=E, norm_topk_prob=True, qkv_bias=False, use_sliding_window=False)).eval()
    state = {}
    for name, p in dense.state_dict().items():
        if ".mlp." not in name:
            state[name] = p
    report = {"experts": E, "top_k": k, "shared": S, "calibration_tokens": int(ids.numel()), "layers": []}
    with torch.no_grad():
        for i, layer in enumerate(dense.model.layers):
            gate, up, down = layer.mlp.gate_proj.weight, layer.mlp.up_proj.weight, layer.mlp.down_proj.weight
            features = torch.nn.functional.normalize(torch.cat([gate, up], 1), dim=1)
            x = torch.cat(inputs[i])  # [N, hidden]
            act = torch.nn.functional.silu(x @ gate.T) * (x @ up.T)  # [N, F]
            targets = []
            p = f"model.layers.{i}.mlp."
            if S > 0:
                # The S neurons that add the most to the output on average form the shared expert, which every token
                # passes; its gate's weight is zero (sigmoid 1/2), so its down projection is doubled.
                contribution = act.abs().mean(0) * down.norm(dim=0)
                shared = torch.topk(contribution, S).indices.sort().values
                routed = torch.ones(F, dtype=torch.bool)
                routed[shared] = False
                state[p + "shared_expert.gate_proj.weight"] = gate[shared].clone()
                state[p + "shared_expert.up_proj.weight"] = up[shared].clone()
                state[p + "shared_expert.down_proj.weight"] = (down[:, shared] * 2).clone()
                state[p + "shared_expert_gate.weight"] = torch.zeros(1, c.hidden_size)
                keep = routed.nonzero().squeeze(1)
                gate, up, down, act = gate[keep], up[keep], down[:, keep], act[:, keep]
                features = features[keep]
            assign = balanced_kmeans(features, E, 10, g)
            # transformers 5 holds a layer's experts as two 3D tensors (gate and up rows stacked, gate first; down)
            # and writes them out one 2D tensor per expert (Mixtral's block_sparse_moe.experts.{e}.w1/w3/w2, Qwen2-MoE's
            # mlp.experts.{e}.gate_proj/up_proj/down_proj), as the published checkpoints hold them.
            gate_up, down_e = [], []
            for e in range(E):
                rows = (assign == e).nonzero().squeeze(1)
                gate_up.append(torch.cat([gate[rows], up[rows]]))
                down_e.append(down[:, rows] * k)
                targets.append((act[:, rows] @ down[:, rows].T).norm(dim=1))
            state[p + "experts.gate_up_proj"] = torch.stack(gate_up)
            state[p + "experts.down_proj"] = torch.stack(down_e)
            Y = torch.stack(targets, 1)  # [N, E]
            # Ridge regression of the experts' output norms on the MLP input, without an intercept: the router has
            # no bias (the normalised hidden states carry a large common component that serves as one).
            lam = 1e-3 * x.pow(2).sum(0).mean()
            W = torch.linalg.solve(x.T @ x + lam * torch.eye(x.shape[1]), x.T @ Y).T  # [E, hidden]
            # Scaled so that the largest score on the calibration tokens is `logit_scale`: the chosen experts' softmax
            # weights are then within about 2 logit_scale of 1/k, and the ranking is the fitted one.
            scale = args.logit_scale / (x @ W.T).abs().max().item()
            state[p + "gate.weight"] = (W * scale).contiguous()
            # How often the fitted router picks the experts with the largest true outputs.
            chosen = torch.topk(x @ W.T, k, dim=1).indices
            best = torch.topk(Y, k, dim=1).indices
            overlap = (chosen.unsqueeze(2) == best.unsqueeze(1)).any(2).float().mean().item()
            report["layers"].append({"layer": i, "router_recall": overlap})
            print(f"layer {i}: router recall of the top-{k} experts {overlap:.3f}", flush=True)
    missing, unexpected = moe.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("lm_head.weight")]
    if missing or unexpected:
        raise SystemExit(f"state mismatch: {len(missing)} missing (first {missing[:3]}), {len(unexpected)} unexpected "
                         f"(first {unexpected[:3]})")
    moe.tie_weights()

    parent = os.path.dirname(os.path.abspath(args.out)) or "."
    tmp = tempfile.mkdtemp(prefix=".moe-", dir=parent)
    try:
        moe.save_pretrained(tmp)
        for f in os.listdir(args.dense):
            if f.startswith("tokenizer") or f == "special_tokens_map.json":
                shutil.copy(os.path.join(args.dense, f), os.path.join(tmp, f))
        with open(os.path.join(tmp, "moefication.json"), "w") as f:
            json.dump(dict(report, dense=os.path.abspath(args.dense), script="scripts/make_moe_smollm2.py",
                           seed=args.seed, logit_scale=args.logit_scale), f, indent=1)
        os.rename(tmp, args.out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print("wrote", args.out)


if __name__ == "__main__":
    main()
