#!/usr/bin/env bash
# The checks and measurements that need a GPU, as one prepared device call: a session lent a GPU machine builds
# and packs here (scripts/setup.sh --cuda, scripts/pack_for_device.sh) and runs, with .device carried,
#
#   scripts/device_run.sh scripts/gpu_checks.sh [STEPS]          (device tool: timeout_s 600)
#
# STEPS (default all, in this order), each under its own time limit so that one that hangs leaves the rest theirs:
#   machine  nvidia-smi and `alps --version` (15 s)
#   tests    every test program of the CUDA build, the *_CUDA tests included, six at a time (210 s): each
#            program's log and gtest XML, and the failed tests by name
#   layers   synthetic layer problems of LLaMA-2-7B's shapes (q/k/v/o 4096x4096, gate/up 11008x4096, down
#            4096x11008; `alps make-problem`, 16384 tokens): ALPS and SparseGPT at 70% and 2:4 on the GPU, then
#            both at 70% on the first shape on the CPU (one problem on both devices: the errors side by side) (140 s)
#   prune    `alps prune` of a LLaMA-7B-shaped checkpoint of random weights (fp16, 2 blocks, written by
#            scripts/make_random_checkpoint.py with that machine's transformers), ALPS at 70%, 128 x 2048 tokens of
#            the committed C4 excerpt: seconds per phase and block, the measured device peak against the printed
#            estimate (140 s)
# A dry run without a GPU, at small sizes and with transformers in python3, checks the script itself:
#   DEVICE=cpu SHAPES=64x96 TOKENS=256 CKPT_ARGS="--hidden 64 --ffn 96 --heads 4 --kv-heads 4" NSAMPLES=4 \
#     SEQLEN=128 scripts/gpu_checks.sh machine layers prune
# Everything goes to $OUT (the device tool's folder that comes back; default /tmp/alps-gpu-checks): one log per
# step, JSON documents, and summary.md (per step: exit code and seconds; then the tests' failures, the layer table
# and the prune phases). Once the checks have started the script exits 0: the summary says what failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/alps-gpu-checks}
# OUT is new, empty, or an earlier run's (its summary.md): the steps replace their own files there and nothing else.
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -f "$out/summary.md" ]; then
  echo "gpu_checks: $out holds files this script did not write; choose an empty OUT" >&2
  exit 1
fi
mkdir -p "$out"
alps=build-cuda/apps/alps/alps
steps=${*:-machine tests layers prune}
device=${DEVICE:-cuda}
shapes=${SHAPES:-4096x4096 11008x4096 4096x11008}
tokens=${TOKENS:-16384}
ckpt_args=${CKPT_ARGS:---hidden 4096 --heads 32 --kv-heads 32 --ffn 11008}
nsamples=${NSAMPLES:-128}
seqlen=${SEQLEN:-2048}
summary=$out/summary.md
# Python with the machine's own libraries: device_run.sh's library path holds those this build packed.
py() { env -u LD_LIBRARY_PATH python3 "$@"; }

{
  echo "# alps GPU checks ($(date -u +%Y-%m-%dT%H:%M:%SZ), steps: $steps)"
  echo
  echo "| step | exit code | seconds |"
  echo "|---|---|---|"
} > "$summary"
run_step() {  # NAME LIMIT_S COMMAND...: the command's output in NAME.log, a row in the summary
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  timeout -k 5 "$limit" bash -c "$*" > "$out/$name.log" 2>&1
  rc=$?
  echo "| $name | $rc$([ $rc -eq 124 ] && echo ' (time limit)') | $(( $(date +%s) - start )) |" >> "$summary"
}

machine() {
  nvidia-smi || true
  "$alps" --version
}

tests() {
  mkdir -p "$out/tests"
  # Each program runs its tests one after another in one process (tests/main.cc: one OpenMP thread each).
  ls build-cuda/tests/*/alps_*tests | xargs -P 6 -I{} bash -c \
    'n=$(basename "$1"); "$1" --gtest_output="xml:$out/tests/$n.xml" > "$out/tests/$n.log" 2>&1 \
       && echo "passed $n" || echo "FAILED $n"' _ {}
  # gtest names a failed test twice (as it fails, then in the final list): once here, without its time.
  grep -h '^\[  FAILED  \] [A-Za-z]' "$out"/tests/*.log | sed 's/ ([0-9]* ms)$//' | sort -u || true
}

# A layer problem and its figures: the JSON document appears only when the solve finished (the summary reads
# every one it finds).
solve() {  # PROBLEM METHOD PATTERN DEVICE JSON
  "$alps" solve-layer --problem "$1" --method "$2" --pattern "$3" --device "$4" --json > "$5.partial" &&
    mv "$5.partial" "$5"
}

layers() {
  local d=$out/layers shape method pattern
  rm -rf "$d"
  mkdir -p "$d"
  for shape in $shapes; do
    "$alps" make-problem --out "$scratch/$shape.safetensors" --overwrite --rows "${shape%x*}" \
      --cols "${shape#*x}" --tokens "$tokens" --seed 0 --name "$shape" --json > /dev/null || return 1
    for method in alps sparsegpt; do
      for pattern in 0.7 2:4; do
        solve "$scratch/$shape.safetensors" "$method" "$pattern" "$device" \
          "$d/$shape-$method-${pattern/:/of}-$device.json"
      done
    done
  done
  # The CPU on the first shape at 70%, last (the slowest solves): the same problem's error on both devices.
  [ "$device" = cpu ] && return 0
  shape=${shapes%% *}
  for method in alps sparsegpt; do
    solve "$scratch/$shape.safetensors" "$method" 0.7 cpu "$d/$shape-$method-0.7-cpu.json"
  done
}

prune() {
  # shellcheck disable=SC2086  # the checkpoint's sizes are separate words
  py scripts/make_random_checkpoint.py "$scratch/model" --family llama --layers 2 --vocab 50304 --dtype float16 \
    --data-dir tests/data/real $ckpt_args || return 1
  # The pruned checkpoint (2.5 GB) stays in the scratch directory; the report comes back.
  "$alps" prune --model "$scratch/model" --out "$scratch/pruned" --method alps --sparsity 0.7 --calib c4 \
    --data-dir tests/data/real --nsamples "$nsamples" --seqlen "$seqlen" --device "$device" --json \
    > "$out/prune.json.partial" && mv "$out/prune.json.partial" "$out/prune.json"
}

# Problem files (up to 0.7 GB each), the random checkpoint and the pruned one live outside OUT, so that nothing
# large is left where the device tool collects its results, whatever step is stopped.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/alps-gpu-checks.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
# timeout runs each step in a shell of its own, which gets the steps and their settings from here.
export out scratch alps device shapes tokens ckpt_args nsamples seqlen
export -f py machine tests solve layers prune
for s in $steps; do
  case "$s" in
    machine) run_step machine 15 machine ;;
    tests) run_step tests 210 tests ;;
    layers) run_step layers 140 layers ;;
    prune) run_step prune 140 prune ;;
    *) echo "| $s | unknown step | 0 |" >> "$summary" ;;
  esac
done

py - "$out" "$tokens" >> "$summary" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
failed = os.path.join(out, "tests.log")
if os.path.exists(failed):
    lines = [l.strip() for l in open(failed) if l.startswith(("FAILED", "[  FAILED  ]"))]
    print("\n## Tests\n\n" + ("\n".join("- " + l for l in lines) if lines else "every test program passed"))
rows = []
for f in sorted(glob.glob(os.path.join(out, "layers", "*.json"))):
    try:
        r = json.load(open(f))
    except ValueError:
        continue
    rows.append(f"| {r['rows']}x{r['cols']} | {r['method']} | {r['pattern']} | {r['device']} | {r['seconds']:.3f} "
                f"| {r['rel_error']:.6e} | {r.get('iterations', '')} |")
if rows:
    print(f"\n## Layer solves ({sys.argv[2]} tokens)\n\n| out x in | method | pattern | device | seconds "
          "| rel_error | iterations |\n|---|---|---|---|---|---|---|")
    print("\n".join(rows))
p = os.path.join(out, "prune.json")
if os.path.exists(p) and os.path.getsize(p) > 0:
    r = json.load(open(p))
    report = r.get("report", r)
    print("\n## Prune, random LLaMA-shaped checkpoint, 2 blocks, ALPS 70%\n")
    print("```\n" + json.dumps({k: report.get(k) for k in ("phase_seconds", "blocks_done", "hardware")}, indent=1))
    print(json.dumps(report.get("extra", {}), indent=1) + "\n```")
EOF
echo "summary: $summary"
exit 0
