#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz with clang, AddressSanitizer and UBSan (build-fuzz/), runs every
# target on its seed corpus (tests/fuzz/corpus/<target>/) for SECONDS or FUZZ_RUNS executions, whichever comes first,
# and prints one row per target: executions, executions per second, new crash files. Exits non-zero when any target
# found a crash; the input is in build-fuzz/artifacts/<target>/ (add it to tests/fuzz/regressions/<target>/ once
# fixed). The growing corpus and the logs stay in build-fuzz/ (ignored by git).
# Usage: scripts/fuzz.sh SECONDS [target...]     FUZZ_RUNS=1000000 by default; FUZZ_JOBS=1 targets at a time.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:?usage: scripts/fuzz.sh SECONDS [target...]}"
shift
runs="${FUZZ_RUNS:-1000000}"
jobs="${FUZZ_JOBS:-1}"

packages=(clang-14 libclang-rt-14-dev cmake ninja-build pkg-config libtorch-dev libsentencepiece-dev
          nlohmann-json3-dev libcli11-dev libspdlog-dev libpcre2-dev libicu-dev zlib1g-dev)
source scripts/install_packages.sh
install_packages "${packages[@]}"

build=build-fuzz
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALPS_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build "$build" -j "$(nproc)"

targets=("$@")
if ((${#targets[@]} == 0)); then
  # The list lives in tests/fuzz/CMakeLists.txt; every built harness is a target.
  for f in "$build"/tests/fuzz/*_fuzz; do targets+=("$(basename "$f" _fuzz)"); done
fi

run_target() {
  local t="$1"
  local work="$build/work/$t" artifacts="$build/artifacts/$t/" log="$build/logs/$t.log"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  local before
  before=$(find "$artifacts" -type f | wc -l)
  local dict=()
  case "$t" in
    tokenizer_model) ;;  # protobuf, not JSON
    *) dict=(-dict=tests/fuzz/json.dict) ;;
  esac
  local status=0
  "$build/tests/fuzz/${t}_fuzz" "$work" "tests/fuzz/corpus/$t" "${dict[@]}" -max_total_time="$seconds" \
    -runs="$runs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$artifacts" \
    >"$log" 2>&1 || status=$?
  local execs rate after
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  after=$(find "$artifacts" -type f | wc -l)
  printf '%-18s %12s %10s %12s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$((after - before))" \
    "$([ "$status" -eq 0 ] || echo "exit $status, see $log")" >"$build/logs/$t.row"
  return "$status"
}

failed=0
pids=()
for t in "${targets[@]}"; do
  run_target "$t" &
  pids+=($!)
  if ((${#pids[@]} >= jobs)); then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done

printf '%-18s %12s %10s %12s\n' target executions exec/s new-crashes
for t in "${targets[@]}"; do cat "$build/logs/$t.row"; done
exit "$failed"
