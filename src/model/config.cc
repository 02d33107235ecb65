#include "alps/model/config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/io/text_files.h"
#include "model/architecture.h"
#include "model/config_reader.h"

namespace alps::model {

using nlohmann::json;

const json* ConfigReader::find(const char* key) const {
  auto it = j_.find(key);
  return it == j_.end() || it->is_null() ? nullptr : &*it;
}

bool ConfigReader::has(const char* key) const { return find(key) != nullptr; }

std::string ConfigReader::field(const char* key) const { return path_.string() + ": field '" + prefix_ + key + "'"; }

// nlohmann converts 2.5 to 2 without complaint, 1e30 with undefined behaviour, and wraps an unsigned value past
// int64.
int64_t ConfigReader::to_int(const json& v, const char* key) const {
  ALPS_CHECK(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}), field(key),
             " must be an integer, got ", v.dump());
  return v.get<int64_t>();
}

int64_t ConfigReader::required_int(const char* key) const {
  auto it = j_.find(key);
  ALPS_CHECK(it != j_.end(), path_.string(), ": expected integer field '", prefix_, key, "', found nothing");
  return to_int(*it, key);
}

std::optional<int64_t> ConfigReader::optional_int(const char* key) const {
  const json* v = find(key);
  if (v == nullptr) return std::nullopt;
  return to_int(*v, key);
}

// A JSON number far beyond the double range parses as infinity; every real-valued field must be finite.
double ConfigReader::number(const char* key, double fallback) const {
  const json* v = find(key);
  if (v == nullptr) return fallback;
  ALPS_CHECK(v->is_number(), field(key), " must be a number, got ", v->dump());
  const double d = v->get<double>();
  ALPS_CHECK(std::isfinite(d), field(key), " must be finite, got ", v->dump());
  return d;
}

bool ConfigReader::boolean(const char* key, bool fallback) const {
  const json* v = find(key);
  if (v == nullptr) return fallback;
  ALPS_CHECK(v->is_boolean(), field(key), " must be true or false, got ", v->dump());
  return v->get<bool>();
}

std::string ConfigReader::string(const char* key, const std::string& fallback) const {
  const json* v = find(key);
  if (v == nullptr) return fallback;
  ALPS_CHECK(v->is_string(), field(key), " must be a string, got ", v->dump());
  return v->get<std::string>();
}

void ConfigReader::check_positive(int64_t v, const char* key) const {
  ALPS_CHECK(v > 0, path_.string(), ": ", prefix_, key, " must be positive, got ", v);
}

// Each must be a positive integer: a zero or negative one gives empty tensors or a division by zero long after
// loading.
void read_sizes(const ConfigReader& r, const char* intermediate_key, int64_t default_max_positions, ModelConfig& c) {
  c.hidden_size = r.required_int("hidden_size");
  c.intermediate_size = r.required_int(intermediate_key);
  c.num_layers = r.required_int("num_hidden_layers");
  c.num_heads = r.required_int("num_attention_heads");
  c.vocab_size = r.required_int("vocab_size");
  c.max_positions = r.optional_int("max_position_embeddings").value_or(default_max_positions);
  r.check_positive(c.hidden_size, "hidden_size");
  r.check_positive(c.intermediate_size, intermediate_key);
  r.check_positive(c.num_layers, "num_hidden_layers");
  r.check_positive(c.num_heads, "num_attention_heads");
  r.check_positive(c.vocab_size, "vocab_size");
  r.check_positive(c.max_positions, "max_position_embeddings");
}

int64_t ModelConfig::max_sequence_length() const {
  return rope_scaling && rope_scaling->type == "dynamic" ? std::numeric_limits<int64_t>::max() : max_positions;
}

int64_t ModelConfig::default_window() const { return std::min(kProtocolWindow, max_positions); }

int64_t rotary_dim(int64_t head_dim, double partial_rotary_factor) {
  return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
}

int64_t ModelConfig::rotary_dim() const { return model::rotary_dim(head_dim, partial_rotary_factor); }

int64_t ModelConfig::window_of_layer(int64_t i) const {
  return i >= 0 && i < static_cast<int64_t>(sliding_window.size()) ? sliding_window[static_cast<size_t>(i)] : 0;
}

bool ModelConfig::is_moe_layer(int64_t i) const {
  return moe && i >= 0 && i < static_cast<int64_t>(moe->layers.size()) && moe->layers[static_cast<size_t>(i)];
}

std::optional<int64_t> read_token_id(const ConfigReader& r, const char* key) {
  auto it = r.raw().find(key);
  if (it == r.raw().end() || it->is_null() || (it->is_array() && it->empty())) return std::nullopt;
  // An id list (several EOS tokens) contributes its first id.
  if (!it->is_array()) return r.optional_int(key);
  // Its first element read as the field itself, so that a bad one is named as the field.
  return ConfigReader(nlohmann::json{{key, (*it)[0]}}, r.path(), r.prefix()).optional_int(key);
}

namespace {

const ArchitectureEntry& architecture_of(const ConfigReader& r) {
  if (auto it = r.raw().find("architectures"); it != r.raw().end() && it->is_array() && !it->empty()) {
    const json& name = (*it)[0];
    ALPS_CHECK(name.is_string(), r.path().string(), ": field 'architectures' must list names, got ", it->dump());
    const ArchitectureEntry* a = find_architecture(name.get<std::string>());
    ALPS_CHECK(a != nullptr, r.path().string(), ": unknown architecture '", name.get<std::string>(),
               "' in field 'architectures' (supported: ", supported_architectures(), ")");
    return *a;
  }
  // Configs written from a bare config object (no model) carry only model_type.
  const std::string model_type = r.string("model_type", "");
  const ArchitectureEntry* a = find_model_type(model_type);
  ALPS_CHECK(a != nullptr, r.path().string(), ": no 'architectures' and unknown model_type '", model_type,
             "' (supported: ", supported_architectures(), ")");
  return *a;
}

}  // namespace

ModelConfig load_config(const std::filesystem::path& path) {
  const json j = io::read_json_file(path);
  ALPS_CHECK(j.is_object(), path.string(), ": expected a JSON object");
  const ConfigReader r(j, path);
  ModelConfig c;
  try {
    const ArchitectureEntry& a = architecture_of(r);
    c.architecture = a.name;
    a.read_config(r, c);
    // A multimodal config's reader takes them from its text config where the top level has none.
    if (auto id = read_token_id(r, "bos_token_id")) c.bos_token_id = id;
    if (auto id = read_token_id(r, "eos_token_id")) c.eos_token_id = id;
    c.torch_dtype = r.has("torch_dtype") ? r.string("torch_dtype", "") : r.string("dtype", "");
  } catch (const json::exception& e) {
    ALPS_FAIL(path.string(), ": malformed field: ", e.what());
  }
  return c;
}

}  // namespace alps::model
