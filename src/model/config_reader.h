#pragma once
// Typed, range-checked access to the fields of one config.json, shared by the per-architecture readers (one file per
// architecture). Every error names the file and the field.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

namespace alps::model {

class ConfigReader {
 public:
  /// `prefix` names a nested object in messages ("rope_scaling.").
  ConfigReader(nlohmann::json j, std::filesystem::path path, std::string prefix = "")
      : j_(std::move(j)), path_(std::move(path)), prefix_(std::move(prefix)) {}

  /// The object itself, for fields a reader walks on its own.
  const nlohmann::json& raw() const { return j_; }
  const std::filesystem::path& path() const { return path_; }
  /// The nested object's name in messages ("rope_scaling."), empty at the top level.
  const std::string& prefix() const { return prefix_; }
  /// Whether `key` is present and not null.
  bool has(const char* key) const;
  /// Integer field; integers only (a size written as 2.5 or 1e30 is a broken config, not a size to round).
  int64_t required_int(const char* key) const;
  std::optional<int64_t> optional_int(const char* key) const;
  /// Finite number field; absent or null gives `fallback`.
  double number(const char* key, double fallback) const;
  bool boolean(const char* key, bool fallback) const;
  std::string string(const char* key, const std::string& fallback) const;

  /// "PATH: field 'prefix.key'" for messages about a value already read.
  std::string field(const char* key) const;
  /// Throws unless v > 0, naming the field.
  void check_positive(int64_t v, const char* key) const;

 private:
  const nlohmann::json* find(const char* key) const;
  int64_t to_int(const nlohmann::json& v, const char* key) const;

  nlohmann::json j_;
  std::filesystem::path path_;
  std::string prefix_;  ///< "rope_scaling." for nested readers
};

struct ModelConfig;

/// A token id field; of a list (several EOS tokens), its first id; nullopt when absent, null or empty.
std::optional<int64_t> read_token_id(const ConfigReader& r, const char* key);

/// hidden_size, `intermediate_key`, num_hidden_layers, num_attention_heads, vocab_size (required) and
/// max_position_embeddings (default `default_max_positions`): positive integers.
void read_sizes(const ConfigReader& r, const char* intermediate_key, int64_t default_max_positions, ModelConfig& c);

}  // namespace alps::model
