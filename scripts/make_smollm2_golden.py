#!/usr/bin/env python3
"""Goldens for the SmolLM2-135M-Instruct tests (tests/eval/smollm2_test.cc), from Hugging Face transformers.

Run from the repository root, after scripts/get_smollm2.sh:
    python3 scripts/make_smollm2_golden.py [--model ~/.cache/alps/models/SmolLM2-135M-Instruct]
        [--data-dir ../shared/data] [--out tests/data/eval/smollm2_golden.json]

With transformers' LlamaForCausalLM in fp32 on the CPU (eager attention) and the tokenizer read from tokenizer.json
as `tokenizers` reads it (transformers' AutoTokenizer would take tokenizer_config's GPT2Tokenizer and drop the
Digits pre-tokenizer):
- greedy continuations of a few prompts, one full forward pass per step as `alps generate` does, with each step's
  margin between the best and second-best logit and the largest |logit| (the C++ test compares ids up to the first
  step whose margin fp32 rounding could overturn);
- the mean negative log-likelihood of each of the first windows of 512 tokens of WikiText-2 test (hf_joined text,
  no BOS, as `alps eval --ppl wikitext2 --seqlen 512` cuts them), the log-softmax taken in fp64, with each window's
  largest |logit|.
"""
import argparse
import hashlib
import json
import math
import os

import tokenizers
import torch
import transformers
from transformers import LlamaForCausalLM

PROMPTS = ["Once upon a time",
           "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"]
NEW_TOKENS = 20
SEQLEN, WINDOWS = 512, 4


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.path.expanduser("~/.cache/alps/models/SmolLM2-135M-Instruct"))
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--out", default="tests/data/eval/smollm2_golden.json")
    args = parser.parse_args()
    torch.manual_seed(0)
    tok = tokenizers.Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    model = LlamaForCausalLM.from_pretrained(args.model, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    eos = model.config.eos_token_id

    generations = []
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = tok.encode(prompt).ids
            prompt_ids = list(ids)
            steps = []
            for _ in range(NEW_TOKENS):
                logits = model(torch.tensor([ids])).logits[0, -1]
                top = torch.topk(logits, 2)
                steps.append({"id": int(top.indices[0]), "margin": float(top.values[0] - top.values[1]),
                              "max_abs_logit": float(logits.abs().max())})
                ids.append(int(top.indices[0]))
                if ids[-1] == eos:
                    break
            generated = ids[len(prompt_ids):]
            print(f"{prompt!r} -> {tok.decode(generated)!r}")
            generations.append({"prompt": prompt, "prompt_ids": prompt_ids, "ids": generated, "steps": steps,
                                "text": tok.decode(generated)})

        with open(os.path.join(args.data_dir, "text/wikitext2/wikitext-2-raw-v1.test.hf_joined.txt"),
                  encoding="utf-8", newline="") as f:
            text = f.read()
        all_ids = tok.encode(text).ids
        windows = []
        for w in range(WINDOWS):
            window = torch.tensor([all_ids[w * SEQLEN:(w + 1) * SEQLEN]])
            logits = model(window).logits[0].double()
            logp = torch.log_softmax(logits[:-1], dim=-1)
            nll = -logp.gather(1, window[0, 1:, None]).mean()
            windows.append({"nll": float(nll), "max_abs_logit": float(logits.abs().max())})
        mean = sum(w["nll"] for w in windows) / WINDOWS
        print(f"WikiText-2 first {WINDOWS} windows of {SEQLEN}: ppl {math.exp(mean):.4f}")

    doc = {
        "provenance": (f"scripts/make_smollm2_golden.py (transformers {transformers.__version__}, torch "
                       f"{torch.__version__}, tokenizers {tokenizers.__version__}; fp32, CPU, eager attention)"),
        "model_files": {name: sha256(os.path.join(args.model, name))
                        for name in ["config.json", "tokenizer.json", "model.safetensors"]},
        "generations": generations,
        "wikitext2": {"seqlen": SEQLEN, "dataset_tokens": len(all_ids), "windows": windows,
                      "perplexity": math.exp(mean)},
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
