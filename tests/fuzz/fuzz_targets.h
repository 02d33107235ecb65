#pragma once
// The fuzz targets: each turns a byte string into the file(s) a user would hand alps and loads them through the
// public loader, the way the CLI does. Written once and used twice: by the libFuzzer harness (harness.cc, clang with
// sanitizers) and by the regression suite (fuzz_regression_test.cc, any compiler), which replays the committed seed
// corpora and crash reproducers.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace alps::fuzz {

struct Target {
  const char* name;
  /// Writes `input` into `dir` as the target's file(s) and loads them. Called with a fresh `dir` only the first
  /// time; later calls overwrite the input file(s) and reuse the rest.
  void (*load)(const std::filesystem::path& dir, std::string_view input);
};

/// Every target, in a fixed order.
const std::vector<Target>& targets();
/// The target called `name`; throws std::invalid_argument for an unknown name.
const Target& target(std::string_view name);

/// Runs one input. Success gives std::nullopt, an alps::Error gives its message; any other exception propagates,
/// because every input must end in one of those two ways.
std::optional<std::string> run(const Target& target, const uint8_t* data, size_t size);

}  // namespace alps::fuzz
