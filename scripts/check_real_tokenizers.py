#!/usr/bin/env python3
"""Checks alps's tokenizer.json support on real vocabularies that PyPI packages ship, against `tokenizers`.

Nothing here is committed as a golden: the files are megabytes. Run from the repository root after building alps:

    python3 scripts/check_real_tokenizers.py [--alps build/apps/alps/alps] [--data-dir ../shared/data]

Needs transformers 4.57 (5.x's SentencePiece converter fails on these files), tokenizers, sentencepiece, tiktoken,
protobuf and numpy, and pip to download two wheels (no dependencies): `llama-models` 0.3.0 ships LLaMA-3's tiktoken
vocabulary (128,000 ranks), `mistral-common` 1.13.1 ships Mistral-7B's SentencePiece model (tokenizer.model.v1);
the data directory has Llama-2's tokenizer.model. transformers' converters turn them into the tokenizer.json files
the Hugging Face hub publishes for these models (LLaMA-3: Split + ByteLevel, ignore_merges, 256 special tokens;
LLaMA-2 and Mistral: the legacy Prepend/Replace normalizer and the newer Metaspace pre-tokenizer). Each goes into a
temporary model directory with a tiny random LLaMA checkpoint of its vocabulary size and a context of 8 positions,
so that `alps generate --max-tokens 0 --json --prompt TEXT` only tokenizes; WikiText-2 test is fed in chunks of whole
rows under 100 kB (a command-line argument's limit) and alps's ids are compared with `tokenizers`' for every chunk. The two
SentencePiece files also go through alps's tokenizer.model path, legacy and not, against transformers' slow
LlamaTokenizer on WikiText-2 and on PTB (whose literal <unk> must become the unknown token's id).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
import zipfile

import numpy as np
from tokenizers import AddedToken, Tokenizer, processors
from transformers import LlamaTokenizer, LlamaTokenizerFast
from transformers.convert_slow_tokenizer import TikTokenConverter

WHEELS = {"llama-models==0.3.0": ("llama_models-0.3.0-py3-none-any.whl", "llama_models/llama3/tokenizer.model"),
          "mistral-common==1.13.1": ("mistral_common-1.13.1-py3-none-any.whl", "mistral_common/data/tokenizer.model.v1")}
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def llama3(vocab_file, out):
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
    specials += [f"<|reserved_special_token_{2 + i}|>" for i in range(256 - len(specials))]
    tok = TikTokenConverter(vocab_file, pattern=LLAMA3_PATTERN, additional_special_tokens=specials).converted()
    if tok.token_to_id(specials[0]) is None:  # transformers versions differ in whether the converter adds them
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    tok.save(os.path.join(out, "tokenizer.json"))
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
              "tokenizer_class": "PreTrainedTokenizerFast"}
    return config


def llama2_family(vocab_file, out, legacy):
    t = LlamaTokenizerFast(vocab_file=vocab_file, legacy=legacy, from_slow=True, add_bos_token=True,
                           add_prefix_space=True)
    t.backend_tokenizer.save(os.path.join(out, "tokenizer.json"))
    return {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "tokenizer_class": "LlamaTokenizerFast",
            "add_bos_token": True}


def tiny_checkpoint(out, vocab):
    """A 1-block LLaMA of hidden size 8 with `vocab` ids: enough for alps to load the directory."""
    hidden, ffn = 8, 8
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
              "intermediate_size": ffn, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
              "max_position_embeddings": 8, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": vocab,
              "tie_word_embeddings": True, "hidden_act": "silu", "torch_dtype": "float32"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f)
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,),
              "model.layers.0.input_layernorm.weight": (hidden,),
              "model.layers.0.post_attention_layernorm.weight": (hidden,),
              "model.layers.0.mlp.gate_proj.weight": (ffn, hidden), "model.layers.0.mlp.up_proj.weight": (ffn, hidden),
              "model.layers.0.mlp.down_proj.weight": (hidden, ffn)}
    for p in ["q_proj", "k_proj", "v_proj", "o_proj"]:
        shapes[f"model.layers.0.self_attn.{p}.weight"] = (hidden, hidden)
    rng = np.random.default_rng(0)
    header, blobs, offset = {}, [], 0
    for name in sorted(shapes):
        raw = rng.standard_normal(shapes[name]).astype(np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(shapes[name]), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def chunks_of(pieces, separator, limit=90000):
    """`pieces` joined by `separator`, cut between pieces into chunks of at most about `limit` bytes."""
    chunks, current = [], []
    for piece in pieces:
        current.append(piece)
        if sum(len(p.encode()) + len(separator) for p in current) > limit:
            chunks.append(separator.join(current))
            current = []
    if current:
        chunks.append(separator.join(current))
    assert separator.join(chunks) == separator.join(pieces)
    return chunks


def wikitext_chunks(data_dir):
    with open(os.path.join(data_dir, "text/wikitext2/wikitext-2-raw-v1.test.rows.jsonl"), encoding="utf-8") as f:
        return chunks_of([json.loads(line) for line in f], "\n\n")


def ptb_chunks(data_dir):
    """PTB test as the evaluation builds it: lines stripped, joined by one space."""
    with open(os.path.join(data_dir, "text/ptb/ptb.test.txt"), encoding="utf-8") as f:
        return chunks_of([line.strip() for line in f.read().splitlines()], " ")


def sentencepiece_model(vocab_file, out, legacy):
    """tokenizer.model read by transformers' slow LlamaTokenizer, which the perplexity protocol's scripts load."""
    shutil.copy(vocab_file, os.path.join(out, "tokenizer.model"))
    return {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "tokenizer_class": "LlamaTokenizer",
            "add_bos_token": True, "legacy": legacy}


def check(alps, model_dir, chunks):
    if os.path.exists(os.path.join(model_dir, "tokenizer.json")):
        tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        vocab, encode = tok.get_vocab_size(), lambda text: tok.encode(text).ids
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            slow = LlamaTokenizer.from_pretrained(model_dir, model_max_length=10**9)
        vocab, encode = len(slow), lambda text: slow(text).input_ids
    tiny_checkpoint(model_dir, vocab)
    total, failed = 0, 0
    for i, chunk in enumerate(chunks):
        expected = encode(chunk)
        run = subprocess.run([alps, "generate", "--model", model_dir, "--prompt", chunk, "--max-tokens", "0", "--json",
                              "--quiet"], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"  alps failed: {run.stderr.strip()}")
            return False
        ids = json.loads(run.stdout)["prompt_ids"]
        total += len(expected)
        if ids != expected:
            k = next((j for j in range(min(len(ids), len(expected))) if ids[j] != expected[j]),
                     min(len(ids), len(expected)))
            print(f"  chunk {i}: first difference at id {k}: alps {ids[k:k + 5]}, tokenizers {expected[k:k + 5]}")
            failed += 1
    print(f"  {len(chunks)} chunks, {total} ids, {failed} chunks differ")
    return failed == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alps", default="build/apps/alps/alps")
    parser.add_argument("--data-dir", default="../shared/data")
    args = parser.parse_args()
    alps = os.path.abspath(args.alps)
    chunks = wikitext_chunks(args.data_dir)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for requirement, (wheel, member) in WHEELS.items():
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", requirement, "-d", tmp],
                           check=True)
            with zipfile.ZipFile(os.path.join(tmp, wheel)) as z:
                files[requirement] = z.extract(member, tmp)
        llama2_model = os.path.join(args.data_dir, "tokenizers/llama2/tokenizer.model")
        cases = [("LLaMA-3 (llama-models)", lambda out: llama3(files["llama-models==0.3.0"], out))]
        for name, vocab_file in [("Llama-2", llama2_model), ("Mistral-7B v1", files["mistral-common==1.13.1"])]:
            for legacy in (True, False):
                label = f"{name} ({'legacy Prepend/Replace' if legacy else 'Metaspace first'})"
                cases.append((label, lambda out, v=vocab_file, l=legacy: llama2_family(v, out, l)))
        for label, make in cases:
            model_dir = tempfile.mkdtemp(dir=tmp)
            with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
                json.dump(make(model_dir), f)
            print(label)
            ok &= check(alps, model_dir, chunks)
        # The same SentencePiece files through alps's tokenizer.model path, against transformers' LlamaTokenizer, on
        # WikiText-2 and on PTB with its literal <unk>.
        both = chunks + ptb_chunks(args.data_dir)
        for name, vocab_file in [("Llama-2", llama2_model), ("Mistral-7B v1", files["mistral-common==1.13.1"])]:
            for legacy in (True, False):
                model_dir = tempfile.mkdtemp(dir=tmp)
                with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
                    json.dump(sentencepiece_model(vocab_file, model_dir, legacy), f)
                print(f"{name} tokenizer.model (LlamaTokenizer, legacy {legacy}), WikiText-2 and PTB")
                ok &= check(alps, model_dir, both)
    print("all id-exact" if ok else "DIFFERENCES FOUND")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
