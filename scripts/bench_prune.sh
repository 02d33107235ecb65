#!/usr/bin/env bash
# End-to-end cost of `alps prune` on a randomly initialised OPT-125M-shaped checkpoint with 128 x 2048 calibration:
# wall time per phase (calibration forward, statistics, solves, pruned forward) and peak memory.
#
# OPT-125M's 12 blocks have identical shapes, so the script prunes the first BLOCKS blocks (--stop-after, the same
# code path as a full run, resumable) and reports per-block averages and the 12-block total they imply; BLOCKS=12
# runs the whole model.
#
# Usage (repository root): scripts/bench_prune.sh [BUILD_DIR=build] [METHOD=alps] [BLOCKS=2] [CKPT=/tmp/alps-opt125m-random]
set -euo pipefail
BUILD=${1:-build}
METHOD=${2:-alps}
BLOCKS=${3:-2}
CKPT=${4:-/tmp/alps-opt125m-random}
OUT=$(mktemp -d /tmp/alps-bench-prune.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

[ -f "$CKPT/config.json" ] || python3 scripts/make_random_checkpoint.py "$CKPT" >&2
CMD=("$BUILD/apps/alps/alps" prune --model "$CKPT" --out "$OUT/pruned" --method "$METHOD" --sparsity 0.7
     --calib c4 --nsamples 128 --seqlen 2048 --device cpu --json --stop-after "$BLOCKS")
echo "+ ${CMD[*]}" >&2
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
start=$(date +%s.%N)
"${CMD[@]}" >"$OUT/report.json" 2>"$OUT/stderr.txt" || { cat "$OUT/stderr.txt" >&2; exit 1; }
wall=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$OUT/report.json" "$wall" "$METHOD" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
wall = float(sys.argv[2])
rss_gib = rep["extra"]["peak_rss_gib"]
done, total = rep["blocks_done"], rep["blocks_total"]
ph = rep["phase_seconds"]
per_block = {k: ph.get(k, 0) / done for k in ("statistics", "solve", "pruned_forward", "save_state")}
once = ph.get("calibration", 0)
est = rep["extra"]["memory_estimate"]
layers = [l for l in rep["layers"] if not l["skipped"]]
print(f"## alps prune, {sys.argv[3]} 70%, OPT-125M shape (random weights), 128 x 2048 C4 calibration, CPU fp32")
print()
print(f"{done} of {total} blocks pruned; wall clock {wall:.1f} s (including start-up and checkpoint loading)")
print()
print("| phase | seconds | per block | implied for all blocks |")
print("|---|---|---|---|")
print(f"| calibration (sampling, tokenising, embedding) | {once:.1f} | - | {once:.1f} |")
for k, v in per_block.items():
    print(f"| {k} | {ph.get(k, 0):.1f} | {v:.1f} | {v * total:.1f} |")
implied = once + sum(v * total for v in per_block.values())
print(f"| **total** | {sum(ph.values()):.1f} | | **{implied:.0f} ({implied / 60:.1f} min)** |")
print()
print("| linear | shape | seconds | rel_error | iterations | rho |")
print("|---|---|---|---|---|---|")
for l in layers[:len(layers) // done]:
    print(f"| {l['name']} | {l['shape'][0]}x{l['shape'][1]} | {l['seconds']:.2f} | {l['rel_error']:.4e} | "
          f"{l.get('iterations', '-')} | {l.get('rho', '-') if 'rho' not in l else format(l['rho'], '.3g')} |")
print()
print(f"peak resident memory (VmHWM): {rss_gib:.2f} GiB (estimate printed before the run: host activations "
      f"{est['host_activations_gib']:.2f} GiB + block {est['device_block_weights_gib']:.2f} + statistics <= "
      f"{est['device_statistics_gib_at_most']:.2f} + solver {est['device_solver_gib']:.2f} + batch "
      f"{est['device_batch_activations_gib']:.2f} + reused buffers <= {est.get('host_buffer_reuse_gib_at_most', 0):.2f} "
      "GiB, plus the memory-mapped checkpoint)")
PY
