#!/usr/bin/env bash
# Runs CMD on a lent GPU machine with the CUDA build that scripts/pack_for_device.sh packed (carry .device): unpacks
# it into the repository (build-cuda/, .device-lib/) once, puts the packed libraries and that machine's torch
# libraries on the library path, and makes the repository reachable at the path the build was made in (the tests
# name their data and the alps binary by absolute paths from build time).
#
# Usage: scripts/device_run.sh CMD [ARGS...]     e.g. scripts/device_run.sh build-cuda/apps/alps/alps --version
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
[ -f .device/alps-cuda.tar.xz ] || { echo "device_run: .device/alps-cuda.tar.xz missing (carry .device)" >&2; exit 1; }
[ -x build-cuda/apps/alps/alps ] || tar -xJf .device/alps-cuda.tar.xz

torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$repo/.device-lib:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Where the build was made (pack_for_device.sh records it): the tests' absolute paths start there.
built_in=$(cat .device/source-dir 2>/dev/null || true)
if [ -n "$built_in" ] && [ "$built_in" != "$repo" ] && [ ! -e "$built_in" ]; then
  mkdir -p "$(dirname "$built_in")" && ln -s "$repo" "$built_in"
fi
# The data directory fixed in the binary is the build machine's; here it is the one beside the repository, else the
# data the repository ships.
if [ -z "${ALPS_DATA_DIR:-}" ]; then
  ALPS_DATA_DIR="$repo/tests/data/real"
  [ -d "$repo/../shared/data" ] && ALPS_DATA_DIR="$repo/../shared/data"
  export ALPS_DATA_DIR
fi
exec "$@"
