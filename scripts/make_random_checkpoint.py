#!/usr/bin/env python3
"""Writes a randomly initialised checkpoint of a real model's shape, for speed measurements (not committed).

Default: OPT-125M's shape (transformers' OPTConfig defaults = facebook/opt-125m: hidden 768, 12 layers, 12 heads,
ffn 3072, vocab 50272, 2048 positions), fp32, with GPT-2's vocab.json/merges.txt from the data directory as its
tokenizer files (OPT uses the same BPE merges). `--family llama` writes a LLaMA-shaped one (sizes by flag) instead;
`--family qwen3_moe` a Qwen3-MoE one, by default Qwen3-30B-A3B's block (hidden 2048, 32 query and 4 key/value heads
of 128, 128 experts of 768 neurons, 8 per token, every layer a mixture), its router's random rows spreading the
tokens over the experts about evenly.

Usage: python3 scripts/make_random_checkpoint.py OUT_DIR [--family opt|llama|qwen3_moe] [--data-dir ../shared/data]
       [--dtype float32|float16|bfloat16] [--hidden N --layers N --heads N --kv-heads N --ffn N --vocab N]
       [--head-dim N --experts N --experts-per-token N] [--device cpu|cuda]

--device cuda draws the weights on a GPU (the same distributions, other values than the CPU's for one seed): a
32-block LLaMA-7B shape takes seconds there instead of minutes on the host.
"""
import argparse
import contextlib
import os
import shutil

import torch
from transformers import LlamaConfig, LlamaForCausalLM, OPTConfig, OPTForCausalLM


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--family", choices=["opt", "llama", "qwen3_moe"], default="opt")
    ap.add_argument("--data-dir", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--ffn", type=int, help="MLP neurons (qwen3_moe: each expert's)")
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--experts", type=int)
    ap.add_argument("--experts-per-token", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    # A default device for the weights as they are made (torch >= 2.0); the host needs none.
    where = torch.device(args.device) if args.device != "cpu" else contextlib.nullcontext()

    if args.family == "opt":
        cfg = OPTConfig()  # facebook/opt-125m
        for k, v in (("hidden_size", args.hidden), ("num_hidden_layers", args.layers),
                     ("num_attention_heads", args.heads), ("ffn_dim", args.ffn), ("vocab_size", args.vocab)):
            if v:
                setattr(cfg, k, v)
        cfg.word_embed_proj_dim = cfg.hidden_size
        with where:
            model = OPTForCausalLM(cfg)
    elif args.family == "qwen3_moe":
        # Imported here: a transformers without Qwen3-MoE (before 4.51) still makes the other families.
        from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
        cfg = Qwen3MoeConfig(hidden_size=args.hidden or 2048, num_hidden_layers=args.layers or 48,
                             num_attention_heads=args.heads or 32, num_key_value_heads=args.kv_heads or 4,
                             head_dim=args.head_dim or 128, moe_intermediate_size=args.ffn or 768,
                             intermediate_size=6144, num_experts=args.experts or 128,
                             num_experts_per_tok=args.experts_per_token or 8, norm_topk_prob=True,
                             decoder_sparse_step=1, mlp_only_layers=[], vocab_size=args.vocab or 151936,
                             max_position_embeddings=4096, tie_word_embeddings=False)
        with where:
            model = Qwen3MoeForCausalLM(cfg)
    else:
        cfg = LlamaConfig(hidden_size=args.hidden or 2048, num_hidden_layers=args.layers or 16,
                          num_attention_heads=args.heads or 32, num_key_value_heads=args.kv_heads or 8,
                          intermediate_size=args.ffn or 8192, vocab_size=args.vocab or 50272,
                          max_position_embeddings=4096)
        with where:
            model = LlamaForCausalLM(cfg)
    model = model.to(getattr(torch, args.dtype)).cpu().eval()
    model.save_pretrained(args.out)
    tok = os.path.join(args.data_dir, "tokenizers", "gpt2")
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(os.path.join(tok, name), os.path.join(args.out, name))
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {type(model).__name__}, {n} parameters, {args.dtype}")


if __name__ == "__main__":
    main()
