#!/usr/bin/env bash
# `alps prune` next to the authors' own Python pipelines, on this CPU: same model, same calibration windows, same
# WikiText-2 windows; prints a markdown table of wall time per phase and perplexity, with the ratio reference/alps.
#
# Usage (repository root):
#   scripts/bench_reference.sh BUILD MODEL CHECKOUT_ALPS CHECKOUT_SPARSEGPT \
#                              [NSAMPLES=128 SEQLEN=2048 SPARSITY=0.7 SEED=0]
#     BUILD               build directory holding apps/alps/alps
#     MODEL               Hugging Face checkpoint directory (LLaMA or OPT; the authors' code handles only those)
#     CHECKOUT_ALPS       github.com/mazumder-lab/ALPS: a work tree, a plain copy, or a bare git directory (the
#                         runs of record used commit 8af9e6b5c8b1b06a028bde6065e5c38829df3a19); "-" skips ALPS
#                         (alps --method alps vs alps-authors)
#     CHECKOUT_SPARSEGPT  github.com/IST-DASLab/sparsegpt likewise (runs of record: commit
#                         147d2159dc4f3e9f73e47b32c04d7b3708f44436); "-" skips it (alps --method sparsegpt vs
#                         sparsegpt-authors)
#     SPARSITY            0.7, 70% or N:M (2:4 = keep 2 of every 4, passed to alps as --pattern)
#   Environment: THREADS (default: all cores; both tools get the same), EVAL_WINDOWS (32; 0 = the whole test set),
#   EVAL_SEQLEN (512), BLOCKS (0 = all; K prunes only the first K blocks: alps --skip's the others, which it still
#   runs dense, so only solve times and perplexity compare then), PYTHON (/tmp/lmeval-venv/bin/python: torch and
#   transformers), DATA_DIR ($ALPS_DATA_DIR, else ../shared/data), ALPS_FLAGS / REF_FLAGS (extra flags for `alps
#   prune` / scripts/reference/run_reference.py, e.g. ALPS_FLAGS="--option eigh_double=true"), RESULTS (directory
#   for the JSON reports and logs; default a new /tmp/alps-bench-reference.XXXXXX, kept and printed).
#
# Full comparison of record (run on a quiet machine; from the tiny runs, roughly 15 + 10 + 5 minutes on 2 cores,
# dominated by the reference's ALPS solves, which do not depend on the number of calibration tokens):
#   M=~/.cache/alps/models/SmolLM2-135M-Instruct
#   A=~/src/ALPS        # checkout of github.com/mazumder-lab/ALPS at commit 8af9e6b5c8b1b06a028bde6065e5c38829df3a19
#   S=~/src/sparsegpt   # checkout of github.com/IST-DASLab/sparsegpt at 147d2159dc4f3e9f73e47b32c04d7b3708f44436
#   scripts/bench_reference.sh build $M $A - 16 512 0.7 0
#   scripts/bench_reference.sh build $M $A - 16 512 2:4 0
#   scripts/bench_reference.sh build /tmp/alps-opt125m-random - $S 16 512 0.5 0
#
# What runs: for each method, (1) `alps prune --stop-after 0` into a scratch directory, which draws the calibration
# windows and saves block 0's inputs (.alps-state/inputs-00000.safetensors), (2) the full `alps prune ... --eval
# wikitext2 --eval-seqlen EVAL_SEQLEN --eval-max-windows EVAL_WINDOWS`, (3) scripts/reference/run_reference.py with
# the authors' code, which compares its own block-0 inputs with (1) (bitwise, and for LLaMA the token ids recovered
# from them) and fails if the windows differ, then prunes and scores the same WikiText-2 windows with the authors'
# eval function.
#
# No code of the authors is in this repository: run_reference.py imports their modules from the checkout given here
# and changes at run time only what keeps them from running on this machine: 'cuda:0' literals become 'cpu' as their
# source is compiled (files untouched), torch.cuda.synchronize is a no-op, a stand-in `datasets` module gives their
# C4 loader the local C4 train file (no network here; ALPS's loader would read C4 validation), the tokenizer comes from
# the checkpoint's files (AutoTokenizer would drop SmolLM2's Digits pre-tokenizer), the model is cast to fp32, and
# LlamaDecoderLayer gets its rotary embedding computed from position_ids (transformers 4.57 no longer does that for
# callers written against 4.35). See the header of scripts/reference/run_reference.py.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
BUILD=$1 MODEL=$2 CK_ALPS=$3 CK_SGPT=$4
NSAMPLES=${5:-128} SEQLEN=${6:-2048} SPARSITY=${7:-0.7} SEED=${8:-0}
THREADS=${THREADS:-$(nproc)} EVAL_WINDOWS=${EVAL_WINDOWS:-32} EVAL_SEQLEN=${EVAL_SEQLEN:-512} BLOCKS=${BLOCKS:-0}
PYTHON=${PYTHON:-/tmp/lmeval-venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
DATA_DIR=${DATA_DIR:-${ALPS_DATA_DIR:-$HERE/../../shared/data}}
ALPS="$BUILD/apps/alps/alps"
[ -x "$ALPS" ] || { echo "no alps binary at $ALPS" >&2; exit 2; }
[ -f "$MODEL/config.json" ] || { echo "no checkpoint at $MODEL" >&2; exit 2; }
RESULTS=${RESULTS:-$(mktemp -d /tmp/alps-bench-reference.XXXXXX)}
mkdir -p "$RESULTS"

case $SPARSITY in
  *:*) PATTERN_FLAG=(--pattern "$SPARSITY") ;;
  *%) PATTERN_FLAG=(--sparsity "$(python3 -c "print(float('${SPARSITY%\%}') / 100)")") ;;
  *) PATTERN_FLAG=(--sparsity "$SPARSITY") ;;
esac
SKIP=()
if [ "$BLOCKS" -gt 0 ]; then
  NBLK=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['num_hidden_layers'])" "$MODEL/config.json")
  for ((b = BLOCKS; b < NBLK; b++)); do SKIP+=(--skip "*.layers.$b.*"); done
fi
COMMON=(--calib c4 --nsamples "$NSAMPLES" --seqlen "$SEQLEN" --seed "$SEED" --data-dir "$DATA_DIR" --device cpu)

bench_one() {  # METHOD IMPL CHECKOUT
  local method=$1 impl=$2 checkout=$3 tag="$1-${SPARSITY/:/of}"
  local scratch="$RESULTS/$tag.alps-inputs" out="$RESULTS/$tag.alps-out"
  # Only directories this script creates are removed later; leftovers of another run are not guessed at.
  for d in "$scratch" "$out"; do
    [ ! -e "$d" ] || { echo "$d exists (from an earlier run?): choose another RESULTS directory" >&2; exit 1; }
  done
  echo "== $tag: alps calibration capture (--stop-after 0)" >&2
  "$ALPS" --threads "$THREADS" prune --model "$MODEL" --out "$scratch" --method "$method" "${PATTERN_FLAG[@]}" \
    "${COMMON[@]}" --stop-after 0 --json >/dev/null 2>"$RESULTS/$tag.alps-inputs.log"

  echo "== $tag: alps prune" >&2
  local cmd=("$ALPS" --threads "$THREADS" prune --model "$MODEL" --out "$out" --method "$method" "${PATTERN_FLAG[@]}"
             "${COMMON[@]}" --eval wikitext2 --eval-seqlen "$EVAL_SEQLEN" --eval-max-windows "$EVAL_WINDOWS"
             "${SKIP[@]}" ${ALPS_FLAGS:-} --json)
  echo "+ ${cmd[*]}" >"$RESULTS/$tag.alps.log"
  local la0 t0 t1
  la0=$(cut -d' ' -f1-3 /proc/loadavg); t0=$(date +%s.%N)
  "${cmd[@]}" >"$RESULTS/$tag.alps.json" 2>>"$RESULTS/$tag.alps.log" ||
    { tail -20 "$RESULTS/$tag.alps.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 -c 'import json, sys; print(json.dumps({"wall": float(sys.argv[2]) - float(sys.argv[1]),
    "loadavg_before": sys.argv[3], "loadavg_after": sys.argv[4]}))' "$t0" "$t1" "$la0" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" >"$RESULTS/$tag.alps.wall.json"
  rm -rf "$out"  # the pruned checkpoint is not needed; its report is in $tag.alps.json

  echo "== $tag: $impl (the authors' code)" >&2
  local ref=("$PYTHON" "$HERE/reference/run_reference.py" --impl "$impl" --checkout "$checkout" --model "$MODEL"
             --method "$method" --sparsity "$SPARSITY" --nsamples "$NSAMPLES" --seqlen "$SEQLEN" --seed "$SEED"
             --eval-windows "$EVAL_WINDOWS" --eval-seqlen "$EVAL_SEQLEN" --threads "$THREADS" --data-dir "$DATA_DIR"
             --max-blocks "$BLOCKS" --check-alps-inputs "$scratch/.alps-state/inputs-00000.safetensors"
             ${REF_FLAGS:-} --json "$RESULTS/$tag.ref.json")
  echo "+ ${ref[*]}" >"$RESULTS/$tag.ref.log"
  "${ref[@]}" 2>>"$RESULTS/$tag.ref.log" || { tail -30 "$RESULTS/$tag.ref.log" >&2; exit 1; }
  rm -rf "$scratch"

  python3 - "$RESULTS/$tag" "$method" "$SPARSITY" "$BLOCKS" <<'PY'
import json, statistics, sys
base, method, sparsity, blocks = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
al = json.load(open(base + ".alps.json"))
aw = json.load(open(base + ".alps.wall.json"))
rf = json.load(open(base + ".ref.json"))
ap, rp = al["phase_seconds"], rf["phase_seconds"]
ev = next(e for e in al["eval"] if e.get("dataset") == "wikitext2")
rows = [
    ("calibration data: sample + tokenise (alps: + embed)", ap.get("calibration", 0), rp["calibration_data"]),
    ("statistics + forward (alps: statistics + pruned_forward)", ap.get("statistics", 0) + ap.get("pruned_forward", 0),
     rp["statistics_and_forward"]),
    ("solve phase (alps: + Gram check, error evaluation, pattern check)", ap.get("solve", 0), rp["solve"]),
    ("of which the methods' own solves (sum of per-layer seconds)",
     sum(l.get("seconds", 0) for l in al["layers"] if not l.get("skipped")), sum(l["seconds"] for l in rf["layers"])),
    ("**pruning total** (statistics + forward + solve phase)",
     ap.get("statistics", 0) + ap.get("pruned_forward", 0) + ap.get("solve", 0), rp["sequential_total"]),
    (f"WikiText-2 eval ({ev['windows']} x {ev['seqlen']})", ap.get("eval", 0), rp["eval"]),
    ("process wall (load, calibration, prune, eval, write)", aw["wall"],
     rf["total_wall_seconds"] - rp["harness_overhead"]),
]
chk = rf.get("calibration_check") or {}
print(f"### {method} {sparsity}: alps prune vs {rf['impl']} @ {rf['checkout']['commit'][:12]}")
print()
print(f"Model {rf['model']['path']} ({rf['model']['family']}, {rf['model']['blocks']} blocks"
      + (f", first {blocks} pruned" if blocks else "") + f"); calibration {rf['calibration']['nsamples']} x "
      f"{rf['calibration']['seqlen']} tokens of {rf['calibration']['file']} (seed {rf['calibration']['seed']}); "
      f"threads {rf['software']['threads']} each; torch {rf['software']['torch']}, transformers "
      f"{rf['software']['transformers']}; alps {al['software'].get('alps')} "
      f"(libtorch {al['software'].get('libtorch')}, threads {al['software'].get('thread_pools')})")
print()
print("Calibration windows: " + ("**identical**" if chk.get("identical") else "**DIFFERENT**") +
      f" ({chk.get('windows_bitwise_equal')}/{chk.get('windows')} windows of block-0 inputs bitwise equal, "
      f"max |diff| {chk.get('max_abs_diff')}" +
      (f"; token ids recovered from alps's inputs equal in {chk['token_ids_equal_windows']}/{chk['windows']} windows"
       if "token_ids_equal_windows" in chk else "") + ")")
print()
print("| phase | alps (s) | reference (s) | reference / alps |")
print("|---|---|---|---|")
for name, a, r in rows:
    print(f"| {name} | {a:.2f} | {r:.2f} | {r / a:.2f} |" if a > 0 else f"| {name} | {a:.2f} | {r:.2f} | - |")
extra = ap.get("save_state", 0) + ap.get("save", 0)
print(f"| alps only: resume state + checkpoint write | {extra:.2f} | - | - |")
rppl = rf["perplexity"]["ppl"]
print(f"| **WikiText-2 perplexity** ({ev['windows']} x {ev['seqlen']}) | {ev['perplexity']:.4f} | {rppl:.4f} | "
      f"{rppl / ev['perplexity']:.4f} |")
al_layers = [l for l in al["layers"] if not l.get("skipped")]
if al_layers and rf["layers"] and "rel_error" in rf["layers"][0]:
    ma = statistics.mean(l["rel_error"] for l in al_layers)
    mr = statistics.mean(l["rel_error"] for l in rf["layers"])
    print(f"| mean relative layer error (undamped G) | {ma:.4e} | {mr:.4e} | {mr / ma:.4f} |")
asp = (sum(l["sparsity"] * l["shape"][0] * l["shape"][1] for l in al_layers)
       / max(1, sum(l["shape"][0] * l["shape"][1] for l in al_layers)))
print(f"| achieved sparsity (pruned linears) | {asp:.4f} | "
      f"{rf['achieved_sparsity']:.4f} | - |")
print()
# per linear kind
kinds = {}
for src, layers in (("alps", al_layers), ("ref", rf["layers"])):
    for l in layers:
        k = l["name"].split(".")[-1]
        kinds.setdefault(k, {"alps": [], "ref": []})[src].append(l)
print("| linear kind | alps s/layer | ref s/layer | ratio | alps rel_error | ref rel_error | alps iters | ref iters |")
print("|---|---|---|---|---|---|---|---|")
def mean(xs, key):
    v = [x[key] for x in xs if x.get(key) is not None]
    return statistics.mean(v) if v else float("nan")
for k, d in kinds.items():
    sa, sr = mean(d["alps"], "seconds"), mean(d["ref"], "seconds")
    print(f"| {k} | {sa:.3f} | {sr:.3f} | {sr / sa if sa else float('nan'):.2f} | "
          f"{mean(d['alps'], 'rel_error'):.3e} | {mean(d['ref'], 'rel_error'):.3e} | "
          f"{mean(d['alps'], 'iterations'):.1f} | {mean(d['ref'], 'iterations'):.1f} |")
print()
if blocks:
    print(f"BLOCKS={blocks}: alps still runs the blocks it skips (dense statistics and forward passes) while the "
          "reference stops after the pruned ones, so only the solve rows, the per-kind table and the perplexity "
          "compare.")
if rf["impl"] == "alps-authors":
    print("The reference's calibration row includes the 256 C4 validation windows its loader (get_c4_val) always draws "
          "after the calibration ones (they go unused here).")
print(f"load average before/after: alps {aw['loadavg_before']} / {aw['loadavg_after']}; reference "
      f"{' '.join(f'{x:.2f}' for x in rf['hardware']['loadavg_before'])} / "
      f"{' '.join(f'{x:.2f}' for x in rf['hardware']['loadavg_after'])}")
print()
PY
}

[ "$CK_ALPS" = - ] || bench_one alps alps-authors "$CK_ALPS"
[ "$CK_SGPT" = - ] || bench_one sparsegpt sparsegpt-authors "$CK_SGPT"
echo "reports and logs: $RESULTS" >&2
