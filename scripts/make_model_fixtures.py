#!/usr/bin/env python3
"""Writes the tiny random-weight checkpoints and golden logits under tests/data/model/ (run once, output committed).

The golden logits come from Hugging Face transformers itself (the independent reference for the C++ forward):
each fixture is a transformers model with re-drawn weights (scales large enough that every layer matters for the
logits), saved with save_pretrained, reloaded in float32 and run on fixed token ids. Also writes the token ids of
the five stories of text/tinystories/tinystories_sample.txt for stories260K-hf, encoded with the sentencepiece
library exactly as that model's README scores them ([BOS] + encode(story.strip()), no EOS).

Usage (from the repository root): python3 scripts/make_model_fixtures.py [--data-dir ../shared/data]
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, OPTConfig, OPTForCausalLM

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "model")


def redraw(model, seed):
    """transformers initialises with std 0.02, which makes tiny models nearly linear; use O(1) activations."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                std = 1.0 if "embed" in name else 1.0 / p.shape[1] ** 0.5
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:  # norm scales
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
    model.tie_weights()


def write_fixture(name, model, vocab, seq, dtype=torch.float32, max_shard_size=None, seed=0):
    out = os.path.join(OUT, name)
    redraw(model, seed)
    model = model.to(dtype).eval()
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(out, **kwargs)
    # Reload in fp32 (the C++ side computes in fp32 from the stored dtype) and use eager attention, the textbook form.
    ref = type(model).from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
    g = torch.Generator().manual_seed(1000 + seed)
    ids = torch.randint(0, vocab, (2, seq), generator=g)
    with torch.no_grad():
        logits = ref(input_ids=ids).logits.float().contiguous()
    save_file({"input_ids": ids.contiguous(), "logits": logits}, os.path.join(OUT, name + ".golden.safetensors"),
              metadata={"fixture": name})
    print(name, "params", sum(p.numel() for p in ref.parameters()), "files", sorted(os.listdir(out)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                           "shared", "data"))
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)

    opt = dict(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=96,
               max_position_embeddings=64, word_embed_proj_dim=32)
    write_fixture("opt_pre", OPTForCausalLM(OPTConfig(**opt)), 96, 20, seed=1)
    write_fixture("opt_post", OPTForCausalLM(OPTConfig(**opt, do_layer_norm_before=False)), 96, 20, seed=2)
    # project_in/out, saved sharded by transformers (index + two files) so the loader sees HF's own shard layout.
    write_fixture("opt_proj", OPTForCausalLM(OPTConfig(**dict(opt, word_embed_proj_dim=16))), 96, 20,
                  max_shard_size="30KB", seed=3)
    # GQA, untied head, llama3 rope scaling with one frequency in each band (head_dim 8: wavelengths 6.3, 63, 628,
    # 6283 against 16 / 64 for original_max_position_embeddings 64): 40 positions.
    llama = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=96, max_position_embeddings=128, rms_norm_eps=1e-5)
    rope = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    write_fixture("llama_gqa", LlamaForCausalLM(LlamaConfig(**llama, tie_word_embeddings=False,
                                                            rope_parameters=rope)), 96, 40, seed=4)
    # Biases everywhere, tied head, bf16 storage, rope_theta != 10000.
    write_fixture("llama_bias_bf16", LlamaForCausalLM(LlamaConfig(
        **llama, tie_word_embeddings=True, attention_bias=True, mlp_bias=True,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0})), 96, 24, dtype=torch.bfloat16, seed=5)

    import sentencepiece as spm
    model_dir = os.path.join(args.data_dir, "models", "stories260K-hf")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
    with open(os.path.join(args.data_dir, "text", "tinystories", "tinystories_sample.txt"), encoding="utf-8") as f:
        stories = [s.strip() for s in f.read().split("<|endoftext|>")]
    stories = [s for s in stories if s]
    ids = [[sp.bos_id()] + sp.encode(s)[:511] for s in stories]
    with open(os.path.join(OUT, "stories260K_sample_ids.json"), "w") as f:
        json.dump({"source": "text/tinystories/tinystories_sample.txt split on <|endoftext|>, strip, [BOS]+encode",
                   "ids": ids}, f)
    print("stories", len(ids), [len(x) for x in ids])


if __name__ == "__main__":
    main()
