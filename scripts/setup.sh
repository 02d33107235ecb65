#!/usr/bin/env bash
# Installs every Debian package alps needs and builds it (Release) into build/.
# Usage: scripts/setup.sh [extra cmake args...]     BUILD_DIR=... to build elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libtorch-dev          # CPU libtorch 1.13
  libopenblas0-pthread  # without it libtorch multiplies matrices with the reference BLAS (~60x slower)
  liblapack-dev         # ALPS calls ssyevd/ssyrk directly (src/prune/linalg.cc); OpenBLAS serves them at run time
  libsentencepiece-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libgtest-dev libpcre2-dev libicu-dev zlib1g-dev
)
source scripts/install_packages.sh
install_packages "${packages[@]}"

build_dir="${BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build_dir" -j "$(nproc)"
