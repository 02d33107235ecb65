#!/usr/bin/env python3
"""Token positions each zero-shot task costs a forward pass, whole and with alps's packing, for the extrapolation
of docs/benchmarks.md (time per position measured on a subset, scaled to the whole task).

For every request it builds lm-eval 0.4.9's input from the ready fields of the task files (context, target
delimiter " " + choice, trailing whitespace of the context moved to the continuation, context + continuation encoded
as one string and split after len(encode(context)) tokens), then counts:
  whole   -- the positions lm-eval runs: len(context + continuation) - 1 per request;
  packed  -- the positions alps runs: the inputs sorted, each sharing its common prefix with the one before it when
             that prefix is at least a quarter of what it adds and its tree stays within a packed sequence
             (max(512, longest input) tokens), as src/eval/loglikelihood.cc (`pack`) lays them out;
  continuation tokens -- the positions whose logits alps computes (lm-eval computes them at every whole position).
Nothing is cut on the left here: SmolLM2's 8192 positions exceed every input of these tasks.

Usage: python scripts/zeroshot_positions.py MODEL_DIR [--data-dir ../shared/data] [--limit N] [--every K]
  needs the `tokenizers` package (e.g. the virtual environment scripts/get_smollm2.sh makes).
"""
import argparse
import gzip
import json
import os

from tokenizers import Tokenizer

FILES = {
    "lambada_openai": "lambada_openai/lambada_openai_test_lmeval.jsonl.gz",
    "piqa": "piqa/piqa_validation.jsonl.gz",
    "arc_easy": "arc_easy/arc_easy_test.jsonl.gz",
    "arc_challenge": "arc_challenge/arc_challenge_test.jsonl.gz",
    "hellaswag": "hellaswag/hellaswag_validation.jsonl.gz",
    "winogrande": "winogrande/winogrande_xl_validation.jsonl.gz",
    "boolq": "boolq/boolq_validation.jsonl.gz",
    "rte": "rte/rte_validation.jsonl.gz",
    "openbookqa": "openbookqa/openbookqa_test.jsonl.gz",
}


def requests(task, row):
    if task == "lambada_openai":
        return [(row["context"], row["target"])]
    if task == "winogrande":
        return [(c, row["target"]) for c in row["contexts"]]
    return [(row["query"], " " + c) for c in row["choices"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--data-dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    ap.add_argument("--limit", type=int, default=0, help="first N documents of each task (0: all)")
    ap.add_argument("--every", type=int, default=1,
                    help="every K-th document only (0, K, 2K, ...: a sample spread over the whole file)")
    args = ap.parse_args()
    if args.every < 1:
        ap.error(f"--every must be at least 1, got {args.every}")
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))

    def encode(s):
        return tok.encode(s, add_special_tokens=False).ids

    print("| task | documents | requests | whole positions | packed positions | packed / whole | continuation tokens |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for task, name in FILES.items():
        with gzip.open(os.path.join(args.data_dir, "eval", name), "rt") as f:
            rows = [json.loads(line) for line in f]
        rows = rows[:: args.every]
        if args.limit:
            rows = rows[: args.limit]
        inputs, continuation_tokens = [], 0
        for row in rows:
            for context, continuation in requests(task, row):
                kept = context.rstrip()
                continuation = context[len(kept):] + continuation
                both, ctx = encode(kept + continuation), encode(kept)
                inputs.append((ctx + both[len(ctx):])[:-1])
                continuation_tokens += len(both) - len(ctx)
        whole = sum(len(i) for i in inputs)
        inputs.sort()
        length = max(512, max(len(i) for i in inputs))
        packed, previous, used = 0, None, 0
        for i in inputs:
            shared = 0
            if previous is not None:
                while shared < min(len(i), len(previous)) and i[shared] == previous[shared]:
                    shared += 1
            if 4 * shared < len(i) - shared:
                shared = 0
            if shared == 0 or used + len(i) - shared > length:  # a new tree
                shared, used = 0, 0
            used += len(i) - shared
            packed += len(i) - shared
            previous = i
        print(f"| {task} | {len(rows)} | {len(inputs)} | {whole} | {packed} | {packed / whole:.3f} | "
              f"{continuation_tokens} |")


if __name__ == "__main__":
    main()
