#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/ (standard library only).

Seeds are small valid inputs taken from tests/data, configs/ and the small files of ../shared/data, plus a few
hand-made variants that reach branches the real files do not (sharded index metadata, misaligned tensors, F64 gram,
a Split pre-tokenizer with a literal pattern). Multi-file targets join their files with NUL bytes, as
fuzz_targets.cc splits them. Run from anywhere; re-running rewrites the same files.
"""
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def put(target, name, content):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())


def safetensors(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, raw bytes)] -> file bytes, offsets in the given order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def byte_level_map():
    """GPT-2's byte -> printable character map (src/tokenizer/byte_map.cc)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 256
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(n)
            n += 1
    return out


def small_bpe():
    """A byte-level vocabulary (every byte) with the first merges of GPT-2 whose parts are already known."""
    vocab = {c: i for i, c in enumerate(byte_level_map().values())}
    merges = []
    for line in (DATA / "tokenizers" / "gpt2" / "merges.txt").read_text(encoding="utf-8").splitlines()[1:]:
        a, b = line.split(" ")
        if a in vocab and b in vocab and a + b not in vocab:
            vocab[a + b] = len(vocab)
            merges.append([a, b])
        if len(merges) == 60:
            break
    return vocab, merges


def main():
    # safetensors: the small golden files of the model tests and hand-made edge cases.
    for f in sorted((ROOT / "tests" / "data" / "model").glob("opt_pre.golden.safetensors")):
        put("safetensors", f.name, f.read_bytes())
    put("safetensors", "f32_meta.safetensors",
        safetensors([("a", "F32", [2, 2], f32(1, 2, 3, 4)), ("b", "I64", [1], struct.pack("<q", 7))],
                    metadata={"format": "pt"}))
    put("safetensors", "all_dtypes.safetensors",
        safetensors([("f64", "F64", [1], struct.pack("<d", 1.5)), ("f16", "F16", [2], b"\x00\x3c\x00\x40"),
                     ("bf16", "BF16", [2], b"\x80\x3f\x00\x40"), ("i32", "I32", [1], b"\x01\0\0\0"),
                     ("i16", "I16", [1], b"\x01\0"), ("i8", "I8", [1], b"\xff"), ("u8", "U8", [1], b"\x01"),
                     ("bool", "BOOL", [2], b"\x01\x00")]))
    put("safetensors", "misaligned.safetensors",
        safetensors([("b", "U8", [1], b"\x01"), ("f", "F32", [1], f32(2.0))], pad=False))
    put("safetensors", "empty_tensor.safetensors", safetensors([("z", "F32", [0, 3], b"")]))
    put("safetensors", "no_tensors.safetensors", safetensors([], metadata={}))

    # config.json: the fixtures of the model tests and the one real small checkpoint.
    for d in sorted((ROOT / "tests" / "data" / "model").iterdir()):
        if (d / "config.json").exists():
            put("config", d.name + ".json", (d / "config.json").read_bytes())
    put("config", "stories260K.json", (DATA / "models" / "stories260K-hf" / "config.json").read_bytes())
    put("config", "llama3_rope.json", json.dumps({
        "model_type": "llama", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 2, "vocab_size": 16, "head_dim": 4, "eos_token_id": [2, 3],
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192}}, indent=1))

    # Shard index of the fixed two-shard checkpoint in fuzz_targets.cc (tensors dealt alternately to the shards).
    names = ["model.embed_tokens.weight", "model.norm.weight", "model.layers.0.input_layernorm.weight",
             "model.layers.0.post_attention_layernorm.weight", "model.layers.0.self_attn.q_proj.weight",
             "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
             "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_proj.weight",
             "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight"]
    weight_map = {n: "model-0000%d-of-00002.safetensors" % (i % 2 + 1) for i, n in enumerate(names)}
    put("shard_index", "valid.json", json.dumps({"metadata": {"total_size": 448}, "weight_map": weight_map},
                                                indent=2))
    put("shard_index", "one_shard_listed.json",
        json.dumps({"weight_map": {n: f for n, f in weight_map.items() if f.startswith("model-00001")}}))

    # tokenizer.json: a cut-down LLaMA-3 style file (Split + ByteLevel, template post-processor, added tokens).
    vocab, merges = small_bpe()
    big = json.loads((ROOT / "tests" / "data" / "tokenizer" / "llama3_style" / "tokenizer.json").read_text())
    n = len(vocab)
    big["added_tokens"] = [dict(a, id=n + i) for i, a in enumerate(big["added_tokens"])]
    big["post_processor"]["processors"][1]["special_tokens"]["<|begin_of_text|>"]["ids"] = [n]
    big["model"]["vocab"], big["model"]["merges"] = vocab, merges
    put("tokenizer_json", "llama3_style_small.json", json.dumps(big, ensure_ascii=False))
    gpt2 = {"version": "1.0", "added_tokens": [{"id": n, "content": "<|endoftext|>", "special": True}],
            "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True},
            "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]},
            "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": vocab, "merges": [" ".join(m) for m in merges], "unk_token": "!"}}
    put("tokenizer_json", "gpt2_style_small.json", json.dumps(gpt2, ensure_ascii=False))
    split = dict(gpt2, pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": " \\E"}, "behavior": "MergedWithNext", "invert": True},
        {"type": "ByteLevel", "use_regex": False}]}, post_processor=None)
    put("tokenizer_json", "split_literal_small.json", json.dumps(split, ensure_ascii=False))

    # vocab.json NUL merges.txt
    merges_txt = "#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n"
    put("vocab_merges", "gpt2_small", json.dumps(vocab, ensure_ascii=False).encode() + b"\0" + merges_txt.encode())
    put("vocab_merges", "gpt2_small_crlf",
        json.dumps(vocab, ensure_ascii=False).encode() + b"\0" + merges_txt.replace("\n", "\r\n").encode())

    # tokenizer.model: the 512-piece model of stories260K (8 KB).
    put("tokenizer_model", "stories260K.model", (DATA / "models" / "stories260K-hf" / "tokenizer.model").read_bytes())

    # tokenizer_config.json NUL special_tokens_map.json NUL config.json, around the fixed vocabulary of the target.
    hf = DATA / "models" / "stories260K-hf"
    put("tokenizer_config", "stories260K",
        b"\0".join((hf / f).read_bytes() for f in ("tokenizer_config.json", "special_tokens_map.json", "config.json")))
    put("tokenizer_config", "llama3_style",
        (ROOT / "tests" / "data" / "tokenizer" / "llama3_style" / "tokenizer_config.json").read_bytes())
    put("tokenizer_config", "gpt2_added", json.dumps({
        "tokenizer_class": "GPT2Tokenizer", "add_bos_token": True, "add_eos_token": True, "add_prefix_space": True,
        "bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>",
        "added_tokens_decoder": {"256": {"content": "<|endoftext|>", "special": True, "lstrip": True,
                                         "rstrip": True, "single_word": True}}}).encode()
        + b"\0" + json.dumps({"unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}).encode()
        + b"\0" + json.dumps({"bos_token_id": 260, "eos_token_id": [261, 256]}).encode())

    # Layer problems: weight [2, 3], gram [3, 3], optional mean [3], metadata tokens (and name).
    w, g, m = f32(1, -2, 0.5, 3, 0, -1), f32(2, 0.5, 0, 0.5, 1, 0, 0, 0, 3), f32(0.1, 0, -0.2)
    put("problem", "f32_mean.safetensors",
        safetensors([("weight", "F32", [2, 3], w), ("gram", "F32", [3, 3], g), ("mean", "F32", [3], m)],
                    metadata={"tokens": "128", "name": "model.layers.0.mlp.up_proj"}))
    put("problem", "f64_gram.safetensors",
        safetensors([("gram", "F64", [3, 3], struct.pack("<9d", 2, 0.5, 0, 0.5, 1, 0, 0, 0, 3)),
                     ("weight", "BF16", [2, 3], b"\x80\x3f\x00\xc0\x00\x3f\x40\x40\x00\x00\x80\xbf")],
                    metadata={"tokens": "0"}))

    # Recipes: the shipped configs and one with every nested form.
    for f in sorted((ROOT / "configs").glob("*.json")):
        put("recipe", f.name, f.read_bytes())
    put("recipe", "overrides.json", json.dumps({
        "method": "sparsegpt", "pattern": "2:4", "refine": "pcg", "refine_iterations": 5, "options": {"lambda": 0.01},
        "calibration": {"source": "wikitext2", "nsamples": 4, "seqlen": 64, "seed": 3},
        "skip": ["*.lm_head"], "overrides": [{"match": "model.layers.[0-3].*", "sparsity": 0.5, "method": "wanda",
                                              "options": {}}, {"match": "*q_proj", "skip": True}],
        "device": "cpu", "dtype": "bf16", "batch_size": 2, "stats_dtype": "fp64", "eval": ["wikitext2"],
        "eval_seqlen": 128}, indent=1) + "\n// comments are allowed in recipes\n")


if __name__ == "__main__":
    main()
