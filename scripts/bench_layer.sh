#!/usr/bin/env bash
# Layer-solver benchmark: every method (magnitude, wanda, sparsegpt, dsnot, alps) and magnitude + PCG /
# exact refit on synthetic OPT-125M-shaped problems (768x768, 3072x768, 768x3072; out x in) and 2048x2048, at
# 50/70/90% and 2:4, side by side in one process. Prints the machine, then a markdown table (rel_error, solve
# seconds, refit seconds, ALPS iterations); the JSON document goes to $BENCH_JSON (default bench_layer.json).
# Usage:
#   scripts/bench_layer.sh [BUILD_DIR] [alps_bench_layer flags...]
#   e.g. scripts/bench_layer.sh build-bench --shapes 768x768 --patterns 0.7 --methods sparsegpt,alps
# BUILD_DIR (default build) must be configured; the script builds the alps_bench_layer target in it.
set -euo pipefail
build=${1:-build}
shift || true
json=${BENCH_JSON:-bench_layer.json}
ninja -C "$build" alps_bench_layer >&2
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: scripts/bench_layer.sh $build $*"
echo
"$build/apps/bench/alps_bench_layer" --json "$json" "$@"
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); JSON: $json"
