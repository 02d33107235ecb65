#!/usr/bin/env bash
# Wall time of the same zero-shot tasks in `alps eval --tasks` and in lm-evaluation-harness 0.4.9 (HF backend,
# through scripts/make_zeroshot_golden.py, which also checks nothing: it only runs lm-eval), one after the other on
# this machine, same model, same documents, same batch size. Prints a markdown table and both runs' metrics.
#
# Usage (repository root): scripts/bench_zeroshot.sh [TASKS=rte,winogrande,openbookqa,arc_challenge] [LIMIT=200]
#                          [MODEL=../shared/data/models/stories260K-hf] [BATCH=32] [VENV=/tmp/lmeval-venv]
#   needs `alps` built in build/ and lm-eval installed in VENV (see scripts/make_zeroshot_golden.py).
set -euo pipefail
TASKS=${1:-rte,winogrande,openbookqa,arc_challenge}
LIMIT=${2:-200}
MODEL=${3:-../shared/data/models/stories260K-hf}
BATCH=${4:-32}
VENV=${5:-/tmp/lmeval-venv}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

t0=$(date +%s.%N)
build/apps/alps/alps -q eval --model "$MODEL" --tasks "$TASKS" --limit "$LIMIT" --batch-size "$BATCH" --device cpu \
  --json > "$OUT/alps.json"
t1=$(date +%s.%N)
HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 "$VENV/bin/python" scripts/make_zeroshot_golden.py --model "$MODEL" \
  --tasks "$TASKS" --limit "$LIMIT" --batch-size "$BATCH" --detail 0 --out "$OUT/lmeval" > "$OUT/lmeval.log" 2>&1
t2=$(date +%s.%N)

python3 - "$OUT" "$t0" "$t1" "$t2" "$TASKS" <<'PY'
import glob, json, os, sys
out, t0, t1, t2, tasks = sys.argv[1], *map(float, sys.argv[2:5]), sys.argv[5].split(",")
alps = {t["task"]: t for t in json.load(open(os.path.join(out, "alps.json")))["tasks"]}
ref = {}
for f in glob.glob(os.path.join(out, "lmeval", "*", "*.json")):
    g = json.load(open(f))
    ref[g["task"]] = g
print("| task | docs | alps s | lm-eval s | speed-up | metrics equal |")
print("|---|---:|---:|---:|---:|---|")
for t in tasks:
    a, r = alps[t], ref[t]
    same = all(abs(a["metrics"][k] - v) <= 1e-9 * max(1, abs(v)) for k, v in r["metrics"].items()
               if isinstance(v, float) and "perplexity" not in k)
    print(f"| {t} | {a['docs']} | {a['seconds']:.1f} | {r['seconds']:.1f} | {r['seconds'] / a['seconds']:.1f}x | {same} |")
print(f"\nwhole runs (process start to exit): alps {t1 - t0:.1f}s, lm-eval {t2 - t1:.1f}s "
      f"({(t2 - t1) / (t1 - t0):.1f}x)")
PY
