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

/// Parses a JSON file (comments allowed when `allow_comments`); errors name the file: "X: not valid JSON (...)".
nlohmann::json read_json_file(const std::filesystem::path& path, bool allow_comments = false);

/// Whether a file name says JSON records: .json, .jsonl, optionally followed by .gz.
bool is_json_records_name(const std::filesystem::path& path);

}  // namespace alps::io
