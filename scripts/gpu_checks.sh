#!/usr/bin/env bash
# The checks and measurements that need a GPU, as one prepared device call (the default steps' limits add up to 570 s;
# `tests trsm layers prune7b prune70b profile7b` with BLOCKS7B=4 took 313 s on an H100, docs/benchmarks.md#gpu): a
# session lent
# a GPU machine builds and packs here (scripts/setup.sh --cuda, scripts/pack_for_device.sh) and runs, with .device
# carried,
#
#   scripts/device_run.sh scripts/gpu_checks.sh [STEPS]          (device tool: timeout_s 600)
#
# STEPS (default all, in this order), each under its own time limit so that one that hangs leaves the rest theirs:
#   machine  nvidia-smi, `alps --version`, and the ceilings: product rates, copy bandwidths, factorizations (40 s)
#   tests    the *_CUDA tests of every test program of the CUDA build, six programs at a time (60 s; `alltests`
#            runs every test instead, 210 s): each program's log, and the failed tests by name
#   layers   synthetic layer problems of LLaMA-2-7B's shapes (q/k/v/o 4096x4096, gate/up 11008x4096, down
#            4096x11008; `alps make-problem`, 16384 tokens) on the GPU: ALPS at 70% with the B-updates $B_UPDATES
#            (default auto cholesky explicit; --option b_update=...; the split between factorization, ADMM and PCG
#            from its debug log), ALPS 2:4 and SparseGPT 70% with the defaults; then, unless CPU_COMPARE=0, ALPS and
#            SparseGPT at 70% on the first shape on the CPU (one problem on both devices: the errors side by side)
#            (90 s)
#   prune7b  `alps prune` of a LLaMA-7B-shaped checkpoint of random weights (fp16, $BLOCKS7B blocks, default 2,
#            written by scripts/make_random_checkpoint.py with that machine's transformers, the weights drawn on the
#            device under test), ALPS at 70%, 128 x 2048
#            tokens of the committed C4 excerpt: seconds per phase and block, per linear, the device peak against the
#            printed estimate; the same run with each --solve-streams of $COMPARE_STREAMS (default 1; its checkpoint
#            must be the same bytes); then one
#            block at each of $BATCH_SIZES (default 4 16; --stop-after 1) for the GPU's default batch size (200 s)
#   prune70b the same for one block of LLaMA-2-70B's shape (hidden 8192, 64 query and 8 KV heads, ffn 28672), with
#            $FLAGS70B added, then with each --solve-streams of $STREAMS70B (default none), and with $BASELINE_ALPS (an
#            earlier build's alps) when set (240 s)
#   full7b   (not in the default steps) the whole run of a $FULL7B-block (default 32) LLaMA-7B-shaped checkpoint with
#            the default settings, from loading to the pruned checkpoint written: wall clock and phases (270 s)
#   trsm     (not in the default steps) the Cholesky B-update's triangular solves at the layers' widths: cuSOLVER's
#            potrs against the blocked substitution by matrix products, and a product of the same size (60 s)
#   products (not in the default steps) alps_bench_products at the layers' shapes: fp32 against split TF32 products,
#            one product, CholeskySolver's construction and solve, potrf (90 s)
#   profile7b (not in the default steps) prune7b's run with the debug log and one solve at a time (the debug log's
#            waits would serialise concurrent solves anyway): where each phase's seconds go (120 s)
#   dist1    (not in the default steps) prune7b's run again as a distributed run of one rank over NCCL (RANK=0,
#            WORLD_SIZE=1: the rendezvous, the communicator, the reductions and broadcasts to oneself) beside the plain
#            run, both timed here: the distributed code's overhead (target under 5%) and the same checkpoint (150 s)
#   structured7b (not in the default steps) prune7b's checkpoint with 20% and 30% of its MLP neurons removed
#            (OSSCAR), then the forward's tokens/s of each smaller model against the dense one in transformers on the
#            GPU, fp16, in turn twice (200 s)
#   moe30b   (not in the default steps) `alps prune` of a Qwen3-30B-A3B-shaped checkpoint of random weights (fp16,
#            $BLOCKSMOE blocks, default 2, of 128 experts of 768 neurons, 8 per token; scripts/make_random_checkpoint.py
#            --family qwen3_moe with $CKPTMOE, the weights drawn on the device under test), ALPS at 70%, 128 x 2048
#            tokens: seconds per block and phase, the experts' tokens, the device peak against the estimate, and the
#            48 blocks projected from the blocks run (issue targets: a block in at most 15 s, 48 under 12 minutes);
#            then the same run with each --solve-streams of $STREAMSMOE (default 4 8: a block of 388 small solves
#            may keep more streams busy than the default 2; the checkpoints must be the same bytes) (300 s)
#   split2   (not in the default steps) prune7b's run as two ranks sharing the one GPU over Gloo with every linear's
#            rows split in two (--dist-split all) beside one process: the split's arithmetic on a GPU (the projection's
#            histograms, the parts' sums through the host), the layer errors side by side and what the sums cost;
#            two ranks on one GPU gain nothing, so no speedup is expected (240 s)
#   baseline (not in the default steps) SparseGPT and Wanda at 70% on the 7B-shaped checkpoint in fp32 compute, with
#            this build and with an earlier one ($BASELINE_ALPS): layer errors and phases side by side (200 s)
# A dry run without a GPU, at small sizes and with transformers in python3, checks the script itself (ALPS=build/...
# for the CPU build's binary where there is no build-cuda):
#   DEVICE=cpu SHAPES=64x96 TOKENS=256 CKPT7B="--hidden 64 --ffn 96 --heads 4 --kv-heads 4" \
#     CKPT70B="--hidden 64 --ffn 160 --heads 8 --kv-heads 2" NSAMPLES=4 SEQLEN=128 scripts/gpu_checks.sh \
#     FULL7B=3 machine layers prune7b prune70b full7b
#   and for moe30b: CKPTMOE="--hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --ffn 32 --experts 8 \
#     --experts-per-token 2"
# $OUT (the device tool's folder that comes back; default /tmp/alps-gpu-checks) gets summary.md (per step: exit code
# and seconds; the failed tests, the layer table, the per-phase tables), the prune reports, and logs.tar.gz with
# every log (the tool brings back eight files at most). Once the checks have started the script exits 0: the
# summary says what failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/alps-gpu-checks}
# OUT is new, empty, or an earlier run's (its summary.md): the steps replace their own files there and nothing else.
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -f "$out/summary.md" ]; then
  echo "gpu_checks: $out holds files this script did not write; choose an empty OUT" >&2
  exit 1
fi
mkdir -p "$out"
alps=${ALPS:-build-cuda/apps/alps/alps}          # ALPS=build/apps/alps/alps: a dry run with the CPU build
steps=${*:-machine tests layers prune7b prune70b}
device=${DEVICE:-cuda}
shapes=${SHAPES:-4096x4096 11008x4096 4096x11008}
tokens=${TOKENS:-16384}
ckpt7b=${CKPT7B:---hidden 4096 --heads 32 --kv-heads 32 --ffn 11008}
ckpt70b=${CKPT70B:---hidden 8192 --heads 64 --kv-heads 8 --ffn 28672}
ckptmoe=${CKPTMOE:-}                            # moe30b: sizes other than Qwen3-30B-A3B's (the script's defaults)
blocksmoe=${BLOCKSMOE:-2}                       # moe30b: blocks of the Qwen3-30B-A3B-shaped checkpoint
streamsmoe=${STREAMSMOE-4 8}                    # moe30b: the same run with these --solve-streams too
nsamples=${NSAMPLES:-128}
seqlen=${SEQLEN:-2048}
b_updates=${B_UPDATES-auto cholesky explicit}  # layers: ALPS's B-update forms at 70%
cpu_compare=${CPU_COMPARE:-1}                   # layers: the first shape on the CPU too
batch_sizes=${BATCH_SIZES-4 16}                 # prune7b: the first block at these batch sizes too
blocks7b=${BLOCKS7B:-2}                         # prune7b: blocks of the 7B-shaped checkpoint
compare_streams=${COMPARE_STREAMS-1}            # prune7b: the same run with these --solve-streams too
full7b=${FULL7B:-32}                            # full7b: blocks of the whole 7B-shaped run
streams70b=${STREAMS70B-}                       # prune70b: the same block with these --solve-streams too
flags70b=${FLAGS70B:-}                          # prune70b: more flags, e.g. --log-level debug
summary=$out/summary.md
# Python with the machine's own libraries: device_run.sh's library path holds those this build packed.
py() { env -u LD_LIBRARY_PATH python3 "$@"; }

# Problem files (up to 0.7 GB each), the random checkpoints and the pruned ones live outside OUT, so that nothing
# large is left where the device tool collects its results, whatever step is stopped; logs go to $scratch/logs and
# come back as one archive.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/alps-gpu-checks.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
logs=$scratch/logs
mkdir -p "$logs"

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
  timeout -k 5 "$limit" bash -c "$*" > "$logs/$name.log" 2>&1
  rc=$?
  echo "| $name | $rc$([ $rc -eq 124 ] && echo ' (time limit)') | $(( $(date +%s) - start )) |" >> "$summary"
}

machine() {
  nvidia-smi || true
  "$alps" --version
  # The ceilings the bounds in docs/benchmarks.md divide by (scripts/gpu_ceilings.py).
  [ "$device" = cpu ] && return 0
  py scripts/gpu_ceilings.py machine
}

# fp32 products native against split TF32 ones, alone and inside CholeskySolver (apps/bench/bench_products.cc).
products() {
  build-cuda/apps/bench/alps_bench_products --device "$device" \
    --shapes "${PRODUCT_SHAPES:-4096x4096,4096x11008,11008x4096,8192x8192,8192x28672,28672x8192}"
}

# The Cholesky B-update's triangular solves, potrs against the blocked substitution (scripts/gpu_ceilings.py).
trsm() {
  [ "$device" = cpu ] && return 0
  py scripts/gpu_ceilings.py trsm
}

tests() {  # [GTEST_FILTER]
  mkdir -p "$logs/tests"
  # Each program runs its tests one after another in one process (tests/main.cc: one OpenMP thread each).
  ls build-cuda/tests/*/alps_*tests | xargs -P 6 -I{} bash -c \
    'n=$(basename "$1"); "$1" --gtest_filter="$2" > "$logs/tests/$n.log" 2>&1 && echo "passed $n" || echo "FAILED $n"' \
    _ {} "${1:-*}"
  # gtest names a failed test twice (as it fails, then in the final list): once here, without its time.
  grep -h '^\[  FAILED  \] [A-Za-z]' "$logs"/tests/*.log | sed 's/ ([0-9]* ms)$//' | sort -u || true
}

# A layer problem and its figures: the JSON document appears only when the solve finished. The debug log holds
# ALPS's split (factorization, ADMM, PCG).
solve() {  # PROBLEM METHOD PATTERN DEVICE NAME [--option k=v ...]
  local problem=$1 method=$2 pattern=$3 dev=$4 name=$5 target=--sparsity
  shift 5
  [[ "$pattern" == *:* ]] && target=--pattern
  "$alps" --log-level debug solve-layer --problem "$problem" --method "$method" "$target" "$pattern" --device "$dev" \
    --json "$@" > "$logs/layers/$name.partial" 2> "$logs/layers/$name.log" &&
    mv "$logs/layers/$name.partial" "$logs/layers/$name.json"
}

layers() {
  local shape b
  mkdir -p "$logs/layers"
  for shape in $shapes; do
    "$alps" make-problem --out "$scratch/$shape.safetensors" --overwrite --rows "${shape%x*}" \
      --cols "${shape#*x}" --tokens "$tokens" --seed 0 --name "$shape" --json > /dev/null || return 1
    for b in $b_updates; do
      solve "$scratch/$shape.safetensors" alps 0.7 "$device" "$shape-alps-0.7-$b" --option "b_update=$b"
    done
    solve "$scratch/$shape.safetensors" alps 2:4 "$device" "$shape-alps-2of4-auto"
    solve "$scratch/$shape.safetensors" sparsegpt 0.7 "$device" "$shape-sparsegpt-0.7"
  done
  # The CPU on the first shape at 70%, last (the slowest solves): the same problem's error on both devices.
  [ "$device" = cpu ] || [ "$cpu_compare" = 0 ] && return 0
  shape=${shapes%% *}
  solve "$scratch/$shape.safetensors" alps 0.7 cpu "$shape-alps-0.7-cpu"
  solve "$scratch/$shape.safetensors" sparsegpt 0.7 cpu "$shape-sparsegpt-0.7-cpu"
}

# ALPS at 70% on the calibration set with the settings above, the report on stdout.
prune_with() {  # ALPS_BINARY CHECKPOINT OUT_DIR [alps prune flags...]
  local bin=$1 model=$2 dest=$3
  shift 3
  "$bin" prune --model "$model" --out "$dest" --method alps --sparsity 0.7 --calib c4 --data-dir tests/data/real \
    --nsamples "$nsamples" --seqlen "$seqlen" --device "$device" --json "$@"
}

# A random LLaMA-shaped fp16 checkpoint, its weights drawn on the device under test (seconds on a GPU).
make_checkpoint() {  # DIR LAYERS "CHECKPOINT ARGS"
  # shellcheck disable=SC2086  # the checkpoint's sizes are separate words
  [ -f "$1/config.json" ] || py scripts/make_random_checkpoint.py "$1" --family llama --layers "$2" --vocab 50304 \
    --dtype float16 --data-dir tests/data/real --device "${device%%:*}" $3
}

prune_model() {  # NAME LAYERS "CHECKPOINT ARGS" [alps prune flags...]
  local name=$1 layers=$2 args=$3
  shift 3
  make_checkpoint "$scratch/$name" "$layers" "$args" || return 1
  # The pruned checkpoint stays in the scratch directory; the report comes back.
  prune_with "$alps" "$scratch/$name" "$scratch/$name-pruned" "$@" > "$out/$name.json.partial" &&
    mv "$out/$name.json.partial" "$out/$name.json"
}

prune7b() {
  prune_model prune7b "$blocks7b" "$ckpt7b" || return 1
  # Other numbers of concurrent solves: the same checkpoint, byte for byte (the streams change when kernels run, not
  # what they compute), and the phases side by side.
  local n
  for n in $compare_streams; do
    prune_with "$alps" "$scratch/prune7b" "$scratch/streams$n" --solve-streams "$n" > "$logs/streams$n.json" &&
      if cmp "$scratch/prune7b-pruned/model.safetensors" "$scratch/streams$n/model.safetensors"; then
        echo "solve-streams $n and the default: identical checkpoints"
      else
        echo "solve-streams $n and the default: DIFFERENT checkpoints"
      fi
  done
  local b
  for b in $batch_sizes; do  # the first block's passes at other batch sizes (the report's phases)
    prune_with "$alps" "$scratch/prune7b" "$scratch/batch$b" --batch-size "$b" --stop-after 1 > "$logs/batch$b.json"
  done
}

# shellcheck disable=SC2086  # FLAGS70B: separate words
prune70b() {
  prune_model prune70b 1 "$ckpt70b" $flags70b || return 1
  local n
  for n in $streams70b; do
    prune_with "$alps" "$scratch/prune70b" "$scratch/prune70b-streams$n" --solve-streams "$n" $flags70b \
      > "$logs/prune70b-streams$n.json"
  done
  # The same block with an earlier build, when one is carried along: phases and layers side by side.
  [ -x "${BASELINE_ALPS:-}" ] || return 0
  prune_with "$BASELINE_ALPS" "$scratch/prune70b" "$scratch/prune70b-baseline" $flags70b \
    > "$out/prune70b-baseline.json.partial" && mv "$out/prune70b-baseline.json.partial" "$out/prune70b-baseline.json"
}

# The whole 7B-shaped run as a user runs it, from loading the checkpoint to its pruned copy written: $FULL7B blocks
# (default 32, LLaMA-2-7B's), the default settings; the alps command's wall-clock seconds beside the report's phases.
full7b() {
  rm -rf "$scratch"/prune70b*  # the disk holds the 7B-shaped input, its pruned copy and the resume state (~45 GB)
  make_checkpoint "$scratch/full7b" "$full7b" "$ckpt7b" || return 1
  local start end
  start=$(date +%s.%N)
  prune_with "$alps" "$scratch/full7b" "$scratch/full7b-pruned" > "$out/full7b.json.partial" || return 1
  end=$(date +%s.%N)
  mv "$out/full7b.json.partial" "$out/full7b.json"
  echo "full7b: $full7b blocks, alps prune $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s wall clock"
}

# Structured pruning at a 7B shape: the run's phases in its report, and the smaller models' forward speed beside the
# dense one's (transformers, the GPU, fp16), dense and pruned in turn so that the ratios are taken side by side.
structured7b() {
  make_checkpoint "$scratch/prune7b" "$blocks7b" "$ckpt7b" || return 1
  local f m
  for f in 0.2 0.3; do
    "$alps" prune --model "$scratch/prune7b" --out "$scratch/structured$f" --remove-neurons "$f" --calib c4 \
      --data-dir tests/data/real --nsamples "$nsamples" --seqlen "$seqlen" --device "$device" --json \
      > "$out/structured7b-$f.json" || return 1
  done
  for m in prune7b structured0.2 structured0.3 prune7b structured0.2 structured0.3; do
    echo "structured7b: $(py scripts/bench_hf_forward.py "$scratch/$m" --device cuda --dtype float16 --tokens 4096 \
      --repeat 10)"
  done
}

# A mixture of experts at Qwen3-30B-A3B's shape: the pruned blocks' seconds and the whole model's projected from them
# (the 48 blocks at the blocks' mean, the save scaled by the blocks' share of the weights; loading and calibration
# once).
# shellcheck disable=SC2086  # CKPTMOE: separate words
moe30b() {
  [ -f "$scratch/moe30b/config.json" ] || py scripts/make_random_checkpoint.py "$scratch/moe30b" --family qwen3_moe \
    --layers "$blocksmoe" --vocab 50304 --dtype float16 --data-dir tests/data/real --device "${device%%:*}" \
    $ckptmoe || return 1
  local start end n flags report same f
  for n in default $streamsmoe; do
    flags=() report=$logs/moe30b-streams$n.json
    [ "$n" = default ] && report=$out/moe30b.json || flags=(--solve-streams "$n")
    start=$(date +%s.%N)
    prune_with "$alps" "$scratch/moe30b" "$scratch/moe30b-$n" "${flags[@]}" > "$report.partial" || return 1
    end=$(date +%s.%N)
    mv "$report.partial" "$report"
    moe30b_figures "$n" "$report" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
    [ "$n" = default ] && continue
    same=1
    for f in "$scratch"/moe30b-default/*.safetensors; do cmp -s "$f" "$scratch/moe30b-$n/${f##*/}" || same=0; done
    if [ "$same" = 1 ]; then
      echo "moe30b: solve-streams $n and the default: identical checkpoints"
    else
      echo "moe30b: solve-streams $n and the default: DIFFERENT checkpoints"
    fi
    rm -rf "${scratch:?}/moe30b-$n"
  done
}

moe30b_figures() {  # STREAMS REPORT WALL_SECONDS
  py - "$@" <<'PY'
import json, sys
streams, rep, wall = sys.argv[1], json.load(open(sys.argv[2])), float(sys.argv[3])
rep = rep.get("report", rep)
n, ph = max(1, rep.get("blocks_done", 1)), rep.get("phase_seconds", {})
per_block = sum(ph.get(k, 0) for k in ("statistics", "solve", "pruned_forward")) / n
save = ph.get("save", 0)
projected = wall - n * per_block - save + 48 * per_block + save * 48 / n
experts = [l for l in rep.get("layers", []) if ".experts." in l.get("name", "") and "tokens" in l]
tokens = sorted(l["tokens"] for l in experts if l["name"].endswith("down_proj"))
print(f"moe30b: solve-streams {streams}: {n} blocks, alps prune {wall:.1f} s wall clock; "
      f"per block {per_block:.2f} s (target 15 s): " + ", ".join(f"{k} {ph.get(k, 0) / n:.2f}" for k in ("statistics", "solve", "pruned_forward")))
print(f"moe30b: solve-streams {streams}: 48 blocks projected {projected:.0f} s (target 720 s)")
if streams != "default":
    sys.exit(0)
if tokens:
    print(f"moe30b: tokens per expert min {tokens[0]} median {tokens[len(tokens) // 2]} max {tokens[-1]} "
          f"over {len(tokens)} experts")
kinds = {}  # the layers by kind (an expert's projection or an attention one): count, seconds, errors, B-updates
for l in rep.get("layers", []):
    name = l.get("name", "")
    kind = ("expert " if ".experts." in name else "") + name.split(".")[-1]
    k = kinds.setdefault(kind, [0, 0.0, 0.0, set()])
    k[0] += 1
    k[1] += l.get("seconds", 0)
    k[2] += l.get("rel_error", 0)
    k[3].add(str(l.get("b_update")))
for kind, (count, seconds, error, forms) in kinds.items():
    print(f"moe30b: {kind}: {count} solves, {seconds:.2f} s in all, {seconds / count * 1e3:.1f} ms each, "
          f"mean rel_error {error / count:.4e}, b_update {'/'.join(sorted(forms))}")
PY
}

# The distributed code path at world size 1 over NCCL against the plain path, on prune7b's checkpoint: wall clock and
# phases of each, and whether the checkpoints are the same bytes (one rank computes what one process does).
dist1() {
  make_checkpoint "$scratch/prune7b" "$blocks7b" "$ckpt7b" || return 1
  local who start end
  for who in plain nccl1 plain nccl1; do  # A B A B: the pair's ratio, twice
    start=$(date +%s.%N)
    if [ "$who" = plain ]; then
      prune_with "$alps" "$scratch/prune7b" "$scratch/dist-$who" --overwrite > "$logs/dist1-$who.json" || return 1
    else
      RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
        prune_with "$alps" "$scratch/prune7b" "$scratch/dist-$who" --overwrite > "$logs/dist1-$who.json" || return 1
    fi
    end=$(date +%s.%N)
    echo "dist1: $who $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s wall clock"
  done
  if cmp "$scratch/dist-plain/model.safetensors" "$scratch/dist-nccl1/model.safetensors"; then
    echo "dist1: identical checkpoints"
  else
    echo "dist1: DIFFERENT checkpoints"
  fi
}

# Two ranks on one GPU (Gloo: NCCL needs a GPU per rank), every linear split in two, against one process on
# prune7b's checkpoint. --device cuda:0 for both ranks (cuda alone would mean cuda:LOCAL_RANK).
split2() {
  make_checkpoint "$scratch/prune7b" "$blocks7b" "$ckpt7b" || return 1
  local who start end flags dev=$device
  [ "$dev" = cuda ] && dev=cuda:0
  for who in plain split2; do
    flags=()
    [ "$who" = split2 ] && flags=(--nproc 2 --dist-backend gloo --dist-split all)
    start=$(date +%s.%N)
    "$alps" prune --model "$scratch/prune7b" --out "$scratch/split-$who" --overwrite --method alps --sparsity 0.7 \
      --calib c4 --data-dir tests/data/real --nsamples "$nsamples" --seqlen "$seqlen" --device "$dev" --json \
      "${flags[@]}" > "$logs/split2-$who.json" || return 1
    end=$(date +%s.%N)
    echo "split2: $who $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s wall clock"
  done
  py - "$logs/split2-plain.json" "$logs/split2-split2.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
d = [abs(x["rel_error"] - y["rel_error"]) / x["rel_error"] for x, y in zip(a["layers"], b["layers"])]
parts = sorted({l.get("parts", 1) for l in b["layers"]})
print("split2: layer errors, mean relative difference %.4f, largest %.4f; parts %s; mean error %.6f / %.6f"
      % (sum(d) / len(d), max(d), parts, sum(x["rel_error"] for x in a["layers"]) / len(d),
         sum(x["rel_error"] for x in b["layers"]) / len(d)))
print("split2: solve %.2f s / %.2f s; bytes per block and rank within the parts %d"
      % (a["phase_seconds"]["solve"], b["phase_seconds"]["solve"],
         b["extra"]["distributed"]["bytes_per_block"]["within_parts"]))
PY
}

# The 7B-shaped run again with the debug log: the statistics pass split into forward and updates, each layer's
# problem, checks, solve, error and download, ALPS's factorization / ADMM / PCG (each waits for the device, so the
# phases are a little longer than without it).
profile7b() {
  [ -d "$scratch/prune7b" ] && ln -sfn "$scratch/prune7b" "$scratch/profile7b"  # prune7b's checkpoint, if made
  prune_model profile7b 2 "$ckpt7b" --log-level debug --solve-streams 1
}

# The deterministic methods against an earlier build of alps ($BASELINE_ALPS, a CUDA build's alps binary carried
# along, e.g. in .device), both computing in fp32 on the 7B-shaped checkpoint: the layer errors must agree to the
# rounding of the Gram's summation order.
baseline() {
  [ -x "${BASELINE_ALPS:-}" ] || { echo "baseline: set BASELINE_ALPS to an earlier alps binary" >&2; return 1; }
  make_checkpoint "$scratch/prune7b" 2 "$ckpt7b" || return 1
  local method who bin
  for method in sparsegpt wanda; do
    for who in baseline this; do
      bin=$alps
      [ "$who" = baseline ] && bin=$BASELINE_ALPS
      "$bin" prune --model "$scratch/prune7b" --out "$scratch/$who-$method" --method "$method" --sparsity 0.7 \
        --calib c4 --data-dir tests/data/real --nsamples "$nsamples" --seqlen "$seqlen" --device "$device" \
        --dtype fp32 --json > "$logs/baseline-$who-$method.json" || return 1
    done
  done
}

# timeout runs each step in a shell of its own, which gets the steps and their settings from here.
export out scratch logs alps device shapes tokens ckpt7b ckpt70b ckptmoe blocksmoe streamsmoe nsamples seqlen b_updates cpu_compare batch_sizes \
  blocks7b compare_streams flags70b full7b streams70b \
  BASELINE_ALPS=${BASELINE_ALPS:-}
export -f py machine trsm moe30b_figures products tests solve layers prune_with make_checkpoint prune_model prune7b prune70b full7b profile7b \
  baseline dist1 split2 structured7b moe30b
for s in $steps; do
  case "$s" in
    machine) run_step machine 40 machine ;;
    trsm) run_step trsm 80 trsm ;;
    products) run_step products 90 products ;;
    tests) run_step tests 60 tests "'*_CUDA*'" ;;
    alltests) run_step tests 210 tests ;;
    layers) run_step layers 90 layers ;;
    prune7b) run_step prune7b 200 prune7b ;;
    prune70b) run_step prune70b 240 prune70b ;;
    full7b) run_step full7b 270 full7b ;;
    profile7b) run_step profile7b 120 profile7b ;;
    baseline) run_step baseline 200 baseline ;;
    dist1) run_step dist1 150 dist1 ;;
    split2) run_step split2 240 split2 ;;
    structured7b) run_step structured7b 200 structured7b ;;
    moe30b) run_step moe30b 300 moe30b ;;
    *) echo "| $s | unknown step | 0 |" >> "$summary" ;;
  esac
done

py - "$out" "$logs" "$tokens" >> "$summary" <<'EOF'
import glob, json, os, re, sys
out, logs, tokens = sys.argv[1], sys.argv[2], sys.argv[3]
trsm_log = os.path.join(logs, "trsm.log")
if os.path.exists(trsm_log):
    print("\n## Triangular solves\n\n" + "\n".join("- " + l.strip() for l in open(trsm_log) if l.startswith("trsm")))
products_log = os.path.join(logs, "products.log")
if os.path.exists(products_log):
    print("\n## Products, native fp32 against split TF32\n\n" + "".join(l for l in open(products_log) if l.startswith("|")))
machine = os.path.join(logs, "machine.log")
if os.path.exists(machine):
    lines = [l.strip() for l in open(machine) if l.startswith(("ceiling", "factor", "alps ", "cuda build", "  NVIDIA"))
             or "NVIDIA H" in l or "Driver Version" in l]
    print("\n## Machine\n\n" + "\n".join("- " + l for l in lines))
failed = os.path.join(logs, "tests.log")
if os.path.exists(failed):
    lines = [l.strip() for l in open(failed) if l.startswith(("FAILED", "[  FAILED  ]"))]
    print("\n## Tests\n\n" + ("\n".join("- " + l for l in lines) if lines else "every test program passed"))
rows = []
for f in sorted(glob.glob(os.path.join(logs, "layers", "*.json"))):
    try:
        r = json.load(open(f))
    except ValueError:
        continue
    split = ""
    log = f[:-5] + ".log"
    if os.path.exists(log):
        m = re.search(r"eigh \((\w+)\) ([0-9.]+) s; (\d+) ADMM iterations ([0-9.]+) s .*PCG (\d+) iterations ([0-9.]+) s",
                      open(log).read())
        if m:
            split = f"{m.group(1)} {m.group(2)} / {m.group(3)} it {m.group(4)} / {m.group(5)} it {m.group(6)}"
    stats = r  # solve-layer puts the method's own numbers beside its fields
    rows.append(f"| {os.path.basename(f)[:-5]} | {r['device']} | {r['seconds']:.3f} | {r['rel_error']:.6e} "
                f"| {stats.get('b_update', '')} | {stats.get('factorizations', '')} | {split} |")
if rows:
    print(f"\n## Layer solves ({tokens} tokens)\n\n| problem | device | seconds | rel_error | b_update | factorizations "
          "| eigh s / ADMM it s / PCG it s |\n|---|---|---|---|---|---|---|")
    print("\n".join(rows))

def phases(name, path, per_layer=True):
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    r = json.load(open(path))
    rep = r.get("report", r)
    n = max(1, rep.get("blocks_done", 1))
    ph = rep.get("phase_seconds", {})
    print(f"\n## {name}: {n} block(s)\n\n| phase | seconds | per block |\n|---|---|---|")
    for k, v in ph.items():
        print(f"| {k} | {v:.2f} | {v / n:.2f} |")
    extra = rep.get("extra", {})
    print(f"| (state writes, on their thread) | {extra.get('state_writes_seconds', 0):.2f} | |")
    est = extra.get("memory_estimate", {})
    print(f"\ndevice peak {est.get('device_peak_gib_measured')} GiB, estimate {est.get('device_total_gib_at_most')} GiB;"
          f" peak RSS {extra.get('peak_rss_gib')} GiB; hardware {json.dumps(rep.get('hardware'))}")
    if not per_layer:
        return
    print("\n| layer | seconds | rel_error | b_update | factorizations | iterations |\n|---|---|---|---|---|---|")
    for l in rep.get("layers", []):
        print(f"| {l.get('block')} {l.get('name', '').split('.')[-1]} | {l.get('seconds', 0):.3f} "
              f"| {l.get('rel_error', 0):.6e} | {l.get('b_update')} | {l.get('factorizations')} | {l.get('iterations')} |")

phases("Prune, LLaMA-7B shape, ALPS 70%", os.path.join(out, "prune7b.json"))
for p in sorted(glob.glob(os.path.join(logs, "streams*.json"))):
    phases(f"The same with --solve-streams {os.path.basename(p)[7:-5]}", p)
prune7b_log = os.path.join(logs, "prune7b.log")
if os.path.exists(prune7b_log):
    print("\n" + "\n".join(l.strip() for l in open(prune7b_log) if l.startswith("solve-streams")))
for b in (4, 16):
    p = os.path.join(logs, f"batch{b}.json")
    if os.path.exists(p) and os.path.getsize(p) > 0:
        rep = json.load(open(p))
        rep = rep.get("report", rep)
        print(f"\n7B first block at --batch-size {b}: " + json.dumps(rep.get("phase_seconds", {})))
phases("Prune, LLaMA-70B shape, ALPS 70%", os.path.join(out, "prune70b.json"))
for p in sorted(glob.glob(os.path.join(logs, "prune70b-streams*.json"))):
    phases(f"The same with --solve-streams {os.path.basename(p)[16:-5]}", p)
phases("The same with the earlier build (BASELINE_ALPS)", os.path.join(out, "prune70b-baseline.json"))
phases("The whole LLaMA-7B-shaped run, ALPS 70%", os.path.join(out, "full7b.json"))
for p in sorted(glob.glob(os.path.join(out, "structured7b-*.json"))):
    phases(f"LLaMA-7B shape, {os.path.basename(p)[13:-5]} of the MLP neurons removed by OSSCAR", p, per_layer=False)
structured_log = os.path.join(logs, "structured7b.log")
if os.path.exists(structured_log):
    print("\n" + "\n".join(l.strip() for l in open(structured_log) if l.startswith("structured7b:")))
phases("Prune, Qwen3-30B-A3B shape, ALPS 70%", os.path.join(out, "moe30b.json"), per_layer=False)
moe_log = os.path.join(logs, "moe30b.log")
if os.path.exists(moe_log):
    print("\n" + "\n".join(l.strip() for l in open(moe_log) if l.startswith("moe30b:")))
full7b_log = os.path.join(logs, "full7b.log")
if os.path.exists(full7b_log):
    print("\n" + "\n".join(l.strip() for l in open(full7b_log) if l.startswith("full7b:")))
phases("Prune with the debug log, LLaMA-7B shape, ALPS 70%", os.path.join(out, "profile7b.json"))
dist1_log = os.path.join(logs, "dist1.log")
if os.path.exists(dist1_log):
    print("\n## One rank over NCCL against the plain path\n\n" +
          "\n".join("- " + l.strip() for l in open(dist1_log) if l.startswith("dist1:")))
    for who in ("plain", "nccl1"):
        p = os.path.join(logs, f"dist1-{who}.json")
        if os.path.exists(p) and os.path.getsize(p) > 0:
            print(f"\n{who} phases: " + json.dumps(json.load(open(p)).get("phase_seconds", {})))
split2_log = os.path.join(logs, "split2.log")
if os.path.exists(split2_log):
    print("\n## Two ranks on one GPU, every linear split in two, against one process\n\n" +
          "\n".join("- " + l.strip() for l in open(split2_log) if l.startswith("split2:")))
for method in ("sparsegpt", "wanda"):
    docs = {}
    for who in ("baseline", "this"):
        p = os.path.join(logs, f"baseline-{who}-{method}.json")
        if os.path.exists(p) and os.path.getsize(p) > 0:
            r = json.load(open(p))
            docs[who] = r.get("report", r)
    if len(docs) == 2:
        print(f"\n## {method} 70%, fp32 compute: the earlier build against this one\n")
        print("phases: " + json.dumps(docs["baseline"]["phase_seconds"]) + " / " + json.dumps(docs["this"]["phase_seconds"]))
        worst = 0.0
        print("\n| layer | rel_error earlier | rel_error this | relative difference |\n|---|---|---|---|")
        for a, b in zip(docs["baseline"]["layers"], docs["this"]["layers"]):
            d = abs(a["rel_error"] - b["rel_error"]) / a["rel_error"]
            worst = max(worst, d)
            print(f"| {a['block']} {a['name'].split('.')[-1]} | {a['rel_error']:.8e} | {b['rel_error']:.8e} | {d:.2e} |")
        print(f"\nlargest relative difference {worst:.2e}")
profile = os.path.join(logs, "profile7b.log")
if os.path.exists(profile):
    lines = [l.strip() for l in open(profile)
             if re.search(r"statistics of block|: problem .* solve_layer|: checks .* error|alps: eigh", l)]
    print("\n## Debug split (profile7b)\n\n```\n" + "\n".join(lines) + "\n```")
EOF
tar -C "$logs" -czf "$out/logs.tar.gz" . 2>/dev/null
echo "summary: $summary"
cat "$summary"
exit 0
