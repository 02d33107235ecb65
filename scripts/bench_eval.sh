#!/usr/bin/env bash
# Tokens/second of `alps eval` on a randomly initialised OPT-125M-shaped checkpoint, against this machine's sgemm
# rate measured in the same run (tests/eval/sgemm_bench.cc: libtorch matmul, same BLAS and threads).
# Forward FLOPs per token = 2 * (linear + lm_head parameters) + causal attention 2 * layers * seqlen * hidden (q k^T
# and p v, each 2 * hidden FLOPs per (query, key) pair, a query seeing on average seqlen / 2 keys): the useful work,
# not counting the masked half of the score matrix nor the elementwise ops (norms, softmax, log-softmax).
# The first window of a run also pays for first touches (the weights read from the checkpoint, every buffer's pages
# faulted in: about 1.5 s on the OPT-125M shape here), so the steady rate is measured as well: WINDOWS windows as the
# difference between a run of 1 + WINDOWS windows and a run of 1.
#
# Usage (repository root): scripts/bench_eval.sh [BUILD_DIR=build] [CKPT=/tmp/alps-opt125m-random] [WINDOWS=4]
#   needs targets alps and alps_sgemm_bench built in BUILD_DIR; the checkpoint is generated when absent.
set -euo pipefail
BUILD=${1:-build}
CKPT=${2:-/tmp/alps-opt125m-random}
WINDOWS=${3:-4}
SEQLEN=2048

[ -f "$CKPT/config.json" ] || python3 scripts/make_random_checkpoint.py "$CKPT" >&2
SGEMM=$("$BUILD/tests/eval/alps_sgemm_bench" 5)
run_eval() {
  "$BUILD/apps/alps/alps" -q eval --model "$CKPT" --ppl wikitext2 --seqlen "$SEQLEN" --max-windows "$1" --device cpu --json
}
EVAL=$(run_eval "$WINDOWS")
FIRST=$(run_eval 1)
MORE=$(run_eval $((WINDOWS + 1)))
SGEMM_AFTER=$("$BUILD/tests/eval/alps_sgemm_bench" 5)

python3 - "$CKPT/config.json" "$SGEMM" "$EVAL" "$SGEMM_AFTER" "$FIRST" "$MORE" <<'PY'
import json, sys
cfg, sgemm, ev, sgemm2 = json.load(open(sys.argv[1])), json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
first, more = json.loads(sys.argv[5])["results"][0], json.loads(sys.argv[6])["results"][0]
h, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
f = cfg.get("ffn_dim") or cfg["intermediate_size"]
kv = h // cfg["num_attention_heads"] * cfg.get("num_key_value_heads", cfg["num_attention_heads"])
mlp = 2 * h * f if "ffn_dim" in cfg else 3 * h * f
linear = L * (2 * h * h + 2 * h * kv + mlp)
T = ev["seqlen"]
flops_per_token = 2 * (linear + V * h) + 2 * L * T * h
r = ev["results"][0]
tps = r["tokens"] / r["seconds"]
achieved = tps * flops_per_token / 1e9
peak = max(sgemm["best_gflops"], sgemm2["best_gflops"])
print(f"model {cfg.get('architectures', ['?'])[0]} hidden {h} layers {L} vocab {V}; seqlen {T}, {r['windows']} windows")
print(f"alps eval: {r['tokens']} tokens in {r['seconds']:.2f} s = {tps:.1f} tokens/s "
      f"({flops_per_token / 1e6:.1f} MFLOP/token -> {achieved:.1f} GFLOP/s)")
print(f"sgemm (libtorch matmul, {sgemm['threads']} threads): before {sgemm['best_gflops']:.1f}, after {sgemm2['best_gflops']:.1f} GFLOP/s "
      "(per shape: " + ", ".join("%dx%dx%d %.1f" % (s["m"], s["k"], s["n"], s["gflops"]) for s in sgemm["shapes"]) + ")")
print(f"fraction of the sgemm rate: {achieved / peak:.2f}")
steady_tokens, steady_s = more["tokens"] - first["tokens"], more["seconds"] - first["seconds"]
steady = steady_tokens / steady_s * flops_per_token / 1e9
print(f"steady rate (windows 2..{more['windows']} of a {more['windows']}-window run, less a 1-window run): "
      f"{steady_tokens / steady_s:.1f} tokens/s -> {steady:.1f} GFLOP/s, fraction of the sgemm rate: {steady / peak:.2f} "
      f"(first window {first['seconds']:.2f} s)")
PY
