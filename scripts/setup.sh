#!/usr/bin/env bash
# Installs every Debian package alps needs and builds it (Release).
#
# Usage: scripts/setup.sh [--cuda] [extra cmake args...]
#   (no flag)  CPU build against Debian's libtorch 1.13, into build/ (BUILD_DIR=... to build elsewhere).
#   --cuda     CUDA build against libtorch from PyPI's torch 2.11.0 wheel (CUDA 13.0; it matches nvcc 13.0 of the CUDA
#              toolkit, which must be installed: nvcc on PATH or in /usr/local/cuda/bin), into build-cuda/. The wheel
#              and its NVIDIA runtime wheels go into a virtual environment under CACHE (CACHE/venv-torch-2.11.0, where
#              CACHE is $ALPS_CACHE_DIR, else $XDG_CACHE_HOME/alps, else ~/.cache/alps); TORCH_VENV=DIR picks another,
#              e.g. one whose python already has a CUDA torch. The binary finds libtorch through its run path.
set -euo pipefail
cd "$(dirname "$0")/.."

cuda=0
if [ "${1:-}" = "--cuda" ]; then
  cuda=1
  shift
fi

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libtorch-dev          # CPU libtorch 1.13
  libopenblas0-pthread  # without it libtorch multiplies matrices with the reference BLAS (~60x slower)
  liblapack-dev         # ALPS calls ssyevd/ssyrk directly (src/core/linalg.cc); OpenBLAS serves them at run time
  libsentencepiece-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libgtest-dev libpcre2-dev libicu-dev zlib1g-dev
  libgloo-dev           # Gloo's headers, which c10d's ProcessGroupGloo.hpp includes (src/dist: distributed runs)
  gnuplot-nox           # the plots of scripts/sweep.sh (perplexity against sparsity)
)
((cuda)) && packages+=(python3 python3-venv)
source scripts/install_packages.sh
install_packages "${packages[@]}"

if ((cuda == 0)); then
  build_dir="${BUILD_DIR:-build}"
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$build_dir" -j "$(nproc)"
  exit 0
fi

torch_pin="torch==2.11.0"
cache="${ALPS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/alps}"
venv="${TORCH_VENV:-$cache/venv-torch-2.11.0}"
if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  [ -n "${TORCH_VENV:-}" ] && { echo "setup.sh: TORCH_VENV=$venv has no python with torch" >&2; exit 1; }
  # A broken environment of ours (a virtual environment) is replaced; anything else at that path is not touched.
  if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
    echo "setup.sh: $venv exists and is not a virtual environment; refusing to replace it" >&2
    exit 1
  fi
  echo "installing $torch_pin (CUDA 13.0, about 3 GB with its NVIDIA wheels) into $venv" >&2
  mkdir -p "$cache"
  rm -rf "$venv.partial" "$venv"
  python3 -m venv "$venv.partial"
  "$venv.partial/bin/pip" install -q --disable-pip-version-check "$torch_pin" >&2
  # The environment appears complete or not at all; only its bin/python is used, which survives the rename.
  mv "$venv.partial" "$venv"
fi
# The wheel's root goes first on the prefix path: its CMake package looks for libtorch.so there only after the
# system directories, where Debian's CPU libtorch would win.
torch_root="$("$venv/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)"
torch_cuda="$("$venv/bin/python" -c 'import torch; print(torch.version.cuda or "")' 2>/dev/null)"
[ -n "$torch_cuda" ] || { echo "setup.sh: the torch in $venv was built without CUDA" >&2; exit 1; }

nvcc="$(command -v nvcc || true)"
[ -n "$nvcc" ] || nvcc=/usr/local/cuda/bin/nvcc
[ -x "$nvcc" ] || { echo "setup.sh --cuda: nvcc not found (install the CUDA $torch_cuda toolkit)" >&2; exit 1; }

build_dir="${BUILD_DIR:-build-cuda}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DALPS_CUDA=ON \
  "-DCMAKE_PREFIX_PATH=$torch_root;$torch_root/share/cmake" -DCMAKE_CUDA_COMPILER="$nvcc" \
  "$@"
cmake --build "$build_dir" -j "$(nproc)"
