#!/usr/bin/env bash
# scripts/sweep.sh as a batch user runs it, on stories260K with tiny settings: a sweep killed inside a run resumes
# that run and reuses the finished ones; a finished sweep rerun does nothing and changes nothing; a rerun with other
# settings and a directory that is not a sweep's are refused, touching nothing; an archive (a second home of the
# reports) seeds a fresh sweep directory; a sweep scored by zero-shot tasks alone runs.
# Usage: sweep_test.sh ALPS_BIN DATA_DIR      (exit 77: skipped, python3 missing)
set -euo pipefail
alps=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") data=$2
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v python3 >/dev/null || { echo "SKIP: python3 not found (the sweep's summary needs it)"; exit 77; }
model="$data/models/stories260K-hf"
[ -f "$model/config.json" ] || { echo "FAIL: $model missing"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

sweep=("$repo/scripts/sweep.sh" --model "$model" --alps "$alps" --data-dir "$data" --methods magnitude,wanda
       --patterns 0.5,2:4 --nsamples 4 --seqlen 64 --eval wikitext2 --eval-max-windows 1)

# 1. Killed inside the first pruning run (magnitude 50%), after its first block was saved: the sweep stops.
if ALPS_TEST_FAULT="crash:state-json-saved@2" "${sweep[@]}" --out "$tmp/s" 2>"$tmp/err1"; then
  fail "the sweep survived a crash of alps"
fi
# Each run's own alps process counts its saves: the first run dies, so only dense has a report.
ls "$tmp/s/reports" >"$tmp/kept1"
grep -qx dense.json "$tmp/kept1" || fail "dense report missing after the crash: $(cat "$tmp/kept1")"
[ "$(wc -l <"$tmp/kept1")" -eq 1 ] || fail "reports of unfinished runs kept: $(cat "$tmp/kept1")"
[ -e "$tmp/s/runs/magnitude-0.5/.alps-state" ] || fail "the killed run left no resume state"

# 2. Rerun: the killed run resumes (alps says so in its log), the rest run, the summary lists all four.
"${sweep[@]}" --out "$tmp/s" >"$tmp/out2" 2>"$tmp/err2" || { cat "$tmp/err2"; fail "resumed sweep failed"; }
grep -q "kept from an earlier run" "$tmp/err2" || fail "dense was not reused: $(cat "$tmp/err2")"
grep -qi "resum" "$tmp/s/logs/magnitude-0.5.log" || fail "the killed run was not resumed: $(cat "$tmp/s/logs/magnitude-0.5.log")"
for run in magnitude-0.5 magnitude-2of4 wanda-0.5 wanda-2of4; do
  [ -f "$tmp/s/reports/$run.json" ] || fail "report of $run missing"
done
python3 - "$tmp/s/summary.json" <<'PY' || fail "summary wrong"
import json, sys
s = json.load(open(sys.argv[1]))
assert len(s["runs"]) == 4, s["runs"]
assert "wikitext2 ppl" in s["dense"]["metrics"]
for r in [s["dense"]] + s["runs"]:  # each result names the alps that computed it
    assert r["computed_with"].startswith("alps ") and "(source " in r["computed_with"], r["computed_with"]
for r in s["runs"]:
    ppl = r["metrics"]["wikitext2 ppl"]
    # A pruned model is worse than the dense one on the text it was not calibrated on.
    assert ppl > s["dense"]["metrics"]["wikitext2 ppl"], r
    want = 0.5
    assert abs(r["linear_sparsity"] - want) < 0.01, r
PY
grep -q "| magnitude |" "$tmp/s/summary.md" || fail "summary.md has no magnitude row"
grep -q "^Computed with: alps .*(5 of the 5 reports)" "$tmp/s/summary.md" || fail "summary.md does not say what computed it"

# 3. The finished sweep rerun: nothing is redone, no report changes.
sum_before=$(cd "$tmp/s/reports" && sha256sum ./*.json)
"${sweep[@]}" --out "$tmp/s" >/dev/null 2>"$tmp/err3" || fail "rerun of a finished sweep failed"
[ "$(grep -c "kept from an earlier run" "$tmp/err3")" -eq 5 ] || fail "rerun redid work: $(cat "$tmp/err3")"
[ "$sum_before" = "$(cd "$tmp/s/reports" && sha256sum ./*.json)" ] || fail "rerun changed a report"

# 4. Other settings on the same directory: refused, naming the setting; nothing changes.
before=$(find "$tmp/s" -type f ! -name .sweep.lock -exec sha256sum {} + | sort)
if "${sweep[@]}" --out "$tmp/s" --nsamples 8 2>"$tmp/err4"; then fail "a sweep with other settings was accepted"; fi
grep -q "setting nsamples: 4 -> 8" "$tmp/err4" || fail "refusal does not name the setting: $(cat "$tmp/err4")"
[ "$before" = "$(find "$tmp/s" -type f ! -name .sweep.lock -exec sha256sum {} + | sort)" ] || fail "refusal changed files"
# Another data directory under the same flags is other data (another calibration and test text).
if "${sweep[@]}" --out "$tmp/s" --data-dir "$tmp/elsewhere" 2>"$tmp/err4b"; then fail "other data was accepted"; fi
grep -q "setting data_dir" "$tmp/err4b" || fail "refusal does not name the data directory: $(cat "$tmp/err4b")"
[ "$before" = "$(find "$tmp/s" -type f ! -name .sweep.lock -exec sha256sum {} + | sort)" ] || fail "refusal changed files"
# A sweep directory written before the data directory was recorded continues, and records it from then on.
cp -r "$tmp/s" "$tmp/old"
python3 -c 'import json,sys; p=sys.argv[1]; d=json.load(open(p)); d.pop("data_dir"); json.dump(d,open(p,"w"))' \
  "$tmp/old/sweep.json"
"${sweep[@]}" --out "$tmp/old" >/dev/null 2>"$tmp/err4c" || fail "an older sweep directory was refused: $(cat "$tmp/err4c")"
grep -q '"data_dir"' "$tmp/old/sweep.json" || fail "the older sweep directory did not record its data directory"

# The summary of a sweep whose title and directory hold quotes: tables always, the plot where gnuplot runs.
cp -r "$tmp/s" "$tmp/it's"
python3 -c 'import json,sys; p=sys.argv[1]; d=json.load(open(p)); d["title"]="Bob'"'"'s model"; json.dump(d,open(p,"w"))' \
  "$tmp/it's/sweep.json"
python3 "$repo/scripts/sweep_summary.py" "$tmp/it's" >/dev/null 2>"$tmp/err4d" || fail "summary failed: $(cat "$tmp/err4d")"
grep -q "# Bob's model: sweep summary" "$tmp/it's/summary.md" || fail "summary.md not written"
if command -v gnuplot >/dev/null; then
  [ -s "$tmp/it's/wikitext2_ppl.png" ] || fail "no plot: $(cat "$tmp/err4d")"
fi

# 5. An archive (a second home for the reports, e.g. under version control): a finished sweep fills it; a fresh
#    sweep directory started from it redoes nothing, also with the model at another path (another machine); other
#    settings, another model, two different reports of one run and foreign files there are refused.
"${sweep[@]}" --out "$tmp/s" --archive "$tmp/arch" >/dev/null 2>"$tmp/err5a" || fail "archiving failed: $(cat "$tmp/err5a")"
[ "$sum_before" = "$(cd "$tmp/arch/reports" && sha256sum ./*.json)" ] || fail "the archive does not hold the reports"
[ -f "$tmp/arch/summary.md" ] && [ -f "$tmp/arch/sweep.json" ] || fail "the archive lacks the summary or settings"
"${sweep[@]}" --out "$tmp/fresh" --archive "$tmp/arch" >/dev/null 2>"$tmp/err5b" || fail "sweep from an archive failed"
[ "$(grep -c "kept from an earlier run" "$tmp/err5b")" -eq 5 ] || fail "a sweep from the archive redid work: $(cat "$tmp/err5b")"
[ "$sum_before" = "$(cd "$tmp/fresh/reports" && sha256sum ./*.json)" ] || fail "reports taken from the archive differ"
arch_before=$(find "$tmp/arch" -type f -exec sha256sum {} + | sort)
if "${sweep[@]}" --out "$tmp/other" --archive "$tmp/arch" --nsamples 8 2>"$tmp/err5c"; then
  fail "an archive with other settings was accepted"
fi
grep -q "setting nsamples: 4 -> 8" "$tmp/err5c" || fail "refusal does not name the setting: $(cat "$tmp/err5c")"
[ "$arch_before" = "$(find "$tmp/arch" -type f -exec sha256sum {} + | sort)" ] || fail "refusal changed the archive"
[ ! -e "$tmp/other" ] || fail "a refused sweep created its --out"
# The model copied elsewhere (the archive checked out on another machine): the same config, the same sweep.
mkdir "$tmp/moved" && cp -r "$model" "$tmp/moved/"
"${sweep[@]}" --model "$tmp/moved/stories260K-hf" --out "$tmp/fresh2" --archive "$tmp/arch" >/dev/null 2>"$tmp/err5e" ||
  fail "the archive was refused for a model at another path: $(cat "$tmp/err5e")"
[ "$(grep -c "kept from an earlier run" "$tmp/err5e")" -eq 5 ] || fail "the moved model redid work: $(cat "$tmp/err5e")"
# Another model under the same directory name is another sweep.
python3 -c 'import json,sys; p=sys.argv[1]; d=json.load(open(p)); d["vocab_size"]+=1; json.dump(d,open(p,"w"))' \
  "$tmp/moved/stories260K-hf/config.json"
if "${sweep[@]}" --model "$tmp/moved/stories260K-hf" --out "$tmp/fresh3" --archive "$tmp/arch" 2>"$tmp/err5f"; then
  fail "an archive of another model was accepted"
fi
grep -q "setting model_config_sha256" "$tmp/err5f" || fail "refusal does not name the model: $(cat "$tmp/err5f")"
# Two different results of one run: which one is right is the user's call.
cp -r "$tmp/fresh" "$tmp/fresh4"
python3 -c 'import json,sys; p=sys.argv[1]; d=json.load(open(p)); d["phase_seconds"]["solve"]+=1; json.dump(d,open(p,"w"))' \
  "$tmp/fresh4/reports/wanda-0.5.json"
if "${sweep[@]}" --out "$tmp/fresh4" --archive "$tmp/arch" 2>"$tmp/err5g"; then fail "two different reports were merged"; fi
grep -q "different results of one run" "$tmp/err5g" || fail "unclear refusal: $(cat "$tmp/err5g")"
[ "$arch_before" = "$(find "$tmp/arch" -type f -exec sha256sum {} + | sort)" ] || fail "a refusal changed the archive"
mkdir "$tmp/notarch" && echo "keep me" >"$tmp/notarch/notes.txt"
if "${sweep[@]}" --out "$tmp/fresh" --archive "$tmp/notarch" 2>"$tmp/err5d"; then fail "a foreign archive was accepted"; fi
[ "$(ls -A "$tmp/notarch")" = notes.txt ] || fail "the foreign archive changed: $(ls -A "$tmp/notarch")"

# 6. A directory holding someone else's files is not a sweep's: refused, untouched.
mkdir "$tmp/user" && echo "keep me" >"$tmp/user/notes.txt"
if "${sweep[@]}" --out "$tmp/user" 2>"$tmp/err5"; then fail "a foreign directory was accepted"; fi
grep -q "not a sweep's" "$tmp/err5" || fail "unclear refusal: $(cat "$tmp/err5")"
[ "$(ls -A "$tmp/user")" = notes.txt ] || fail "the foreign directory changed: $(ls -A "$tmp/user")"
# 7. A sweep scored by zero-shot tasks alone (no perplexity dataset): the dense run and the pruned one. The task's
#    file (two RTE rows of the raw dataset fields) sits in a data directory that holds the rest by links.
mkdir -p "$tmp/data/eval/rte"
data_abs=$(cd "$data" && pwd)
for entry in "$data_abs"/*; do ln -s "$entry" "$tmp/data/${entry##*/}"; done
printf '%s\n' '{"idx": 0, "sentence1": "Lily saw a big red ball in the park.", "sentence2": "Lily saw a ball.", "label": 0}' \
  '{"idx": 1, "sentence1": "Tom was sad because it rained all day.", "sentence2": "Tom was happy.", "label": 1}' |
  gzip >"$tmp/data/eval/rte/rte_validation.jsonl.gz"
"$repo/scripts/sweep.sh" --model "$model" --alps "$alps" --data-dir "$tmp/data" --methods magnitude --patterns 0.5 \
  --nsamples 4 --seqlen 64 --eval rte --eval-limit 2 --out "$tmp/tasks" >/dev/null 2>"$tmp/err7" ||
  fail "a sweep of tasks alone failed: $(cat "$tmp/err7") $(cat "$tmp/tasks/logs/"*.log)"
python3 - "$tmp/tasks/summary.json" <<'PY' || fail "task sweep summary wrong"
import json, sys
s = json.load(open(sys.argv[1]))
assert "rte acc" in s["dense"]["metrics"], s["dense"]
assert len(s["runs"]) == 1 and "rte acc" in s["runs"][0]["metrics"], s["runs"]
PY
# 8. From any folder, without --data-dir: the sweep takes alps's own data directory ($ALPS_DATA_DIR here) and the
#    model by its name there, as `alps prune` does; a rerun from a third folder is the same sweep. The wall-time table
#    of a tiny model's runs shows their fractions of a second, not "0 (0)".
mkdir "$tmp/cwd1" "$tmp/cwd2"
anywhere=("$repo/scripts/sweep.sh" --model stories260K-hf --alps "$alps" --methods magnitude --patterns 0.5
          --nsamples 4 --seqlen 64 --eval wikitext2 --eval-max-windows 1 --out "$tmp/anywhere")
(cd "$tmp/cwd1" && ALPS_DATA_DIR="$data_abs" "${anywhere[@]}") >"$tmp/out8" 2>"$tmp/err8" ||
  fail "a sweep from another folder failed: $(cat "$tmp/err8")"
python3 - "$tmp/anywhere/sweep.json" "$data_abs" <<'PY' || fail "sweep.json records another data directory"
import json, os, sys
s = json.load(open(sys.argv[1]))
assert s["data_dir"] == os.path.realpath(sys.argv[2]), s["data_dir"]
assert s["model"] == os.path.realpath(os.path.join(sys.argv[2], "models", "stories260K-hf")), s["model"]
PY
(cd "$tmp/cwd2" && ALPS_DATA_DIR="$data_abs" "${anywhere[@]}") >/dev/null 2>"$tmp/err8b" ||
  fail "the rerun from a third folder was refused: $(cat "$tmp/err8b")"
grep -q "kept from an earlier run" "$tmp/err8b" || fail "the rerun redid work: $(cat "$tmp/err8b")"
grep -A4 "wall time" "$tmp/anywhere/summary.md" | grep -Eq '^\| magnitude \| [0-9]+\.[0-9]+ \([0-9]+\.[0-9]+\) \|$' ||
  fail "the wall-time table rounds the runs away: $(grep -A4 "wall time" "$tmp/anywhere/summary.md")"
echo "sweep test passed"
