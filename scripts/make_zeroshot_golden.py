#!/usr/bin/env python3
"""Golden zero-shot results from the real lm-evaluation-harness 0.4.9 (run once, output committed).

lm-eval itself builds every request from the raw fields of the task files under the data directory's eval/ (its own
task YAMLs, pointed at the local JSON-lines files instead of the Hugging Face hub), scores them with its Hugging Face
backend (HFLM: no BOS, target delimiter " ", trailing whitespace of the context moved to the continuation, left
truncation to the model's max length) and aggregates the metrics and their standard errors (mean_stderr for acc,
100,000-iteration bootstrap for LAMBADA's perplexity). Per task this writes tests/data/eval/<model>/<task>.json:

  metrics        lm-eval's aggregated metrics on the whole task (or --limit rows), stderr included
  n              documents scored
  preds          per document, "acc" argmax (and "acc_norm" argmax where reported), as digit strings; LAMBADA: the
                 is-greedy flags as 0/1
  docs           the first --detail documents: per request the continuation string, the number of context tokens,
                 the continuation token ids, the log-likelihood and is-greedy
  skipped_rows   rows left out with --skip (their preds are absent)

Setup (a virtual environment; transformers 4.x because lm-eval 0.4.9 imports AutoModelForVision2Seq, which
transformers 5 removed):
    python3 -m venv /tmp/lmeval-venv
    /tmp/lmeval-venv/bin/pip install "lm_eval==0.4.9" "transformers<5" torch sentencepiece protobuf
Usage (from the repository root):
    nice /tmp/lmeval-venv/bin/python scripts/make_zeroshot_golden.py [--data-dir ../shared/data]
        [--model ../shared/data/models/stories260K-hf] [--tasks piqa,...] [--limit N] [--detail 50] [--batch-size 32]
        [--skip TASK=ROW,ROW]
The committed stories260K goldens: every task with the defaults (whole tasks), except piqa with
--skip piqa=314,1554 (two solutions longer than the model's 512 positions, on which lm-eval stops with an
assertion) and hellaswag with --limit 2000 (the whole task takes lm-eval about 45 minutes on two cores).
The committed SmolLM2-135M-Instruct goldens (transformers 4.57.6, torch 2.11.0 CPU), the first 20 documents of
every task:
    ... make_zeroshot_golden.py --model ~/.cache/alps/models/SmolLM2-135M-Instruct \
        --name SmolLM2-135M-Instruct --limit 20 --detail 20
"""
import argparse
import gzip
import json
import os
import tempfile
import time

import numpy as np
import transformers

if not hasattr(transformers, "AutoModelForVision2Seq"):  # removed in transformers 5; lm-eval only names it
    transformers.AutoModelForVision2Seq = transformers.AutoModelForImageTextToText

import lm_eval  # noqa: E402
from lm_eval.models.huggingface import HFLM  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# task -> (file under eval/, split, overrides of lm-eval's own YAML). ARC and OpenBookQA ship here with the choice
# texts and the gold index already resolved (no answerKey/labels), so their target/choice fields are renamed.
TASKS = {
    "lambada_openai": ("lambada_openai/lambada_test.jsonl.gz", "test", {}),
    "piqa": ("piqa/piqa_validation.jsonl.gz", "validation", {}),
    "arc_easy": ("arc_easy/arc_easy_test.jsonl.gz", "test", {"doc_to_target": "gold", "doc_to_choice": "choices"}),
    "arc_challenge": ("arc_challenge/arc_challenge_test.jsonl.gz", "test",
                      {"doc_to_target": "gold", "doc_to_choice": "choices"}),
    "hellaswag": ("hellaswag/hellaswag_validation.jsonl.gz", "validation", {}),
    "winogrande": ("winogrande/winogrande_xl_validation.jsonl.gz", "validation", {}),
    "boolq": ("boolq/boolq_validation.jsonl.gz", "validation", {}),
    "rte": ("rte/rte_validation.jsonl.gz", "validation", {}),
    "openbookqa": ("openbookqa/openbookqa_test.jsonl.gz", "test", {"doc_to_target": "gold", "doc_to_choice": "choices"}),
}


def task_config(name, data_dir, files):
    path, split, overrides = TASKS[name]
    cfg = {"task": name, "dataset_path": "json", "dataset_name": None,
           "dataset_kwargs": {"data_files": {split: files.get(name, os.path.join(data_dir, "eval", path))}},
           "training_split": None, "validation_split": None, "test_split": None, "fewshot_split": None}
    cfg["test_split" if split == "test" else "validation_split"] = split
    cfg.update(overrides)
    return cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--name", default="stories260K")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--detail", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--task-file", action="append", default=[],
                    help="TASK=FILE: score this file instead (e.g. the rows a small model's context can hold)")
    ap.add_argument("--skip", action="append", default=[], help="TASK=ROW,ROW: leave these rows of the task out")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "eval"))
    args = ap.parse_args()
    model_dir = args.model or os.path.join(args.data_dir, "models", "stories260K-hf")

    files = dict(f.split("=", 1) for f in args.task_file)
    skipped = {}
    for spec in args.skip:
        name, rows = spec.split("=", 1)
        skipped[name] = sorted(int(r) for r in rows.split(","))
        src = os.path.join(args.data_dir, "eval", TASKS[name][0])
        with gzip.open(src, "rt", encoding="utf-8") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        tmp = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8")
        tmp.write("".join(line + "\n" for i, line in enumerate(lines) if i not in skipped[name]))
        tmp.close()
        files[name] = tmp.name
    # A model whose only tokenizer is tokenizer.json (SmolLM2) is read through PreTrainedTokenizerFast, which takes
    # every pre-tokenizer step from the file; a tokenizer_config naming a slow class may otherwise rebuild it.
    tokenizer = None
    if not os.path.exists(os.path.join(model_dir, "tokenizer.model")) and \
            os.path.exists(os.path.join(model_dir, "tokenizer.json")):
        tokenizer = transformers.PreTrainedTokenizerFast.from_pretrained(model_dir)
    lm = HFLM(pretrained=model_dir, tokenizer=tokenizer, dtype="float32", device="cpu", batch_size=args.batch_size)
    tm = TaskManager()
    out_dir = os.path.join(args.out, args.name)
    os.makedirs(out_dir, exist_ok=True)
    for name in args.tasks.split(","):
        t0 = time.time()
        res = lm_eval.simple_evaluate(model=lm, tasks=[task_config(name, args.data_dir, files)], task_manager=tm,
                                      num_fewshot=0, limit=args.limit, log_samples=True, bootstrap_iters=100000)
        seconds = time.time() - t0
        metrics = {k.split(",")[0]: v for k, v in res["results"][name].items() if k != "alias"}
        samples = sorted(res["samples"][name], key=lambda s: s["doc_id"])
        preds, preds_norm, docs = [], [], []
        for s in samples:
            lls = [r[0] for r in s["filtered_resps"]]
            greedy = [bool(r[1]) for r in s["filtered_resps"]]
            if name == "lambada_openai":
                preds.append("1" if greedy[0] else "0")
            else:
                preds.append(str(int(np.argmax(lls))))
                if "acc_norm" in metrics:
                    lens = np.array([float(len(c)) for c in task_choices(name, s)])
                    preds_norm.append(str(int(np.argmax(np.array(lls) / lens))))
            if s["doc_id"] < args.detail:
                reqs = []
                for (ctx, cont), ll, g in zip([tuple(a[:2]) for a in s["arguments"]], lls, greedy):
                    ctx_enc, cont_enc = lm._encode_pair(ctx, cont)
                    reqs.append({"continuation": cont, "context_tokens": len(ctx_enc),
                                 "continuation_ids": cont_enc, "loglikelihood": ll, "is_greedy": g})
                docs.append({"doc": s["doc_id"], "target": s["target"], "requests": reqs})
        file = TASKS[name][0] if name not in files or name in skipped else files[name]
        golden = {"task": name, "file": file, "model": args.name, "lm_eval": "0.4.9", "transformers": transformers.__version__, "batch_size": args.batch_size,
                  "limit": args.limit, "n": len(samples), "seconds": round(seconds, 1), "metrics": metrics,
                  "preds": "".join(preds), "docs": docs}
        if name in skipped:
            golden["skipped_rows"] = skipped[name]
        if preds_norm:
            golden["preds_norm"] = "".join(preds_norm)
        with open(os.path.join(out_dir, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, indent=None, separators=(",", ":"))
            f.write("\n")
        print(f"{name}: n={len(samples)} {metrics} ({seconds:.0f}s)", flush=True)


def task_choices(name, sample):
    """The choice strings whose character length acc_norm divides by: the continuation without the delimiter."""
    return [a[1][1:] for a in sample["arguments"]]


if __name__ == "__main__":
    main()
