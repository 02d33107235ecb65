#pragma once
// JSON file reading with errors that name the file (private to the tokenizer component).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

namespace alps::tokenizer {

/// Parses `file`; throws alps::Error naming it when it cannot be read or is not valid JSON.
nlohmann::json read_json(const std::filesystem::path& file);
/// As read_json, but std::nullopt when the file does not exist.
std::optional<nlohmann::json> read_json_if_exists(const std::filesystem::path& file);

}  // namespace alps::tokenizer
