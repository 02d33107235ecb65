#include "tokenizer/json_file.h"

#include <fstream>
#include <sstream>

#include "alps/core/error.h"

namespace alps::tokenizer {

nlohmann::json read_json(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  ALPS_CHECK(in.good(), "cannot open ", file.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::parse_error& e) {
    ALPS_FAIL(file.string(), ": not valid JSON (", e.what(), ")");
  }
}

std::optional<nlohmann::json> read_json_if_exists(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) return std::nullopt;
  return read_json(file);
}

}  // namespace alps::tokenizer
