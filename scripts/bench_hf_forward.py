#!/usr/bin/env python3
"""One forward-speed figure of a checkpoint in transformers, for side-by-side timings of a structured model against
its dense one (docs/results.md, "Structured pruning"): loads the model (fp32 on the CPU by default) and runs `--repeat`
forwards of one [1, --tokens] batch of fixed token ids; prints tokens per second of the forwards alone.

Usage: python3 scripts/bench_hf_forward.py MODEL_DIR [--tokens 1024] [--repeat 4] [--threads 2] [--device cpu|cuda]
           [--dtype float32|float16|bfloat16]
"""
import argparse
import time

import torch
from transformers import AutoModelForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--tokens", type=int, default=1024)
ap.add_argument("--repeat", type=int, default=4)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--device", default="cpu")
ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
args = ap.parse_args()
torch.set_num_threads(args.threads)
model = AutoModelForCausalLM.from_pretrained(args.model, dtype=getattr(torch, args.dtype)).to(args.device).eval()
ids = torch.arange(args.tokens).remainder(model.config.vocab_size - 3).add(3).unsqueeze(0).to(args.device)
with torch.inference_mode():
    model(ids)  # warm-up
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        model(ids)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
print(f"{args.model}: {args.repeat * args.tokens / seconds:.1f} tokens/s over {args.repeat} forwards of {args.tokens}")
