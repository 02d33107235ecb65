#include "tokenizer/json_file.h"

#include "alps/io/text_files.h"

namespace alps::tokenizer {

std::optional<nlohmann::json> read_json_if_exists(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) return std::nullopt;
  return io::read_json_file(file);
}

}  // namespace alps::tokenizer
