#!/usr/bin/env bash
# A batch of `alps prune` runs: every method at every sparsity, each evaluated, plus the dense model, summarised as
# tables (markdown + JSON) and a plot of perplexity against sparsity per method.
#
# Restartable: a finished run's report is kept in SWEEP/reports/ and never redone; an interrupted run is continued
# with `alps prune --resume`; a sweep directory remembers its settings (sweep.json) and a rerun with other settings
# is refused, naming the difference. One sweep per directory at a time (flock). With --archive, the finished reports
# also live in a second directory (one under version control, say), so that a sweep started on a fresh machine from
# that archive redoes nothing that finished anywhere.
#
# Usage: scripts/sweep.sh --model DIR --out SWEEP [options]
#   --methods LIST        methods (default alps,sparsegpt,wanda,dsnot,magnitude)
#   --patterns LIST       sparsities and N:M patterns (default 0.5,0.6,0.7,0.8,2:4); the runs go pattern by
#                         pattern in this order (every method at the first, then the next), the tables by sparsity
#   --nsamples N          calibration windows (default 128)
#   --seqlen N            tokens per calibration window (default 2048)
#   --calib SRC           calibration text (default c4)
#   --eval LIST           evaluation datasets/tasks (default wikitext2,ptb)
#   --eval-seqlen N       evaluation window (default 0: min(2048, the model's positions))
#   --eval-max-windows N  perplexity over at most N windows per dataset (default 0: all)
#   --eval-limit N        zero-shot tasks over their first N documents (default 0: all)
#   --data-dir DIR        data directory for calibration and evaluation (default: alps's own rule)
#   --alps BIN            the alps binary (default build/apps/alps/alps)
#   --drop-checkpoints    delete each run's pruned checkpoint once its report is kept (the runs of a 7B sweep
#                         would not fit on most disks); the reports keep every figure
#   --title TEXT          title of the tables and the plot (default: the model directory's name)
#   --archive DIR         keep a copy of sweep.json, every finished report and their summary in DIR as well;
#                         reports found there and not in SWEEP are taken over instead of being rerun (DIR must hold
#                         the same settings, paths compared by name and the model by its config.json's hash, or
#                         nothing yet)
#   -- ARGS...            passed to every `alps prune` (e.g. --batch-size 4 --threads 2); part of the settings
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
model="" out="" methods="alps,sparsegpt,wanda,dsnot,magnitude" patterns="0.5,0.6,0.7,0.8,2:4"
nsamples=128 seqlen=2048 calib=c4 eval=wikitext2,ptb eval_seqlen=0 eval_max_windows=0 eval_limit=0
data_dir="" alps="$repo/build/apps/alps/alps" drop=0 title="" archive="" extra=()

die() { echo "sweep: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --methods) methods=$2; shift 2 ;;
    --patterns) patterns=$2; shift 2 ;;
    --nsamples) nsamples=$2; shift 2 ;;
    --seqlen) seqlen=$2; shift 2 ;;
    --calib) calib=$2; shift 2 ;;
    --eval) eval=$2; shift 2 ;;
    --eval-seqlen) eval_seqlen=$2; shift 2 ;;
    --eval-max-windows) eval_max_windows=$2; shift 2 ;;
    --eval-limit) eval_limit=$2; shift 2 ;;
    --data-dir) data_dir=$2; shift 2 ;;
    --alps) alps=$2; shift 2 ;;
    --drop-checkpoints) drop=1; shift ;;
    --title) title=$2; shift 2 ;;
    --archive) archive=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "sweep: unknown option '$1'" >&2; usage ;;
  esac
done
[ -n "$model" ] && [ -n "$out" ] || { echo "sweep: --model and --out are required" >&2; usage; }
[ -x "$alps" ] || die "alps binary $alps not found or not executable (build it, or pass --alps BIN)"
# The data directory alps itself uses (--data-dir, else $ALPS_DATA_DIR, else the one it was built or installed
# with), whatever the working directory: `alps --version` names it.
effective_data_dir=$data_dir
if [ -z "$effective_data_dir" ]; then
  effective_data_dir=$("$alps" --version | sed -n 's/^data directory: \(.*\) ([^()]*)$/\1/p')
  [ -n "$effective_data_dir" ] || die "could not read the data directory from \`$alps --version\`"
fi
# A model name without a slash is one of the data directory's models, as `alps prune --model` takes it.
if [ ! -e "$model" ] && [[ "$model" != */* ]] && [ -d "$effective_data_dir/models/$model" ]; then
  model="$effective_data_dir/models/$model"
fi
[ -f "$model/config.json" ] || die "--model $model: no config.json there (nor a model of that name in $effective_data_dir/models)"
command -v python3 >/dev/null || die "python3 is needed for the summary tables"
[ -n "$title" ] || title=$(basename "$(cd "$model" && pwd)")

# The settings a sweep directory is bound to: rerunning with other settings would mix two sweeps in one table. The
# data directory (alps's, above) is, like a calibration file, recorded as an absolute path: the same words in another
# directory or with another environment are other data. The model is also known by its config.json's hash, which an
# archive compares where paths differ between machines.
settings=$(python3 - "$model" "$methods" "$patterns" "$nsamples" "$seqlen" "$calib" "$eval" "$eval_seqlen" \
  "$eval_max_windows" "$eval_limit" "$title" "$effective_data_dir" "${extra[@]}" <<'PY'
import hashlib, json, os, sys
a = sys.argv[1:]
calib = os.path.realpath(a[5]) if os.path.exists(a[5]) else a[5]  # a file, or a name alps resolves (c4)
config_sha = hashlib.sha256(open(os.path.join(a[0], "config.json"), "rb").read()).hexdigest()
print(json.dumps({"model": os.path.realpath(a[0]), "model_config_sha256": config_sha, "methods": a[1].split(","),
                  "patterns": a[2].split(","), "nsamples": int(a[3]), "seqlen": int(a[4]), "calib": calib,
                  "eval": a[6].split(","), "eval_seqlen": int(a[7]), "eval_max_windows": int(a[8]),
                  "eval_limit": int(a[9]), "title": a[10], "data_dir": os.path.realpath(a[11]),
                  "prune_args": a[12:]}, indent=1, sort_keys=True))
PY
) || die "bad settings (numbers expected for --nsamples, --seqlen, --eval-seqlen, --eval-max-windows, --eval-limit)"

# Checks that DIR's sweep.json holds these settings, naming each difference; settings recorded only by later
# versions of this script are taken from this run and written in. MODE archive compares paths (model, data
# directory, calibration file) by their last component: an archive travels between machines, the model's identity
# then resting on its config.json's hash.
check_settings() {  # DIR MODE
  python3 - "$1/sweep.json" "$settings" "$2" <<'PY' || die "$1 was made by a sweep with other settings (above); use a new directory"
import json, os, sys
path, mode = sys.argv[1], sys.argv[3]
old, new = json.load(open(path)), json.loads(sys.argv[2])
# Sweeps made before data_dir was recorded (and with calib as written) take this run's resolution of them.
if "data_dir" not in old and os.path.exists(old["calib"]):
    old["calib"] = os.path.realpath(old["calib"])
added = [k for k in ("data_dir", "model_config_sha256") if k not in old]
for k in added:
    old[k] = new[k]
def same(k):
    if mode == "archive" and k in ("model", "data_dir", "calib") and os.path.isabs(str(new.get(k))):
        return os.path.basename(str(old.get(k))) == os.path.basename(str(new.get(k)))
    return old.get(k) == new.get(k)
diff = [k for k in sorted(set(old) | set(new)) if not same(k)]
for k in diff:
    print(f"sweep: setting {k}: {json.dumps(old.get(k))} -> {json.dumps(new.get(k))}", file=sys.stderr)
if added and not diff:
    with open(path + ".tmp", "w") as f:
        f.write(json.dumps(old, indent=1, sort_keys=True) + "\n")
    os.replace(path + ".tmp", path)
    print(f"sweep: {path} now records {', '.join(added)}", file=sys.stderr)
sys.exit(1 if diff else 0)
PY
}

# A directory alps may use as a sweep's: new, empty, or holding a sweep's settings (a settings file left half
# written by a killed first run counts as empty).
check_sweep_dir() {  # DIR FLAG
  if [ -e "$1" ] && [ ! -d "$1" ]; then die "$2 $1 is not a directory"; fi
  if [ -d "$1" ] && [ ! -f "$1/sweep.json" ] && [ -n "$(ls -A "$1" | grep -vx 'sweep.json.tmp')" ]; then
    die "$2 $1 holds files that are not a sweep's; choose a new or empty directory"
  fi
}

record_settings() {  # DIR
  if [ -f "$1/sweep.json" ]; then return; fi
  printf '%s\n' "$settings" >"$1/sweep.json.tmp" && mv "$1/sweep.json.tmp" "$1/sweep.json"
}

# Keeps a file only when it is whole: written beside, then renamed.
keep_report() {  # SRC DEST
  cp "$1" "$2.tmp" && mv "$2.tmp" "$2"
}

# Everything is checked before anything is created.
check_sweep_dir "$out" --out
if [ -f "$out/sweep.json" ]; then check_settings "$out" here; fi
if [ -n "$archive" ]; then
  check_sweep_dir "$archive" --archive
  if [ -f "$archive/sweep.json" ]; then check_settings "$archive" archive; fi
fi
mkdir -p "$out/reports" "$out/runs" "$out/logs"
exec 9>"$out/.sweep.lock"
flock -n 9 || die "another sweep is running in $out"
record_settings "$out"
if [ -n "$archive" ]; then
  mkdir -p "$archive"
  record_settings "$archive"
  mkdir -p "$archive/reports"
  # Each side gets the finished reports it lacks. Two different reports of one run would put two results in one
  # table: refused, naming both.
  for f in "$archive"/reports/*.json "$out"/reports/*.json; do
    [ -f "$f" ] || continue
    name=${f##*/}
    if [ -f "$archive/reports/$name" ] && [ -f "$out/reports/$name" ]; then
      cmp -s "$archive/reports/$name" "$out/reports/$name" ||
        die "$archive/reports/$name and $out/reports/$name are different results of one run; move one away"
    elif [ -f "$archive/reports/$name" ]; then
      keep_report "$archive/reports/$name" "$out/reports/$name"
    else
      keep_report "$out/reports/$name" "$archive/reports/$name"
    fi
  done
fi

IFS=, read -r -a method_list <<<"$methods"
IFS=, read -r -a pattern_list <<<"$patterns"
total=$(( ${#method_list[@]} * ${#pattern_list[@]} + 1 ))
done_count=0
start=$(date +%s)

progress() {
  done_count=$((done_count + 1))
  local now elapsed
  now=$(date +%s); elapsed=$((now - start))
  echo "sweep: [$done_count/$total] $1 ($2; sweep elapsed ${elapsed}s)" >&2
}

# A report finished in SWEEP goes to the archive at once, and the archive's summary follows it, so that the archive
# stays consistent whenever the sweep stops.
archive_report() {  # NAME
  if [ -z "$archive" ]; then return; fi
  keep_report "$out/reports/$1" "$archive/reports/$1"
  python3 "$repo/scripts/sweep_summary.py" "$archive" >/dev/null 2>&1 ||
    echo "sweep: the summary of $archive failed (the reports are kept; scripts/sweep_summary.py $archive says why)" >&2
}

# Dense baseline: the same evaluation on the unpruned model.
if [ -f "$out/reports/dense.json" ]; then
  progress dense "kept from an earlier run"
else
  # `alps eval` takes datasets (--ppl) and tasks (--tasks) apart; alps itself says which names are tasks.
  known_tasks=$("$alps" tasks --json | python3 -c 'import json,sys; print(" ".join(t["name"] for t in json.load(sys.stdin)))')
  ppl=() tasks=()
  IFS=, read -r -a evals <<<"$eval"
  for e in "${evals[@]}"; do
    if [[ " $known_tasks all " == *" $e "* ]]; then tasks+=("$e"); else ppl+=("$e"); fi
  done
  cmd=("$alps" eval --model "$model" --json)
  [ -z "$data_dir" ] || cmd+=(--data-dir "$data_dir")
  # The window flags belong to perplexity: alps refuses them in a run of tasks alone.
  [ ${#ppl[@]} -eq 0 ] ||
    cmd+=(--ppl "$(IFS=,; echo "${ppl[*]}")" --seqlen "$eval_seqlen" --max-windows "$eval_max_windows")
  [ ${#tasks[@]} -eq 0 ] || cmd+=(--tasks "$(IFS=,; echo "${tasks[*]}")" --limit "$eval_limit")
  echo "+ ${cmd[*]}" >"$out/logs/dense.log"
  t0=$(date +%s)
  "${cmd[@]}" >"$out/reports/dense.json.tmp" 2>>"$out/logs/dense.log" ||
    die "dense evaluation failed; see $out/logs/dense.log"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["wall_seconds"]=int(sys.argv[2]); json.dump(d,open(sys.argv[1],"w"),indent=1)' \
    "$out/reports/dense.json.tmp" "$(( $(date +%s) - t0 ))"
  mv "$out/reports/dense.json.tmp" "$out/reports/dense.json"
  archive_report dense.json
  progress dense "$(( $(date +%s) - t0 ))s"
fi

for pattern in "${pattern_list[@]}"; do
  for method in "${method_list[@]}"; do
    run="$method-${pattern/:/of}"
    report="$out/reports/$run.json"
    if [ -f "$report" ]; then progress "$run" "kept from an earlier run"; continue; fi
    dir="$out/runs/$run"
    cmd=("$alps" prune --model "$model" --out "$dir" --method "$method" --calib "$calib" --nsamples "$nsamples"
         --seqlen "$seqlen" --eval "$eval" --eval-seqlen "$eval_seqlen" --eval-max-windows "$eval_max_windows"
         --eval-limit "$eval_limit")
    if [[ "$pattern" == *:* ]]; then cmd+=(--pattern "$pattern"); else cmd+=(--sparsity "$pattern"); fi
    [ -z "$data_dir" ] || cmd+=(--data-dir "$data_dir")
    cmd+=("${extra[@]}")
    # alps continues what it saved; a directory with a finished report only needs its report kept.
    if [ -f "$dir/alps-report.json" ] && [ ! -e "$dir/.alps-state" ]; then
      :
    else
      [ -d "$dir" ] && cmd+=(--resume)
      echo "+ ${cmd[*]}" >>"$out/logs/$run.log"
      "${cmd[@]}" >/dev/null 2>>"$out/logs/$run.log" || die "$run failed; see $out/logs/$run.log"
    fi
    keep_report "$dir/alps-report.json" "$report"
    archive_report "$run.json"
    [ "$drop" -eq 0 ] || rm -rf -- "$dir"
    progress "$run" "done"
  done
done

python3 "$repo/scripts/sweep_summary.py" "$out"
echo "sweep: tables in $out/summary.md and $out/summary.json" >&2
if [ -n "$archive" ]; then
  python3 "$repo/scripts/sweep_summary.py" "$archive" >/dev/null
  echo "sweep: reports and their summary kept in $archive" >&2
fi
