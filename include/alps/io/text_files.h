#pragma once
// Text inputs of calibration and evaluation: plain or gzip-compressed files, and JSON records with a "text" field
// (C4's json lines, or a JSON array of objects).
#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace alps::io {

/// The whole file; a gzip-compressed file is inflated. Errors name the file.
std::string read_text_file(const std::filesystem::path& path);

/// The "text" field of the first `limit` records (limit < 0: all) of a JSON-lines file or a JSON array of objects,
/// optionally gzip-compressed; blank lines are skipped. Errors name the file and the record.
std::vector<std::string> read_text_records(const std::filesystem::path& path, int64_t limit = -1);

/// How strictly read_json_file reads. Files other tools write (config.json, tokenizer.json) are read as Python's json
/// reads them, a repeated key's last value winning; files users write for alps (recipes) take comments and refuse a
/// repeated key, which is almost always an edit that silently undoes another.
enum class JsonDialect { kPython, kRecipe };

/// Parses a JSON file; errors name the file: "X: not valid JSON (...)", "X: key 'k' appears twice in one object".
nlohmann::json read_json_file(const std::filesystem::path& path, JsonDialect dialect = JsonDialect::kPython);

/// Whether a file name says JSON records: .json, .jsonl, optionally followed by .gz.
bool is_json_records_name(const std::filesystem::path& path);

}  // namespace alps::io
