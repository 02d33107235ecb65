#!/usr/bin/env bash
# `torchrun --no-python alps prune ...` as docs/distributed.md describes it, with the torchrun of PyPI's torch 2.11
# (the virtual environment scripts/setup.sh --cuda makes; Debian's torchrun 1.13 fails on Python 3.11): two ranks
# over Gloo give the single process's checkpoint (Wanda, whose masks the ranks' partial sums do not move here), and
# the report says who launched them. Exits 77 (skipped) where no such torchrun exists.
# Usage: torchrun_test.sh ALPS DATA_DIR
set -euo pipefail
alps=$1
data=$2
# torchrun itself is `python -m torch.distributed.run` (the venv's entry-point scripts name the directory it was
# built in, before setup.sh moved it into place).
python="${TORCH_VENV:-${ALPS_CACHE_DIR:-$HOME/.cache/alps}/venv-torch-2.11.0}/bin/python3"
"$python" -c "import torch.distributed.run" 2>/dev/null ||
  { echo "skipped: no torch in $python (scripts/setup.sh --cuda installs it)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

args=(prune --model "$data/models/stories260K-hf" --calib "$data/text/tinystories/tinystories.train.first200.txt"
      --nsamples 8 --seqlen 128 --device cpu --method wanda --sparsity 0.5 --json)
"$alps" "${args[@]}" --out "$tmp/one" >"$tmp/one.json" 2>"$tmp/one.err" || { cat "$tmp/one.err"; fail "one process"; }
torchrun() {
  OMP_NUM_THREADS=1 timeout 120 "$python" -m torch.distributed.run --standalone --nproc-per-node 2 --no-python "$alps" \
    "${args[@]}" --out "$tmp/two" >"$tmp/two.json" 2>"$tmp/two.err"
}
"$alps" --version >"$tmp/version"
if grep -q "^libtorch 1\." "$tmp/version"; then
  # Debian's libtorch 1.13 cannot join the store torchrun 2.x's agent serves: refused at once, saying what to use.
  if torchrun; then fail "the libtorch 1.13 build ran under torchrun 2.x"; fi
  grep -q "start the processes with \`alps prune --nproc N\`" "$tmp/two.err" || { cat "$tmp/two.err"; fail "no clear refusal"; }
  [ ! -e "$tmp/two" ] || fail "a refused run created its output"
  echo "ok (refused, as it must be with libtorch 1.13)"
  exit 0
fi
torchrun || { cat "$tmp/two.err"; fail "torchrun with 2 processes"; }
cmp -s "$tmp/one/model.safetensors" "$tmp/two/model.safetensors" || fail "the checkpoints differ"
# One result on stdout: rank 0's report (torchrun passes the workers' stdout through).
python3 - "$tmp/two.json" <<'PY' || fail "report: $(head -c 300 "$tmp/two.json")"
import json, sys
rep = json.load(open(sys.argv[1]))
d = rep["extra"]["distributed"]
assert d["world_size"] == 2 and d["backend"] == "gloo" and d["launcher"] == "torchrun", d
assert rep["complete"], rep
PY
echo "ok"
