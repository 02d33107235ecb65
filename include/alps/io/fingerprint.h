#pragma once
// Fingerprints of input files, so that a resumed run can tell whether its inputs are still the ones it started from:
// size and modification time of each file, plus a hash of its content (of the header only, for safetensors files,
// whose data can be gigabytes; the size and time stand for the data). A file hashed whole is compared by size and
// hash only, so touching or copying it without changing a byte is not a difference.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace alps::io {

/// {"bytes", "mtime_ns", "hash"} of one file; `header_only` hashes a safetensors file's 8-byte length and JSON header
/// and adds "hashed": "header".
nlohmann::json fingerprint_file(const std::filesystem::path& file, bool header_only = false);

/// 16 hex digits of a 64-bit hash of `text` (FNV-1a, as the file fingerprints use): a name for a cache entry.
std::string fingerprint_text(std::string_view text);

/// How a checkpoint's safetensors files are fingerprinted: their header, with the size and time standing for the data
/// (a resume on the same files), or their whole content and size, by a hash of 64-bit words fast enough for
/// hundreds of gigabytes (ranks of one run comparing node-local copies, whose times differ). A whole fingerprint
/// has "hashed": "content" and no time.
enum class Hashed { kHeader, kWhole };

/// {file name: fingerprint} for every file of a checkpoint directory that loading the model or its tokenizer can
/// read (*.json, *.safetensors, *.model, *.txt); other files (a README, notes) may change without consequence.
nlohmann::json fingerprint_checkpoint_dir(const std::filesystem::path& dir, Hashed safetensors = Hashed::kHeader);

/// {"bytes", "hash", "hashed": "content"} of a file's whole content (see Hashed::kWhole); any one word changed
/// changes the hash.
nlohmann::json fingerprint_content(const std::filesystem::path& file);

/// One line per difference between two fingerprints of the same thing, e.g. "model.safetensors: size 10 -> 12";
/// `saved` and `now` are either single-file fingerprints or directory maps. Empty when they match.
std::vector<std::string> fingerprint_differences(const nlohmann::json& saved, const nlohmann::json& now);

}  // namespace alps::io
