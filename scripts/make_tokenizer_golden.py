#!/usr/bin/env python3
"""Golden ids for the tokenizer test suite (tests/tokenizer), from the reference libraries.

Run from the repository root:
    python3 scripts/make_tokenizer_golden.py [--data-dir ../shared/data] [--out tests/data/tokenizer]
                                             [--smollm2 DIR] [--only FAMILY ...]

References: Hugging Face `tokenizers` (byte-level BPE: GPT-2 tables, and a LLaMA-3-style tokenizer.json trained
here; small tokenizer.json files trained here with the normalizer, pre-tokenizer, model options and decoder of each
family alps supports; Unicode normal forms and lowercasing of every code point); tokenizer.model goldens come from
scripts/make_sentencepiece_golden.py. With --smollm2 DIR (scripts/get_smollm2.sh's output), also the ids of
SmolLM2's real tokenizer.json, which is too large to commit and is tested where the model is present. Long texts are stored as a token count
plus an FNV-1a 64-bit hash of the ids (each id as 8 little-endian bytes) and the first ids, so the committed files
stay small while a mismatch anywhere in the text is caught; short texts store their full ids.
"""
import argparse
import hashlib
import json
import os
import struct
import unicodedata

import sentencepiece as spm
import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPACE = "\u2581"  # SentencePiece's meta space

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
    # Sorted: alphabet() comes from a set, whose order changes between Python processes.
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
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


def added_token_flags(out_dir, provenance):
    """Added tokens' lstrip, rstrip and single_word around Unicode white space and word characters (tokenizers judges
    them with Rust regex's \\s and \\w), and a rejected single_word match, which consumes its span (the matcher does not
    look for a shorter token inside it)."""
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens([AddedToken("<l>", lstrip=True, normalized=False), AddedToken("<r>", rstrip=True, normalized=False),
                    AddedToken("<lr>", lstrip=True, rstrip=True, normalized=False),
                    AddedToken("<w>", single_word=True, normalized=False),
                    AddedToken("ab", single_word=True, normalized=False), AddedToken("b", normalized=False)])
    spaces = ["\u00a0", "\u3000", "\u2009", "\u0085", "\u1680", "\u202f", "\u200b", "\u180e", "\t\n", "\u2028"]
    words = ["\u00e9", "\u65e5", "\u0663", "\u2162", "\u00bd", "\u0301", "_", "\u203f", "\u200d", "-", "\u00b7"]
    texts = []
    for sp in spaces:
        texts += [f"x{sp}<l>y", f"x<r>{sp}y", f"x{sp}{sp}<lr>{sp}y", f"{sp}<l>", f"<r>{sp}"]
    for w in words:
        texts += [f"{w}<w>", f"<w>{w}", f" <w> {w}", f"{w}ab c", f"c ab{w}", f"{w} ab "]
    texts += ["xab", "abx", "ab", "x ab", "ab b", "bab", "<w><w>", "a<w>", "<l><l>  <r>  <r>", "<lr><lr>"]
    # 1000 random texts of the same pieces meeting at every kind of boundary (a 64-bit LCG), hashed per 100.
    pool = ["<l>", "<r>", "<lr>", "<w>", "ab", "b", "a", " ", "  ", "x", "_", "1"] + spaces + words
    state = 0x9E3779B97F4A7C15

    def step():
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return state >> 33

    random_texts = ["".join(pool[step() % len(pool)] for _ in range(1 + step() % 12)) for _ in range(1000)]
    random_ids = [tok.encode(t).ids for t in random_texts]
    doc = {"provenance": provenance, "texts": texts, "tokenizer_json": json.loads(tok.to_str()),
           "ids": [tok.encode(t).ids for t in texts],
           "random": {"texts": random_texts, "chunk": 100,
                      "ids_fnv1a64": [fnv1a64([i for ids in random_ids[first:first + 100] for i in ids + [-1]])
                                      for first in range(0, len(random_ids), 100)]}}
    write(out_dir, "added_token_flags_golden.json", doc)


def empty_matches(out_dir, provenance):
    """Regexes that match the empty string (lookaheads, \\b, x*) in Split pre-tokenizers of every behaviour, in a
    Replace normalizer and in a Replace decoder: tokenizers cuts or replaces at each empty match (Oniguruma's search,
    which refuses an empty match right where the previous match ended). Each variant swaps one step into
    smollm2_style/tokenizer.json, which must have been written first."""
    base = os.path.join(out_dir, "smollm2_style", "tokenizer.json")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    variants = []
    for pattern, behavior, invert in [("(?=[A-Z])", "isolated", False), ("(?=[A-Z])", "removed", False),
                                      ("(?=[A-Z])", "merged_with_previous", False),
                                      ("(?=[A-Z])", "merged_with_next", False), ("(?=[A-Z])", "contiguous", False),
                                      ("\\b", "removed", False), ("x*", "isolated", False), ("a|", "isolated", False),
                                      ("(?<=o)", "merged_with_previous", False), ("(?=[A-Z])", "isolated", True),
                                      ("[ ]*", "removed", False)]:
        split = pre_tokenizers.Split(Regex(pattern), behavior=behavior, invert=invert)
        variants.append({"pre_tokenizer": json.loads(pre_tokenizers.Sequence([split, byte_level]).__getstate__())})
    # Replace normalizers on x* or ^ make tokenizers 0.23.3 itself panic on some of the texts, and content inserted
    # at the very start of a text comes out twice from encode (normalize_str has it once): neither is compared (the
    # texts of such a match get null ids).
    for pattern, content in [("(?=[A-Z])", "_"), ("$", "!")]:
        variants.append({"normalizer": json.loads(normalizers.Replace(Regex(pattern), content).__getstate__())})
    for pattern, content in [("(?=e)", "|"), ("x*", "-")]:
        variants.append({"decoder": json.loads(decoders.Sequence([decoders.ByteLevel(),
                                                                   decoders.Replace(Regex(pattern), content)]).__getstate__())})
    texts = CASES + ["CamelCaseWords", "HTTPServer", "aAbB", "xxaxx", "foo bar  baz", "ooo", "a", "A"]
    for v in variants:
        doc = json.loads(Tokenizer.from_file(base).to_str())
        doc.update(v)
        tok = Tokenizer.from_str(json.dumps(doc))

        def inserts_at_start(text):
            n = v.get("normalizer")
            if n is None or not text:
                return False
            normalized = normalizers.Replace(Regex(n["pattern"]["Regex"]), n["content"]).normalize_str(text)
            return normalized.startswith(n["content"]) and not text.startswith(n["content"])

        v["ids"] = [None if inserts_at_start(t) else tok.encode(t).ids for t in texts]
        v["decoded"] = [None if ids is None else tok.decode(ids) for ids in v["ids"]]
    write(out_dir, "empty_matches_golden.json", {"provenance": provenance, "base": "smollm2_style/tokenizer.json",
                                                 "texts": texts, "variants": variants})


def training_corpus(data_dir):
    corpus = read(os.path.join(data_dir, "text/tinystories/tinystories.valid.txt"))[:150000].splitlines()
    return corpus + read(os.path.join(data_dir, "text/ptb/ptb.valid.txt"))[:100000].splitlines()


def fnv1a64_text(strings):
    """FNV-1a 64 over the UTF-8 of each string followed by a 0xFF byte (which UTF-8 never contains)."""
    h = 0xCBF29CE484222325
    for s in strings:
        for b in s.encode("utf-8") + b"\xff":
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def family_golden(tok, data_dir, provenance, family):
    """Everything the C++ test compares for one tokenizer.json: the whole WikiText-2 test text (ids and decode), every
    row on its own (hashed in chunks of 100 rows, each row's ids followed by -1), a few rows and the edge cases in
    full. Encoding adds the special tokens and decoding skips them, as alps's encode(text, true) and decode do."""
    wiki = read(os.path.join(data_dir, "text/wikitext2/wikitext-2-raw-v1.test.hf_joined.txt"))
    rows = wikitext_rows(data_dir)
    ids = tok.encode(wiki).ids
    decoded = tok.decode(ids)
    row_ids = [tok.encode(r).ids for r in rows]
    chunks = []
    for first in range(0, len(rows), 100):
        flat = [i for r in row_ids[first:first + 100] for i in r + [-1]]
        chunks.append({"first": first, "rows": len(row_ids[first:first + 100]), "fnv1a64": fnv1a64(flat)})
    return {
        "provenance": provenance,
        "family": family,
        "add_special": True,
        "wikitext2_test": summary(ids, head=200),
        "wikitext2_decoded_fnv1a64": fnv1a64_text([decoded]),
        "round_trip": decoded == wiki,
        "row_chunks": chunks,
        "rows": [{"row": i, "ids": row_ids[i]} for i in pick_rows(rows, 10, 10)],
        "cases": [{"text": t, "ids": tok.encode(t).ids, "decoded": tok.decode(tok.encode(t).ids)} for t in CASES],
    }


def save_family(tok, config, name, family, data_dir, out_dir, provenance):
    model_dir = os.path.join(out_dir, name)
    os.makedirs(model_dir, exist_ok=True)
    tok.save(os.path.join(model_dir, "tokenizer.json"), pretty=False)
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    # Golden ids come from reloading the saved file, i.e. from exactly what the C++ test reads.
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    write(out_dir, f"{name}_golden.json", family_golden(tok, data_dir, provenance, family))


BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


def sentencepiece_style_model(data_dir, train_pre_tokenizer, normalizer=None):
    """A BPE over meta-spaced words with byte fallback, trained like SentencePiece's BPE: <unk>, <s>, </s>, then the
    256 byte tokens, then the characters and merges of the training text."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizer
    tok.pre_tokenizer = train_pre_tokenizer
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False,
                                  special_tokens=["<unk>", "<s>", "</s>"] + BYTE_TOKENS)
    tok.train_from_iterator(training_corpus(data_dir), trainer)
    return tok


def llama2_style(data_dir, out_dir, provenance):
    # LLaMA-2 / TinyLlama / Mistral-7B-v0.1 tokenizer.json: no pre-tokenizer (the whole text is one word), the
    # normalizer prepends and substitutes the meta space, byte fallback, "<s>" by template. "@-@" is a non-special
    # added token matched in the normalized text (its own content normalized too).
    normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    tok = sentencepiece_style_model(
        data_dir, pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never", split=True), normalizer)
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B:1",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ["<unk>", "<s>", "</s>"]])
    tok.add_tokens([AddedToken("@-@", special=False, normalized=True)])
    config = {"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
              "add_bos_token": True, "add_eos_token": False, "legacy": True}
    save_family(tok, config, "llama2_style", "LLaMA-2, TinyLlama, Mistral v0.1", data_dir, out_dir, provenance)


def mistral_style(data_dir, out_dir, provenance):
    # Newer LLaMA/Mistral tokenizer.json: Metaspace pre-tokenizer that prepends only at the start of the input and
    # does not split, byte fallback. "@,@" is a non-special added token matched in the raw text.
    pre = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)
    tok = sentencepiece_style_model(data_dir, pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always"))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B:1",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]])
    tok.add_tokens([AddedToken("@,@", special=False, normalized=False)])
    config = {"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
              "add_bos_token": True, "add_eos_token": False, "legacy": False}
    save_family(tok, config, "mistral_style", "Mistral v0.3, LLaMA-2 non-legacy", data_dir, out_dir, provenance)


def gemma_style(data_dir, out_dir, provenance):
    # Gemma 2 and 3 tokenizer.json, as transformers' GemmaConverter writes it from the SentencePiece model: the
    # normalizer turns spaces into meta spaces and prepends none (unlike LLaMA-2), a Split on " " that finds nothing
    # left to split, byte fallback, <pad> <eos> <bos> <unk> first, "<bos>" by template, Replace/ByteFallback/Fuse
    # decoder without a Strip.
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", SPACE)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False,
                                  special_tokens=["<pad>", "<eos>", "<bos>", "<unk>"] + BYTE_TOKENS)
    tok.train_from_iterator(training_corpus(data_dir), trainer)
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos> $B:1",
                                                       special_tokens=[("<bos>", tok.token_to_id("<bos>"))])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]])
    config = {"tokenizer_class": "GemmaTokenizer", "bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>",
              "pad_token": "<pad>", "add_bos_token": True, "add_eos_token": False}
    save_family(tok, config, "gemma_style", "Gemma 2, Gemma 3", data_dir, out_dir, provenance)


def byte_level_model(data_dir, normalizer, pre_tokenizer, specials, **bpe_options):
    tok = Tokenizer(models.BPE(**bpe_options))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_corpus(data_dir), trainer)
    tok.add_special_tokens(specials)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def qwen2_style(data_dir, out_dir, provenance):
    # Qwen2 / Qwen2.5: NFC, Qwen2's regex (single digits), byte-level without GPT-2's regex, no BOS.
    tok = byte_level_model(
        data_dir, normalizers.NFC(),
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    config = {"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "add_prefix_space": False, "errors": "replace"}
    save_family(tok, config, "qwen2_style", "Qwen2, Qwen2.5", data_dir, out_dir, provenance)


def smollm2_style(data_dir, out_dir, provenance):
    # SmolLM/SmolLM2: every digit on its own, then GPT-2's byte-level pre-tokenizer.
    tok = byte_level_model(
        data_dir, None,
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    config = {"tokenizer_class": "GPT2Tokenizer", "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
              "unk_token": "<|endoftext|>", "add_prefix_space": False}
    save_family(tok, config, "smollm2_style", "SmolLM, SmolLM2", data_dir, out_dir, provenance)


def features_a(data_dir, out_dir, provenance):
    # The remaining steps, byte-level: NFKC and Lowercase, Split merged with the previous / next piece, digit runs,
    # ByteLevel with add_prefix_space.
    tok = byte_level_model(
        data_dir, normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]),
        pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"[.,;:!?]"), behavior="merged_with_previous"),
            pre_tokenizers.Split("-", behavior="merged_with_next"),
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)]),
        ["<|endoftext|>"], ignore_merges=True)
    save_family(tok, {"eos_token": "<|endoftext|>"}, "features_a", "NFKC, Lowercase, Split merged, Digits runs",
                data_dir, out_dir, provenance)


def features_b(data_dir, out_dir, provenance):
    # The remaining steps over meta spaces: NFKD, a literal Replace, Strip and NFC; "@" removed; letters kept together
    # by an inverted contiguous Split; Metaspace that always prepends and splits; Metaspace decoder.
    normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.Replace("``", '"'),
                                       normalizers.Strip(left=True, right=True), normalizers.NFC()])
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split("@", behavior="removed"),
        pre_tokenizers.Split(Regex(r"\p{L}"), behavior="contiguous", invert=True),
        pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)])
    tok = sentencepiece_style_model(data_dir, pre, normalizer)
    tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                     decoders.Metaspace(replacement=SPACE, prepend_scheme="always")])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ["<unk>", "<s>", "</s>"]])
    save_family(tok, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, "features_b",
                "NFKD, Replace, Strip, NFC, Split removed / inverted contiguous, Metaspace always + split",
                data_dir, out_dir, provenance)


# Code points whose normal forms and case mappings are worth checking in sequences: combining marks of several
# classes, precomposed Latin, Greek and Hangul, conjoining jamo, compatibility characters, composition exclusions.
SEQUENCE_POOL = [(0x41, 0x7A), (0xC0, 0x17F), (0x300, 0x36F), (0x391, 0x3CE), (0x1F00, 0x1F20), (0x591, 0x5C7),
                 (0x958, 0x95F), (0x93C, 0x94D), (0xF71, 0xF84), (0x1100, 0x1112), (0x1161, 0x1175),
                 (0x11A8, 0x11C2), (0xAC00, 0xAC40), (0x1E00, 0x1E40), (0x2126, 0x212B), (0xFB00, 0xFB06),
                 (0xFF01, 0xFF20), (0x3099, 0x309A), (0x304B, 0x3062), (0x1D15E, 0x1D164), (0x2160, 0x216F),
                 (0x1E9E, 0x1E9E), (0x130, 0x131), (0x3A3, 0x3A3), (0x345, 0x345), (0xDF, 0xDF)]


def sequence_pool():
    return [cp for lo, hi in SEQUENCE_POOL for cp in range(lo, hi + 1)]


def lcg_sequences(count, max_length):
    """Deterministic strings from the pool (a 64-bit LCG that the C++ test repeats)."""
    pool, x, out = sequence_pool(), 0x2545F4914F6CDD1D, []
    def step():
        nonlocal x
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return x >> 33
    for _ in range(count):
        length = 1 + step() % max_length
        out.append("".join(chr(pool[step() % len(pool)]) for _ in range(length)))
    return out


def unicode_golden(out_dir, provenance):
    """NFC, NFD, NFKC, NFKD and Lowercase as tokenizers applies them: every code point on its own (hashed per block
    of 4096; for Lowercase only the assigned ones), and 4000 LCG strings from SEQUENCE_POOL (hashed per 500, the
    first 20 in full)."""
    forms = {"NFC": normalizers.NFC(), "NFD": normalizers.NFD(), "NFKC": normalizers.NFKC(),
             "NFKD": normalizers.NFKD(), "Lowercase": normalizers.Lowercase()}
    sequences = lcg_sequences(4000, 8)
    doc = {"provenance": provenance, "block": 4096, "sequences": {"count": 4000, "max_length": 8, "chunk": 500,
                                                                  "pool": SEQUENCE_POOL}, "forms": {}}
    # Lowercase follows the Unicode data of Rust's standard library, newer than ICU's in Debian 12 (15.0): it is
    # compared on the code points assigned in Python's Unicode data (category other than Cn), which the C++ test
    # finds with ICU's character age.
    doc["lowercase_unicode_version"] = unicodedata.unidata_version
    for name, form in forms.items():
        blocks = []
        for first in range(0, 0x110000, 4096):
            outputs = [form.normalize_str(chr(cp)) for cp in range(first, first + 4096) if not 0xD800 <= cp < 0xE000
                       and (name != "Lowercase" or unicodedata.category(chr(cp)) != "Cn")]
            blocks.append(fnv1a64_text(outputs))
        normalized = [form.normalize_str(t) for t in sequences]
        doc["forms"][name] = {
            "code_point_blocks": blocks,
            "sequence_chunks": [fnv1a64_text(normalized[i:i + 500]) for i in range(0, len(sequences), 500)],
            "first_sequences": [{"text": t, "normalized": n} for t, n in zip(sequences[:20], normalized[:20])],
        }
    write(out_dir, "unicode_golden.json", doc)


def smollm2_real(model_dir, data_dir, out_dir, provenance):
    # SmolLM2's own tokenizer.json as scripts/get_smollm2.sh writes it (rebuilt from the GGUF vocabulary), read
    # faithfully: transformers' AutoTokenizer would take tokenizer_config's GPT2Tokenizer and lose the Digits step.
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    doc = family_golden(tok, data_dir, provenance, "SmolLM2-135M-Instruct (scripts/get_smollm2.sh)")
    with open(os.path.join(model_dir, "tokenizer.json"), "rb") as f:
        doc["tokenizer_json_sha256"] = hashlib.sha256(f.read()).hexdigest()
    write(out_dir, "smollm2_real_golden.json", doc)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--out", default="tests/data/tokenizer")
    parser.add_argument("--smollm2", help="SmolLM2 directory from scripts/get_smollm2.sh (optional)")
    parser.add_argument("--only", nargs="*", default=[],
                        help="write only these families' files (e.g. gemma_style), leaving the others as they are")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    provenance = (f"scripts/make_tokenizer_golden.py (tokenizers {tokenizers.__version__}, "
                  f"sentencepiece {spm.__version__})")
    families = (llama2_style, mistral_style, qwen2_style, smollm2_style, gemma_style, features_a, features_b)
    if args.only:
        for family in families:
            if family.__name__ in args.only:
                family(args.data_dir, args.out, provenance)
        return
    gpt2(args.data_dir, args.out, provenance)
    llama3_style(args.data_dir, args.out, provenance)
    ignore_merges(args.out, provenance)
    added_token_flags(args.out, provenance)
    for family in families:
        family(args.data_dir, args.out, provenance)
    empty_matches(args.out, provenance)
    unicode_golden(args.out, provenance)
    if args.smollm2:
        smollm2_real(args.smollm2, args.data_dir, args.out, provenance)


if __name__ == "__main__":
    main()
