#!/usr/bin/env python3
"""Golden ids for the tokenizer test suite (tests/tokenizer), from the reference libraries.

Run from the repository root:
    python3 scripts/make_tokenizer_golden.py [--data-dir ../shared/data] [--out tests/data/tokenizer]

References: Hugging Face `tokenizers` (byte-level BPE: GPT-2 tables, and a LLaMA-3-style tokenizer.json trained
here) and Python `sentencepiece` (stories260K and Llama-2 tokenizer.model). Long texts are stored as a token count
plus an FNV-1a 64-bit hash of the ids (each id as 8 little-endian bytes) and the first ids, so the committed files
stay small while a mismatch anywhere in the text is caught; short texts store their full ids.
"""
import argparse
import json
import os
import struct

import sentencepiece as spm
import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Strings that exercise the pre-tokenizer regexes, Unicode classes, added tokens and long words.
CASES = [
    "", " ", "  ", "Hello world", " Hello  world ", "\n", "\n\n", "a\n\n b", "\t tab\tx", "x \n y",
    "I'm you're they'll we've she'd it's DON'T HE'LL", "HELLO'S 's 's' ''' ", "naïve café Ünïcödé ÜNÏCÖDÉ",
    "日本語のテキストです。", "emoji 🤖🎉 👩‍👩‍👧 done", "numbers 1234567 3.14159 1,000 123456789012",
    "١٢٣ ٤٥٦ Arabic-Indic digits", "  leading", "trailing   ", "mixed\r\nline\rends\r\n\r\n",
    "non\u00a0breaking\u3000ideographic\u2009thin\u202fnarrow", "zero\u200bwidth",
    "next\u0085line",
    "a\u3000\u3000b x\u00a0\u00a0 y", "x \u3000y 日本 \u3000語 a \u00a0b", "combining e\u0301 and a\u0308",
    "mongolian\u180evowel separator", "line\u2028separator",
    "Ω≈ç√∫˜µ≤≥÷", "@@@ ### $$$ %%% ^&*() ...!!! ???", "C++ std::vector<int> x;",
    "e-mail: test@example.com http://x.y/z?q=1&r=2", "control \u0001\u007f bytes", "tabs\t\t\tand  spaces   \n",
    "<|endoftext|>", "a<|endoftext|>b", " <|endoftext|> ", "<|begin_of_text|>hello<|end_of_text|>",
    "<s> </s> <unk>", "a" * 500, "ab" * 300, " " * 50 + "x", "x" + "\n" * 20, "word " * 40,
    " = Valkyria Chronicles III = \n", "The year 2009 @-@ 10 season , with 1 @,@ 000 fans .",
]


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for b in struct.pack("<q", i):
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def summary(ids, head=500):
    return {"count": len(ids), "fnv1a64": fnv1a64(ids), "head": ids[:head]}


def read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def wikitext_rows(data_dir):
    with open(os.path.join(data_dir, "text/wikitext2/wikitext-2-raw-v1.test.rows.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# Rows tokenised on their own: the first non-empty rows plus every row with non-ASCII text (up to a limit).
def pick_rows(rows, first=30, non_ascii=30):
    non_empty = [i for i, r in enumerate(rows) if r]
    picked = non_empty[:first]
    picked += [i for i in non_empty[first:] if any(ord(c) > 127 for c in rows[i])][:non_ascii]
    return picked


def write(out_dir, name, doc):
    path = os.path.join(out_dir, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def byte_bpe_golden(tok, data_dir, add_special, provenance):
    wiki = read(os.path.join(data_dir, "text/wikitext2/wikitext-2-raw-v1.test.hf_joined.txt"))
    rows = wikitext_rows(data_dir)
    ids = tok.encode(wiki, add_special_tokens=add_special).ids
    assert tok.decode(ids, skip_special_tokens=True) == wiki, "reference does not round-trip WikiText-2"
    return {
        "provenance": provenance,
        "add_special": add_special,
        "wikitext2_test": summary(ids),
        "rows": [{"row": i, "ids": tok.encode(rows[i], add_special_tokens=add_special).ids} for i in pick_rows(rows)],
        "cases": [{"text": t, "ids": tok.encode(t, add_special_tokens=add_special).ids} for t in CASES],
    }


def gpt2(data_dir, out_dir, provenance):
    tables = os.path.join(data_dir, "tokenizers/gpt2")
    # What transformers' GPT2TokenizerFast builds from vocab.json + merges.txt: ByteLevel pre-tokenizer without
    # prefix space, ByteLevel decoder, <|endoftext|> as a special added token, no BOS.
    tok = Tokenizer(models.BPE.from_file(os.path.join(tables, "vocab.json"), os.path.join(tables, "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    write(out_dir, "gpt2_golden.json", byte_bpe_golden(tok, data_dir, False, provenance))


def llama3_style(data_dir, out_dir, provenance):
    # A small BPE with LLaMA-3's tokenizer.json structure: Split(regex) + ByteLevel(use_regex=False), ignore_merges,
    # <|begin_of_text|> prepended by TemplateProcessing. Trained on TinyStories + PTB (not on the WikiText test text).
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = read(os.path.join(data_dir, "text/tinystories/tinystories.valid.txt"))[:150000].splitlines()
    corpus += read(os.path.join(data_dir, "text/ptb/ptb.valid.txt"))[:100000].splitlines()
    tok.train_from_iterator(corpus, trainer)
    tok.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>"])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    model_dir = os.path.join(out_dir, "llama3_style")
    os.makedirs(model_dir, exist_ok=True)
    tok.save(os.path.join(model_dir, "tokenizer.json"))
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
                   "eos_token": "<|end_of_text|>"}, f, indent=2)
    # Golden ids come from reloading the saved file, i.e. from exactly what the C++ test reads.
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    write(out_dir, "llama3_style_golden.json", byte_bpe_golden(tok, data_dir, True, provenance))


def ignore_merges(out_dir, provenance):
    # A vocabulary where "abc" is a token that the merges cannot build ("b c" outranks "a b"), so LLaMA-3's
    # ignore_merges (a pre-token found whole in the vocab is emitted as one id) changes the result.
    vocab = {c: i for i, c in enumerate(pre_tokenizers.ByteLevel.alphabet())}
    for token in ["bc", "ab", "abc"]:
        vocab[token] = len(vocab)
    merges = [("b", "c"), ("a", "b"), ("ab", "c")]
    texts = ["abc", "abc abc", "xabc abcd", " abc", "ab abc bc"]
    doc = {"provenance": provenance, "texts": texts}
    for flag in (True, False):
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=flag))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        doc["tokenizer_json_ignore_merges" if flag else "tokenizer_json"] = json.loads(tok.to_str())
        doc["ids_ignore_merges" if flag else "ids"] = [tok.encode(t).ids for t in texts]
    assert doc["ids_ignore_merges"] != doc["ids"]
    write(out_dir, "ignore_merges_golden.json", doc)


def sentencepiece_golden(model_file, data_dir, out_dir, name, provenance):
    sp = spm.SentencePieceProcessor(model_file=model_file)
    wiki = read(os.path.join(data_dir, "text/wikitext2/wikitext-2-raw-v1.test.hf_joined.txt"))
    stories = read(os.path.join(data_dir, "text/tinystories/tinystories.valid.txt"))
    sample = read(os.path.join(data_dir, "text/tinystories/tinystories_sample.txt"))
    rows = wikitext_rows(data_dir)
    doc = {
        "provenance": provenance,
        "bos_id": sp.bos_id(), "eos_id": sp.eos_id(), "vocab_size": sp.get_piece_size(),
        "wikitext2_test": summary(sp.encode(wiki)),
        "tinystories_valid": summary(sp.encode(stories)),
        "tinystories_sample": {"ids": sp.encode(sample)},
        "rows": [{"row": i, "ids": sp.encode(rows[i])} for i in pick_rows(rows, 20, 20)],
        "cases": [{"text": t, "ids": sp.encode(t)} for t in CASES],
    }
    assert sp.decode(sp.encode(wiki)) == wiki, f"{name}: reference does not round-trip WikiText-2"
    write(out_dir, f"{name}_golden.json", doc)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--out", default="tests/data/tokenizer")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    provenance = (f"scripts/make_tokenizer_golden.py (tokenizers {tokenizers.__version__}, "
                  f"sentencepiece {spm.__version__})")
    gpt2(args.data_dir, args.out, provenance)
    llama3_style(args.data_dir, args.out, provenance)
    ignore_merges(args.out, provenance)
    sentencepiece_golden(os.path.join(args.data_dir, "models/stories260K-hf/tokenizer.model"), args.data_dir, args.out,
                         "sp_stories260k", provenance)
    sentencepiece_golden(os.path.join(args.data_dir, "tokenizers/llama2/tokenizer.model"), args.data_dir, args.out,
                         "sp_llama2", provenance)


if __name__ == "__main__":
    main()
