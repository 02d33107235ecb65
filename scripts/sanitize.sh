#!/usr/bin/env bash
# Builds the whole project and its test suite with AddressSanitizer + UBSan (GCC, RelWithDebInfo) in build-asan/
# and runs every test under them. Any sanitizer report fails the test that triggered it.
# Usage: scripts/sanitize.sh [ctest args...]     BUILD_DIR=... to build elsewhere; TARGETS="alps_core_tests ..."
# builds only those targets (then pass the matching ctest -L/-R filter), for a partial run on a slow machine.
set -euo pipefail
cd "$(dirname "$0")/.."

build="${BUILD_DIR:-build-asan}"
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$sanitize" \
  -DCMAKE_EXE_LINKER_FLAGS="$sanitize" -DCMAKE_SHARED_LINKER_FLAGS="$sanitize" -DCMAKE_MODULE_LINKER_FLAGS="$sanitize"
# shellcheck disable=SC2086  # TARGETS is a list
cmake --build "$build" -j "$(nproc)" ${TARGETS:+--target $TARGETS}

# Exported so that the `alps` processes the CLI tests start inherit them.
export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1${ASAN_EXTRA:+:$ASAN_EXTRA}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0"
start=$(date +%s)
ctest --test-dir "$build" --output-on-failure -j 2 "$@"
echo "sanitized test suite passed in $(( $(date +%s) - start )) s"
