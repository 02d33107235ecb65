#!/usr/bin/env bash
# Times every solver (and magnitude + PCG / exact refit) on synthetic OPT-125M-shaped layer problems through
# `alps solve-layer`, and prints a markdown table. Usage:
#   scripts/bench_solvers.sh [BUILD_DIR] [SHAPES...]      e.g. scripts/bench_solvers.sh build-prune 768x768 3072x768
# A shape is ROWSxCOLS (out x in). JSON lines of every run go to $BENCH_JSON (default /tmp/alps-bench.jsonl).
set -euo pipefail
build=${1:-build}
shift || true
shapes=("$@")
[ ${#shapes[@]} -eq 0 ] && shapes=(768x768 3072x768)
alps="$build/apps/alps/alps"
json=${BENCH_JSON:-/tmp/alps-bench.jsonl}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$json"

run() {  # shape label args...
  local shape=$1 label=$2
  shift 2
  "$alps" -q solve-layer --problem "$tmp/$shape.safetensors" --device cpu --json "$@" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); d["shape"]=sys.argv[1]; d["label"]=sys.argv[2]; print(json.dumps(d))' \
      "$shape" "$label" >> "$json"
}

for shape in "${shapes[@]}"; do
  rows=${shape%x*}
  cols=${shape#*x}
  "$alps" -q make-problem --out "$tmp/$shape.safetensors" --rows "$rows" --cols "$cols" --tokens 4096 --seed 0 \
    --name model.layers.0.self_attn.k_proj
  for pattern in 0.5 0.7 0.9 2:4; do
    if [[ $pattern == *:* ]]; then flag=(--pattern "$pattern"); else flag=(--sparsity "$pattern"); fi
    for method in magnitude wanda sparsegpt dsnot alps; do run "$shape" "$method" --method "$method" "${flag[@]}"; done
    run "$shape" magnitude+pcg --method magnitude "${flag[@]}" --refine pcg
    run "$shape" magnitude+exact --method magnitude "${flag[@]}" --refine exact
  done
done

python3 - "$json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| shape (out x in) | pattern | method | rel_error | seconds | refine seconds | ALPS iterations |")
print("|---|---|---|---|---|---|---|")
for d in rows:
    print(f"| {d['shape']} | {d['pattern']} | {d['label']} | {d['rel_error']:.4e} | {d['seconds']:.3f} | "
          f"{d.get('refine_seconds', 0):.3f} | {d.get('iterations', '') if d['method'] == 'alps' else ''} |")
PY
