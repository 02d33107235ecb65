#!/usr/bin/env bash
# Wall time of the same zero-shot tasks in `alps eval --tasks` and in lm-evaluation-harness 0.4.9 (HF backend,
# through scripts/make_zeroshot_golden.py, which also checks nothing: it only runs lm-eval), one after the other on
# this machine, same model, same documents, same batch size. Prints a markdown table and both runs' metrics.
#
# Usage (repository root): scripts/bench_zeroshot.sh [TASKS=rte,winogrande,openbookqa,arc_challenge] [LIMIT=200]
#                          [MODEL=../shared/data/models/stories260K-hf] [BATCH=32] [VENV=/tmp/lmeval-venv]
#   needs `alps` built in build/ and lm-eval installed in VENV (see scripts/make_zeroshot_golden.py). LIMIT 0 scores
#   whole tasks.
#
# ARCHIVE=DIR: task by task, each task's alps run followed at once by its lm-eval run, its figures kept in
# DIR/<task>.json as soon as both finish (with the machine, the alps revision and the settings); tasks already in
# DIR with the same settings are not run again, so a comparison of whole tasks that takes longer than one sitting
# (lm-eval needs about 2.8 hours for the nine whole tasks of SmolLM2-135M on two cores) is finished by rerunning the
# same command. The table then covers every task in DIR.
set -euo pipefail
TASKS=${1:-rte,winogrande,openbookqa,arc_challenge}
LIMIT=${2:-200}
MODEL=${3:-../shared/data/models/stories260K-hf}
BATCH=${4:-32}
VENV=${5:-/tmp/lmeval-venv}
ARCHIVE=${ARCHIVE:-}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
alps=build/apps/alps/alps
lmeval_limit=()
[ "$LIMIT" -gt 0 ] && lmeval_limit=(--limit "$LIMIT")

run_alps() {  # TASKS JSON
  "$alps" -q eval --model "$MODEL" --tasks "$1" --limit "$LIMIT" --batch-size "$BATCH" --device cpu --json > "$2"
}
run_lmeval() {  # TASKS DIR
  HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 "$VENV/bin/python" scripts/make_zeroshot_golden.py --model "$MODEL" \
    --tasks "$1" "${lmeval_limit[@]}" --batch-size "$BATCH" --detail 0 --out "$2" > "$2.log" 2>&1 ||
    { echo "bench_zeroshot: lm-eval failed on $1:" >&2; tail -5 "$2.log" >&2; return 1; }
}
now() { date +%s.%N; }

if [ -z "$ARCHIVE" ]; then
  t0=$(now)
  run_alps "$TASKS" "$OUT/alps.json"
  t1=$(now)
  run_lmeval "$TASKS" "$OUT/lmeval"
  t2=$(now)
  python3 - "$OUT" "$t0" "$t1" "$t2" "$TASKS" <<'PY'
import glob, json, os, sys
sys.path.insert(0, "scripts")
from zeroshot_metrics import metrics_equal
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
    same = metrics_equal(a["metrics"], r["metrics"])
    print(f"| {t} | {a['docs']} | {a['seconds']:.1f} | {r['seconds']:.1f} | {r['seconds'] / a['seconds']:.1f}x | {same} |")
print(f"\nwhole runs (process start to exit): alps {t1 - t0:.1f}s, lm-eval {t2 - t1:.1f}s "
      f"({(t2 - t1) / (t1 - t0):.1f}x)")
PY
  exit 0
fi

mkdir -p "$ARCHIVE"
model_hash=$(sha256sum "$MODEL/config.json" | cut -c1-16)
for task in ${TASKS//,/ }; do
  if [ -f "$ARCHIVE/$task.json" ]; then
    python3 - "$ARCHIVE/$task.json" "$LIMIT" "$BATCH" "$model_hash" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
want = {"limit": int(sys.argv[2]), "batch_size": int(sys.argv[3]), "model_config_sha256": sys.argv[4]}
diff = [k for k, v in want.items() if r.get(k) != v]
if diff:
    sys.exit(f"bench_zeroshot: {sys.argv[1]} was measured with other settings ({', '.join(diff)}); "
             "use another ARCHIVE or remove that file")
PY
    echo "bench_zeroshot: $task kept from $ARCHIVE" >&2
    continue
  fi
  echo "bench_zeroshot: $task: alps, then lm-eval ($(date -u +%H:%M:%S))" >&2
  t0=$(now)
  run_alps "$task" "$OUT/$task.alps.json"
  t1=$(now)
  run_lmeval "$task" "$OUT/$task.lmeval"
  t2=$(now)
  python3 - "$OUT" "$task" "$t0" "$t1" "$t2" "$LIMIT" "$BATCH" "$model_hash" "$MODEL" \
    > "$ARCHIVE/.$task.json.partial" <<'PY'
import glob, json, os, platform, sys
sys.path.insert(0, "scripts")
from zeroshot_metrics import metrics_equal
out, task, t0, t1, t2 = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:6])
a_doc = json.load(open(os.path.join(out, f"{task}.alps.json")))
a = a_doc["tasks"][0]
(r,) = [json.load(open(f)) for f in glob.glob(os.path.join(out, f"{task}.lmeval", "*", "*.json"))]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
same = metrics_equal(a["metrics"], r["metrics"])
json.dump({"task": task, "model": os.path.basename(os.path.normpath(sys.argv[9])),
           "model_config_sha256": sys.argv[8], "limit": int(sys.argv[6]), "batch_size": int(sys.argv[7]),
           "docs": a["docs"], "alps_seconds": a["seconds"], "lmeval_seconds": r["seconds"],
           "alps_process_seconds": round(t1 - t0, 1), "lmeval_process_seconds": round(t2 - t1, 1),
           "metrics_equal": same, "alps_metrics": a["metrics"], "lmeval_metrics": r["metrics"],
           "alps": a_doc.get("software", {}), "cpu": cpu, "cores": os.cpu_count(),
           "load_after": os.getloadavg()[0], "python": platform.python_version()}, sys.stdout, indent=1)
PY
  mv "$ARCHIVE/.$task.json.partial" "$ARCHIVE/$task.json"
done

python3 - "$ARCHIVE" <<'PY'
import glob, json, os, sys
rows = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json")))]
print("| task | docs | alps s | lm-eval s | speed-up | metrics equal | alps revision |")
print("|---|---:|---:|---:|---:|---|---|")
for r in rows:
    print(f"| {r['task']} | {r['docs']} | {r['alps_seconds']:.1f} | {r['lmeval_seconds']:.1f} | "
          f"{r['lmeval_seconds'] / r['alps_seconds']:.2f}x | {r['metrics_equal']} | "
          f"{r['alps'].get('source_revision', '?')} |")
a = sum(r["alps_seconds"] for r in rows)
b = sum(r["lmeval_seconds"] for r in rows)
if rows:
    print(f"\n{len(rows)} tasks: alps {a:.1f} s, lm-eval {b:.1f} s ({b / a:.2f}x); processes: alps "
          f"{sum(r['alps_process_seconds'] for r in rows):.1f} s, lm-eval "
          f"{sum(r['lmeval_process_seconds'] for r in rows):.1f} s")
PY
