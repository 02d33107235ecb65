#!/usr/bin/env bash
# Forward speed of structured (smaller) models against their dense one, side by side (docs/results.md, "Structured
# pruning"): for each smaller model, --pairs times in turn the smaller and the dense model's forward tokens/s in
# `alps eval` (its tokens_per_second: the forwards alone) and in transformers (scripts/bench_hf_forward.py); prints
# one row per model with its parameters, weight file, the median of each pair's ratio (min .. max), and the bound:
# how many times fewer multiply-adds a token of a --tokens window costs (every linear, the head, the attention's
# scores and values over the causal keys), from the two config.json files.
#
# Usage: scripts/bench_structured_speed.sh --dense DIR [--python PY] [--alps BIN] [--pairs 3] [--tokens 1024] SMALLER...
#   --python PY   a python with torch and transformers (bench_hf_forward.py); "" skips transformers
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
alps=$root/build/apps/alps/alps python=python3 pairs=3 tokens=1024 dense=
models=()
while (($#)); do
  case $1 in
    --dense) dense=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --alps) alps=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    -*) echo "bench_structured_speed.sh: unknown argument '$1' (see the usage at the top of the script)" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[[ -n $dense && ${#models[@]} -gt 0 ]] || { echo "bench_structured_speed.sh: --dense DIR and a smaller model are required" >&2; exit 2; }

alps_tps() {  # DIR -> tokens/s of alps eval's forwards over two windows of WikiText-2
  "$alps" -q eval --model "$1" --ppl wikitext2 --max-windows 2 --seqlen "$tokens" --device cpu --json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["results"][0]["tokens_per_second"])'
}
hf_tps() {  # DIR -> tokens/s of transformers' forwards
  "$python" "$root/scripts/bench_hf_forward.py" "$1" --tokens "$tokens" --repeat 4 2>/dev/null | grep -oE '[0-9.]+ tokens/s' |
    grep -oE '^[0-9.]+'
}
echo "| model | parameters (M) | weight file (MB) | alps eval x (min .. max) | transformers x (min .. max) | bound x |"
echo "|---|---|---|---|---|---|"
for m in "${models[@]}"; do
  a=() h=()
  for ((i = 0; i < pairs; ++i)); do
    a+=("$(alps_tps "$m") $(alps_tps "$dense")")
    [[ -n $python ]] && h+=("$(hf_tps "$m") $(hf_tps "$dense")")
  done
  python3 - "$m" "$dense" "$tokens" "${#a[@]}" "${a[@]}" "${h[@]}" <<'EOF'
import json, os, statistics, sys
m, dense, T, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
pairs = [tuple(map(float, p.split())) for p in sys.argv[5:]]
a, h = pairs[:n], pairs[n:]

def ratios(ps):
    if not ps:
        return "-"
    r = sorted(x / y for x, y in ps)
    return f"{statistics.median(r):.2f} ({r[0]:.2f} .. {r[-1]:.2f})"

def macs(d):  # multiply-adds per token of a T-token causal window
    c = json.load(open(os.path.join(d, "config.json")))
    c = c.get("text_config", c)
    H, I, V, L = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
    nh, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    hd = c.get("head_dim") or H // nh
    keys = (T + 1) / 2
    return L * (H * nh * hd * 2 + 2 * H * kv * hd + 3 * H * I + 2 * nh * hd * keys) + V * H

def params(d):
    r = json.load(open(os.path.join(d, "alps-report.json")))
    return r["extra"]["structured"]["parameters"]["after"] / 1e6

size = sum(os.path.getsize(os.path.join(m, f)) for f in os.listdir(m) if f.endswith(".safetensors")) / 1e6
print(f"| {os.path.basename(m.rstrip('/'))} | {params(m):.2f} | {size:.1f} | {ratios(a)} | {ratios(h)} | "
      f"{macs(dense) / macs(m):.2f} |")
EOF
done
