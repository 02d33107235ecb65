#!/usr/bin/env bash
# Structured pruning side by side (docs/results.md): every structured method at each fraction of MLP neurons removed
# and at the fractions of query heads, each pruned model evaluated, the dense model beside them; the table comes from
# scripts/structured_summary.py. Restartable: a finished run's report in OUT/reports/ is kept and not redone.
#
# Usage: scripts/structured_sweep.sh --model DIR --out DIR [options] [-- ARGS passed to every alps prune]
#   --neurons LIST      fractions of MLP neurons removed (default 0.1,0.2,0.3,0.5)
#   --heads LIST        fractions of query heads removed (default 0.3333)
#   --methods LIST      structured methods; score-refit is score with refit=true (default osscar,obs,score,score-refit)
#   --nsamples N        calibration windows (default 128)
#   --seqlen N          tokens per calibration window (default 2048)
#   --eval LIST         datasets and zero-shot tasks (default wikitext2,ptb)
#   --eval-max-windows N, --eval-limit N   as alps prune takes them (default 0: all)
#   --alps BIN          the alps binary (default build/apps/alps/alps)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
alps=$root/build/apps/alps/alps
neurons=0.1,0.2,0.3,0.5 heads=0.3333 methods=osscar,obs,score,score-refit
nsamples=128 seqlen=2048 evals=wikitext2,ptb max_windows=0 limit=0 model= out=
extra=()
while (($#)); do
  case $1 in
    --model) model=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --neurons) neurons=$2; shift 2 ;;
    --heads) heads=$2; shift 2 ;;
    --methods) methods=$2; shift 2 ;;
    --nsamples) nsamples=$2; shift 2 ;;
    --seqlen) seqlen=$2; shift 2 ;;
    --eval) evals=$2; shift 2 ;;
    --eval-max-windows) max_windows=$2; shift 2 ;;
    --eval-limit) limit=$2; shift 2 ;;
    --alps) alps=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "structured_sweep.sh: unknown argument '$1' (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
done
[[ -n $model && -n $out ]] || { echo "structured_sweep.sh: --model and --out are required" >&2; exit 2; }
mkdir -p "$out/reports" "$out/logs"
common=(--nsamples "$nsamples" --seqlen "$seqlen" --eval "$evals" --eval-max-windows "$max_windows"
        --eval-limit "$limit" --json "${extra[@]}")

run() {  # NAME FLAGS...: one pruned model, its report kept, its checkpoint dropped once evaluated
  local name=$1; shift
  [[ -f $out/reports/$name.json ]] && { echo "kept: $name"; return; }
  echo "running: $name" >&2
  rm -rf "$out/run-$name"
  "$alps" prune --model "$model" --out "$out/run-$name" "$@" "${common[@]}" \
    >"$out/reports/$name.json.tmp" 2>"$out/logs/$name.log"
  mv "$out/reports/$name.json.tmp" "$out/reports/$name.json"
  rm -rf "$out/run-$name"
}

method_flags() {  # METHOD -> the flags that choose it
  case $1 in
    score-refit) echo "--structured-method score --structured-option refit=true" ;;
    *) echo "--structured-method $1" ;;
  esac
}

# The dense model, evaluated as the pruned ones are (a structured run of nothing is no run: alps eval's own numbers
# come from `prune --eval-dense` of the first run instead, kept in its report's eval_dense).
IFS=, read -ra ms <<<"$methods"
IFS=, read -ra ns <<<"$neurons"
IFS=, read -ra hs <<<"$heads"
first=1
for f in "${ns[@]}"; do
  for m in "${ms[@]}"; do
    dense=(); ((first)) && dense=(--eval-dense) && first=0
    # shellcheck disable=SC2046
    run "neurons-$f-$m" --remove-neurons "$f" $(method_flags "$m") "${dense[@]}"
  done
done
for f in "${hs[@]}"; do
  for m in "${ms[@]}"; do
    # shellcheck disable=SC2046
    run "heads-$f-$m" --remove-heads "$f" $(method_flags "$m")
  done
done
python3 "$root/scripts/structured_summary.py" "$out/reports" >"$out/summary.md"
cat "$out/summary.md"
