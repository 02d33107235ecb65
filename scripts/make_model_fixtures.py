#!/usr/bin/env python3
"""Writes the tiny random-weight checkpoints and golden logits under tests/data/model/ (run once, output committed).

The golden logits come from Hugging Face transformers itself (the independent reference for the C++ forward):
each fixture is a transformers model with re-drawn weights (scales large enough that every layer matters for the
logits), saved with save_pretrained, reloaded in float32 and run on fixed token ids. Also writes the token ids of
the five stories of text/tinystories/tinystories_sample.txt for stories260K-hf, encoded with the sentencepiece
library exactly as that model's README scores them ([BOS] + encode(story.strip()), no EOS).

Fixtures with a length-dependent forward (sliding windows, dynamic RoPE scaling) also get `short.input_ids` /
`short.logits`, a sequence on the other side of the length that matters. Every forward runs on a freshly loaded
model: transformers' dynamic RoPE keeps the table of the longest forward so far.

Made with (pinned; other versions may round differently or name config fields differently):
    python3 -m venv /tmp/venv-arch && /tmp/venv-arch/bin/pip install torch==2.15.0 transformers==5.23.0 \
        safetensors sentencepiece
Usage (from the repository root): python3 scripts/make_model_fixtures.py [--data-dir ../shared/data] [--only NAME ...]
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file
import transformers
from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3Config, Gemma3ForCausalLM,
                          Gemma3ForConditionalGeneration, Gemma3TextConfig, LlamaConfig,
                          LlamaForCausalLM, MistralConfig, MistralForCausalLM, MixtralConfig, MixtralForCausalLM,
                          Olmo2Config, Olmo2ForCausalLM, OlmoeConfig, OlmoeForCausalLM, OPTConfig, OPTForCausalLM,
                          Phi3Config, Phi3ForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen2MoeConfig,
                          Qwen2MoeForCausalLM, Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM,
                          SiglipVisionConfig)

PINNED = {"torch": "2.15.0", "transformers": "5.23.0"}

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "model")
ONLY = set()


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


def write_fixture(name, model, vocab, seq, dtype=torch.float32, max_shard_size=None, seed=0, short_seq=None,
                  edit=None):
    if ONLY and name not in ONLY:
        return
    out = os.path.join(OUT, name)
    redraw(model, seed)
    if edit is not None:
        with torch.no_grad():
            edit(model)
    model = model.to(dtype).eval()
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(out, **kwargs)
    g = torch.Generator().manual_seed(1000 + seed)
    tensors = {}
    for prefix, length in [("", seq)] + ([("short.", short_seq)] if short_seq else []):
        # Reload in fp32 (the C++ side computes in fp32 from the stored dtype) and use eager attention, the
        # textbook form; a fresh model per forward.
        ref = type(model).from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
        ids = torch.randint(0, vocab, (2, length), generator=g)
        with torch.no_grad():
            tensors[prefix + "logits"] = ref(input_ids=ids).logits.float().contiguous()
        tensors[prefix + "input_ids"] = ids.contiguous()
    save_file(tensors, os.path.join(OUT, name + ".golden.safetensors"), metadata={"fixture": name})
    print(name, "params", sum(p.numel() for p in ref.parameters()), "files", sorted(os.listdir(out)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                           "shared", "data"))
    ap.add_argument("--only", nargs="*", default=[], help="write only these fixtures")
    args = ap.parse_args()
    ONLY.update(args.only)
    for module, version in PINNED.items():
        found = __import__(module).__version__.split("+")[0]
        if found != version:
            raise SystemExit(f"{module} {found} found, the fixtures are made with {version}")
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

    # Mistral: sliding window 8 over 24 positions (the short sequence, 8 tokens, fits in one window), explicit
    # head_dim (heads * head_dim = 64 != hidden 32), GQA, untied head. Vocabulary 512 so that stories260K's
    # tokenizer can drive a pruning run on it.
    small = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2)
    write_fixture("mistral_swa", MistralForCausalLM(MistralConfig(**small, vocab_size=512, head_dim=16,
                                                                  sliding_window=8, tie_word_embeddings=False)),
                  512, 24, seed=6, short_seq=8)
    # Qwen2: q/k/v biases (none on o_proj or the MLP), tied head, linear rope scaling, rope_theta 1e6.
    write_fixture("qwen2_linear", Qwen2ForCausalLM(Qwen2Config(
        **small, vocab_size=512, tie_word_embeddings=True,
        rope_parameters={"rope_type": "linear", "rope_theta": 1000000.0, "factor": 4.0})), 512, 24, seed=7)
    # Qwen2 with sliding windows on the layers from max_window_layers = 1 on: layer 0 full, layer 1 a window of 6.
    write_fixture("qwen2_swa", Qwen2ForCausalLM(Qwen2Config(
        **small, vocab_size=96, tie_word_embeddings=False, use_sliding_window=True, sliding_window=6,
        max_window_layers=1)), 96, 20, seed=8, short_seq=6)
    # LLaMA with dynamic NTK scaling: max_position_embeddings 16, so the 40-token sequence rescales the base and the
    # 12-token one does not.
    write_fixture("llama_dynamic", LlamaForCausalLM(LlamaConfig(
        **dict(llama, max_position_embeddings=16), tie_word_embeddings=False,
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0})), 96, 40, seed=9,
                  short_seq=12)

    # Qwen3: per-head q/k norms, explicit head_dim (heads * head_dim = 64 != hidden 32), biases on all four attention
    # projections, GQA, layer 1 sliding with a window of 6 (the short sequence, 6 tokens, fits in it).
    write_fixture("qwen3_qknorm", Qwen3ForCausalLM(Qwen3Config(
        **small, vocab_size=512, head_dim=16, attention_bias=True, tie_word_embeddings=False,
        use_sliding_window=True, sliding_window=6, max_window_layers=1,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})), 512, 20, seed=10, short_seq=6)
    # OLMo 2: norms on the sublayers' outputs, q/k norms over the whole projections (GQA: k_norm is 32 wide, q_norm
    # 64), llama3 RoPE scaling, untied head.
    write_fixture("olmo2_post", Olmo2ForCausalLM(Olmo2Config(
        **small, vocab_size=512, head_dim=16, tie_word_embeddings=False, rope_parameters=rope)), 512, 40, seed=11)
    # Gemma 2: sandwich norms scaling by (1 + w), sqrt(hidden) embedding scale, GeGLU, query_pre_attn_scalar 24 (not
    # head_dim 16), soft-capping low enough to bind (attention 2, logits 5), layer 0 sliding (window 6), layer 1 full,
    # tied head. The short sequence fits in the window.
    gemma = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, max_position_embeddings=128, rms_norm_eps=1e-6,
                 bos_token_id=1, eos_token_id=2, pad_token_id=0, vocab_size=512)
    write_fixture("gemma2_softcap", Gemma2ForCausalLM(Gemma2Config(
        **gemma, query_pre_attn_scalar=24, attn_logit_softcapping=2.0, final_logit_softcapping=5.0,
        sliding_window=6)), 512, 20, seed=12, short_seq=6)
    # Gemma 3: per-head q/k norms, three layers sliding, full, sliding (sliding_window_pattern 2) with a window of 6;
    # the sliding layers rotate with base 100, the full one with base 1e6 and linear scaling (factor 8); bf16
    # storage as Gemma ships; no soft-capping.
    write_fixture("gemma3_local_global", Gemma3ForCausalLM(Gemma3TextConfig(
        **dict(gemma, num_hidden_layers=3), query_pre_attn_scalar=16, sliding_window=6, sliding_window_pattern=2,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}})),
                  512, 20, dtype=torch.bfloat16, seed=13, short_seq=6)

    # Gemma 3 multimodal (Gemma3ForConditionalGeneration, as the 4B and larger models ship): the text model of
    # gemma3_local_global's shape under language_model., beside a one-layer SigLIP vision tower and the projector, which
    # a text forward never reads. Logits of token ids alone.
    vision = SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14)
    text = Gemma3TextConfig(**dict(gemma, num_hidden_layers=3), query_pre_attn_scalar=16, sliding_window=6,
                            sliding_window_pattern=2)
    write_fixture("gemma3_multimodal", Gemma3ForConditionalGeneration(Gemma3Config(
        text_config=text, vision_config=vision, mm_tokens_per_image=4, image_token_index=509, boi_token_index=510,
        eoi_token_index=511)), 500, 20, seed=15, short_seq=6)
    # Phi-3: fused qkv_proj and gate_up_proj, GQA (2 heads, 1 KV head, head_dim 16), RoPE on half of each head
    # (partial_rotary_factor 0.5: 4 frequencies), longrope with original_max_position_embeddings 16 of 64: the
    # 24-token sequence takes the long factors, the 12-token one the short ones, both the attention factor
    # sqrt(1 + ln 4 / ln 16).
    write_fixture("phi3_longrope", Phi3ForCausalLM(Phi3Config(
        hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        max_position_embeddings=64, original_max_position_embeddings=16, rms_norm_eps=1e-5, vocab_size=512,
        bos_token_id=1, eos_token_id=2, pad_token_id=0,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                         "short_factor": [1.0, 1.3, 2.1, 3.7], "long_factor": [1.1, 2.5, 5.0, 9.0]})),
                  512, 24, seed=14, short_seq=12)
    # Phi-3 with its sliding window (Phi-3-mini-4k's config holds 2047): 6 keys per query, so the 20-token sequence
    # sees it bind and the 6-token one does not; default RoPE on the whole head.
    write_fixture("phi3_swa", Phi3ForCausalLM(Phi3Config(
        hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        max_position_embeddings=64, rms_norm_eps=1e-5, vocab_size=512, bos_token_id=1, eos_token_id=2,
        pad_token_id=0, sliding_window=6)), 512, 20, seed=21, short_seq=6)

    # Mixtures of experts (the experts are saved one 2D tensor each, as the published checkpoints hold them).
    # Qwen3-MoE: 6 experts, 2 per token renormalised, layer 1 a dense MLP (mlp_only_layers), QK-norm per head,
    # head_dim 16. Layer 0's router has two equal rows (experts 2 and 3), so that those two always tie: where they
    # tie for the last place, the forward must pick the one torch.topk picks.
    def tie_router(model):
        gate = model.model.layers[0].mlp.gate.weight
        gate[3].copy_(gate[2])
    write_fixture("qwen3_moe_routed", Qwen3MoeForCausalLM(Qwen3MoeConfig(
        **dict(small, num_hidden_layers=3), vocab_size=512, head_dim=16, tie_word_embeddings=False,
        num_experts=6, num_experts_per_tok=2, moe_intermediate_size=24, norm_topk_prob=True, mlp_only_layers=[1])),
                  512, 20, seed=16, edit=tie_router)
    # Qwen2-MoE: 4 experts, 2 per token without renormalising, a shared expert of 40 behind its sigmoid gate, q/k/v
    # biases; decoder_sparse_step 2: layer 0 dense, layer 1 the mixture.
    write_fixture("qwen2_moe_shared", Qwen2MoeForCausalLM(Qwen2MoeConfig(
        **small, vocab_size=512, tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=24, shared_expert_intermediate_size=40, decoder_sparse_step=2)), 512, 20, seed=17)
    # Mixtral: 4 experts w1/w3/w2 of intermediate_size, 2 per token, sliding window 8 (the short sequence fits in
    # it), bf16 storage.
    write_fixture("mixtral_top2", MixtralForCausalLM(MixtralConfig(
        **small, vocab_size=512, num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
        tie_word_embeddings=False)), 512, 20, dtype=torch.bfloat16, seed=18, short_seq=8)
    # OLMoE: 8 experts, 3 per token without renormalising, q/k norms over the whole projections, clip_qkv 0.5 (low
    # enough to bind on these activations).
    write_fixture("olmoe_clip", OlmoeForCausalLM(OlmoeConfig(
        **small, vocab_size=512, num_experts=8, num_experts_per_tok=3, clip_qkv=0.5, pad_token_id=0,
        tie_word_embeddings=False)), 512, 20, seed=19)

    if ONLY:
        return
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
