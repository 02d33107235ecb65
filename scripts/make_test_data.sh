#!/usr/bin/env bash
# Rebuilds tests/data/real, the real data committed with the tests, from a data directory (default ../shared/data;
# tests/data/real/README.md gives each file's source and licence). Files are copied unchanged, except one excerpt:
# the first 200 stories of TinyStories train, which is all the pruning tests need as calibration text. The result is
# checked against tests/data/real/SHA256SUMS, so a rerun proves the committed bytes are these.
# Usage (from the repository root): scripts/make_test_data.sh [DATA_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-../shared/data}
dst=tests/data/real

copy() {  # copy RELATIVE_PATH...: the same path under $dst
  local f
  for f in "$@"; do
    mkdir -p "$dst/$(dirname "$f")"
    cp "$src/$f" "$dst/$f"
    chmod 644 "$dst/$f"
  done
}

copy models/stories260K-hf/{README.md,config.json,generation_config.json,model.safetensors,special_tokens_map.json} \
     models/stories260K-hf/{tokenizer.model,tokenizer_config.json} \
     tokenizers/gpt2/{vocab.json,merges.txt} \
     text/wikitext2/wikitext-2-raw-v1.test.{hf_joined.txt,rows.jsonl} text/ptb/ptb.test.txt \
     text/c4/c4-train.00000-of-01024.first1000.jsonl \
     text/tinystories/{tinystories.valid.txt,tinystories_sample.txt}

# The first 200 stories of tinystories.train.txt: every byte up to and including the 200th "\n<|endoftext|>\n".
python3 - "$src/text/tinystories/tinystories.train.txt" "$dst/text/tinystories/tinystories.train.first200.txt" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
end, sep = 0, b"\n<|endoftext|>\n"
for _ in range(200):
    end = data.index(sep, end) + len(sep)
open(sys.argv[2], "wb").write(data[:end])
PY
chmod 644 "$dst/text/tinystories/tinystories.train.first200.txt"

(cd "$dst" && sha256sum -c --quiet SHA256SUMS)
echo "$dst: $(du -sh --apparent-size "$dst" | cut -f1), checked against $dst/SHA256SUMS"
