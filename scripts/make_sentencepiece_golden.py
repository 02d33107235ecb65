#!/usr/bin/env python3
"""Golden ids for alps's SentencePiece tokenizer (tests/tokenizer/sentencepiece_test.cc, tests/eval/datasets_test.cc),
from transformers' LlamaTokenizer: the slow class that the published perplexity protocol's scripts load for LLaMA
models (lm-eval's fast class gives the same ids in legacy mode).

Run from the repository root, in a virtual environment with transformers 4.x, sentencepiece and protobuf (the one
scripts/make_zeroshot_golden.py describes will do):
    python3 scripts/make_sentencepiece_golden.py [--data-dir ../shared/data] [--out tests/data/tokenizer]

Each variant is a tokenizer.model plus the tokenizer_config.json the test writes beside it (null: none, LlamaTokenizer's
defaults). Texts: WikiText-2 test, PTB test as the evaluation builds it (lines stripped, joined by one space; it holds
literal "<unk>"), TinyStories valid (count, FNV-1a-64 and first ids, and the hash of the decoded text), the
TinyStories sample and 40 WikiText-2 rows in full, edge cases in full with their decoded text, and 1000 random texts
(sp_random_texts.json) hashed per 100 (ids and decoded text). Ids are without BOS/EOS; decoding skips special
tokens.
"""
import argparse
import json
import os
import shutil
import tempfile
import warnings

import sentencepiece
import transformers
from transformers import LlamaTokenizer

from make_tokenizer_golden import CASES, fnv1a64, fnv1a64_text, pick_rows, read, summary, wikitext_rows, write

# Where transformers' rules differ from plain SentencePiece: special-token text, spaces around it, the meta space,
# leading spaces (which legacy: false treats differently), added tokens' flags.
SPECIAL_CASES = [
    "<unk>", "a <unk> b", "a<unk>b", "a  <unk>  b", " <unk> x", "<s>hello", "x </s>", "<s></s><unk>",
    "the <unk> company 's N shares", " leading", "  two", "\u2581hi \u2581 there", "\u2581", " \u2581", "x\n<unk>\n y",
    "<unk", "<un<unk>k>", "<pad> [SEP]  x  [SEP] y", "a[SEP]b <mask> c<mask> <mask>d", "\u3000[SEP]\u3000z",
    "<pad>", " <pad>", "end <mask>",
]

STORIES = "models/stories260K-hf/tokenizer.model"
LLAMA2 = "tokenizers/llama2/tokenizer.model"

# Added tokens that exercise the slow tokenizer's split rules: one beyond the model's pieces, lstrip and rstrip,
# single_word; additional_special_tokens marks one as special.
ADDED = {
    "512": {"content": "<pad>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
            "special": True},
    "513": {"content": "[SEP]", "lstrip": True, "normalized": False, "rstrip": True, "single_word": False,
            "special": False},
    "514": {"content": "<mask>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": True,
            "special": False},
}

VARIANTS = [
    ("sp_stories260k", STORIES, "models/stories260K-hf/tokenizer_config.json"),
    ("sp_stories260k_legacy", STORIES, {"legacy": True}),
    ("sp_stories260k_no_prefix_space", STORIES, {"legacy": False, "add_prefix_space": False}),
    ("sp_stories260k_added", STORIES, {"legacy": False, "pad_token": "<pad>", "added_tokens_decoder": ADDED}),
    ("sp_stories260k_added_legacy", STORIES, {"legacy": True, "pad_token": "<pad>", "added_tokens_decoder": ADDED,
                                              "additional_special_tokens": ["<mask>"]}),
    ("sp_llama2", LLAMA2, None),
    ("sp_llama2_nonlegacy", LLAMA2, {"legacy": False}),
]


# Random texts built from pieces that meet at every kind of boundary: special and added tokens (whole and broken),
# spaces of several kinds, the meta space, letters, digits, punctuation. A 64-bit LCG makes them reproducible.
RANDOM_POOL = ["<unk>", "<s>", "</s>", "<pad>", "[SEP]", "<mask>", " ", "  ", "\u2581", "\n", "\t", "\u3000",
               "\u00a0", "a", "b", "the", "\u00e9", "\u65e5", "1", ".", "<", ">", "unk", "s", "x", "_"]


def random_texts(count=1000, max_pieces=16):
    state = 0x2545F4914F6CDD1D

    def step():
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return state >> 33

    texts = []
    for _ in range(count):
        texts.append("".join(RANDOM_POOL[step() % len(RANDOM_POOL)] for _ in range(1 + step() % max_pieces)))
    return texts


def chunk_hashes(id_lists, chunk=100):
    """FNV-1a 64 of each chunk's ids, every list followed by -1."""
    return [fnv1a64([i for ids in id_lists[first:first + chunk] for i in ids + [-1]])
            for first in range(0, len(id_lists), chunk)]


def ptb_test(data_dir):
    return " ".join(line.strip() for line in read(os.path.join(data_dir, "text/ptb/ptb.test.txt")).splitlines())


def variant(data_dir, out_dir, name, model, config, provenance):
    if isinstance(config, str):
        with open(os.path.join(data_dir, config), encoding="utf-8") as f:
            config = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(os.path.join(data_dir, model), os.path.join(tmp, "tokenizer.model"))
        if config is not None:
            with open(os.path.join(tmp, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(config, f)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tok = LlamaTokenizer.from_pretrained(tmp, model_max_length=10**9)

    def ids(text):
        return tok(text, add_special_tokens=False).input_ids

    def decode(token_ids):
        return tok.decode(token_ids, skip_special_tokens=True)

    wiki = read(os.path.join(data_dir, "text/wikitext2/wikitext-2-raw-v1.test.hf_joined.txt"))
    stories = read(os.path.join(data_dir, "text/tinystories/tinystories.valid.txt"))
    sample = read(os.path.join(data_dir, "text/tinystories/tinystories_sample.txt"))
    rows = wikitext_rows(data_dir)
    story_ids = ids(stories)
    doc = {
        "provenance": provenance,
        "model": model,
        "tokenizer_config": config,
        "legacy": tok.legacy,
        "bos_id": tok.bos_token_id, "eos_id": tok.eos_token_id, "vocab_size": len(tok),
        "with_special": {"text": "Once upon a time", "ids": tok("Once upon a time").input_ids},
        "wikitext2_test": summary(ids(wiki)),
        "ptb_test": summary(ids(ptb_test(data_dir))),
        "tinystories_valid": summary(story_ids),
        "tinystories_valid_decoded_fnv1a64": fnv1a64_text([decode(story_ids)]),
        "tinystories_sample": {"ids": ids(sample)},
        "rows": [{"row": i, "ids": ids(rows[i])} for i in pick_rows(rows, 20, 20)],
        "cases": [{"text": t, "ids": ids(t), "decoded": decode(ids(t))} for t in CASES + SPECIAL_CASES],
        "random": {"texts": "sp_random_texts.json", "chunk": 100,
                   "ids_fnv1a64": chunk_hashes([ids(t) for t in random_texts()]),
                   "decoded_fnv1a64": [fnv1a64_text([decode(ids(t)) for t in random_texts()[first:first + 100]])
                                       for first in range(0, len(random_texts()), 100)]},
    }
    write(out_dir, f"{name}_golden.json", doc)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--out", default="tests/data/tokenizer")
    args = parser.parse_args()
    provenance = (f"scripts/make_sentencepiece_golden.py (transformers {transformers.__version__} LlamaTokenizer, "
                  f"sentencepiece {sentencepiece.__version__})")
    write(args.out, "sp_random_texts.json", {"provenance": provenance, "pool": RANDOM_POOL, "texts": random_texts()})
    for name, model, config in VARIANTS:
        variant(args.data_dir, args.out, name, model, config, provenance)


if __name__ == "__main__":
    main()
