#!/usr/bin/env bash
# Packs the CUDA build for a lent GPU machine, which has PyTorch 2.11.0 for CUDA 13.0 in its python3 (the libtorch
# this build links) but none of Debian's libraries and no network: alps, the benchmarks and the test programs, plus
# every shared library they load that is neither libtorch's or NVIDIA's (that machine's torch provides them) nor the
# C and C++ runtime's (its system's are newer), as one xz tarball to carry (a device call carries 64 MiB at most).
#
# Usage: scripts/pack_for_device.sh [BUILD_DIR]      (default build-cuda; run scripts/setup.sh --cuda first)
# Writes .device/alps-cuda.tar.xz (the folder is git-ignored); on the GPU machine `scripts/device_run.sh CMD...`
# unpacks it and runs CMD with the libraries found (docs/gpu.md, "On a lent GPU machine").
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
[ -x "$build/apps/alps/alps" ] || { echo "pack: $build/apps/alps/alps missing; run scripts/setup.sh --cuda" >&2; exit 1; }
"$build/apps/alps/alps" --version | grep -q "cuda build: yes" ||
  { echo "pack: $build is not a CUDA build" >&2; exit 1; }

mkdir -p .device
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/.device-lib"

# The SentencePiece module is dlopen'd (no program lists it), so it goes in by name, with what it loads.
programs=("$build/apps/alps/alps" "$build/src/tokenizer/libalps_sentencepiece_shim.so")
while IFS= read -r -d '' f; do programs+=("$f"); done < <(find "$build/apps/bench" "$build/tests" -maxdepth 2 -type f \
  -perm -u+x \( -name 'alps_*' \) -print0)

# Libraries resolved by the loader here, minus what the GPU machine has: its torch (libtorch, libc10, NVIDIA's
# wheels, their libgomp) and the C/C++ runtime. The real file is copied under its soname.
keep='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libutil\.so|libstdc\+\+\.so|libgcc_s\.so)'
for p in "${programs[@]}"; do
  cp --parents "$p" "$stage/"
  ldd "$p" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r soname path; do
    [[ "$soname" =~ $keep ]] && continue
    case "$path" in */site-packages/torch/* | */site-packages/nvidia/*) continue ;; esac
    [ -e "$stage/.device-lib/$soname" ] || cp -L "$path" "$stage/.device-lib/$soname"
  done
done
tar -C "$stage" -cJf .device/alps-cuda.tar.xz .
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" >.device/source-dir
echo "pack: .device/alps-cuda.tar.xz, $(du -h .device/alps-cuda.tar.xz | cut -f1): ${#programs[@]} programs," \
  "libraries: $(ls "$stage/.device-lib" | tr '\n' ' ')" >&2
