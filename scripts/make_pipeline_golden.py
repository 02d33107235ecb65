#!/usr/bin/env python3
"""Writes tests/data/pipeline/golden.json, the independent reference for alps's calibration sampling:

- draws of CPython's `random` (which SparseGPT/ALPS use to pick calibration windows);
- the windows SparseGPT's `get_c4` loop picks from the C4 documents shipped in ../shared/data, for a byte-level
  toy tokenizer (ids = UTF-8 bytes + 3, with BOS id 1 prepended as a LLaMA tokenizer does), so the test checks the
  sampling algorithm itself independently of any real tokenizer;
- the same for a single plain-text document (SparseGPT's WikiText-2 loader draws only the window start).

Usage: python3 scripts/make_pipeline_golden.py [--data-dir ../shared/data]
"""
import argparse
import json
import pathlib
import random

root = pathlib.Path(__file__).resolve().parent.parent
ap = argparse.ArgumentParser()
ap.add_argument("--data-dir", default=str(root.parent / "shared" / "data"))
args = ap.parse_args()


def encode(text):
    return [1] + [b + 3 for b in text.encode("utf-8")]


out = {}
random.seed(0)
out["seed0_randint_0_999"] = [random.randint(0, 999) for _ in range(20)]
random.seed(0)
out["seed0_randint_0_356316"] = [random.randint(0, 356316) for _ in range(20)]
random.seed(12345678901)
out["seed12345678901_randint_5_2_pow_40"] = [random.randint(5, 2**40) for _ in range(10)]
random.seed(7)
out["seed7_getrandbits_1"] = [random.getrandbits(1) for _ in range(20)]

# SparseGPT datautils.get_c4 (train loader), with the byte tokenizer above.
docs = [json.loads(l)["text"] for l in open(pathlib.Path(args.data_dir) / "text/c4/c4-train.00000-of-01024.first1000.jsonl")]
nsamples, seqlen, seed = 6, 3000, 3
random.seed(seed)
windows = []
for _ in range(nsamples):
    while True:
        i = random.randint(0, len(docs) - 1)
        enc = encode(docs[i])
        if len(enc) > seqlen:
            break
    i = random.randint(0, len(enc) - seqlen - 1)
    windows.append(enc[i:i + seqlen][:16])  # the first 16 ids identify the window
out["c4_byte_windows"] = {"nsamples": nsamples, "seqlen": seqlen, "seed": seed, "first16": windows}

# get_wikitext2-style single document.
text = open(pathlib.Path(args.data_dir) / "text/tinystories/tinystories_sample.txt", encoding="utf-8").read()
enc = encode(text)
random.seed(0)
single = []
for _ in range(4):
    i = random.randint(0, len(enc) - 100 - 1)
    single.append(enc[i:i + 100][:16])
out["single_doc_byte_windows"] = {"nsamples": 4, "seqlen": 100, "seed": 0, "first16": single}

path = root / "tests/data/pipeline/golden.json"
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps(out))
print(f"wrote {path}")
