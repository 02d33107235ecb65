#pragma once
// JSON file reading with errors that name the file (private to the tokenizer component).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

namespace alps::tokenizer {

/// io::read_json_file, but std::nullopt when the file does not exist.
std::optional<nlohmann::json> read_json_if_exists(const std::filesystem::path& file);

}  // namespace alps::tokenizer
