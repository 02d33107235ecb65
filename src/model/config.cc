#include "alps/model/config.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "alps/core/error.h"
#include "alps/io/text_files.h"

namespace alps::model {

namespace {

using nlohmann::json;

// Integer fields take integers only: nlohmann would convert 2.5 or 1e30 (undefined behaviour past the int64 range)
// and wrap an unsigned value past it.
int64_t to_int(const json& v, const char* key, const std::filesystem::path& path) {
  ALPS_CHECK(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}),
             path.string(), ": field '", key, "' must be an integer, got ", v.dump());
  return v.get<int64_t>();
}

// A value that config.json may omit or set to null takes its Hugging Face default.
template <typename T>
T get_or(const json& j, const std::filesystem::path& path, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return to_int(*it, key, path);
  } else {
    return it->get<T>();
  }
}

int64_t required_int(const json& j, const char* key, const std::filesystem::path& path) {
  auto it = j.find(key);
  ALPS_CHECK(it != j.end(), path.string(), ": expected integer field '", key, "', found nothing");
  return to_int(*it, key, path);
}

std::optional<int64_t> optional_id(const json& j, const char* key, const std::filesystem::path& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_array()) return it->empty() ? std::nullopt : std::optional<int64_t>(to_int((*it)[0], key, path));
  return to_int(*it, key, path);
}

std::string architecture_of(const json& j, const std::filesystem::path& path) {
  if (auto it = j.find("architectures"); it != j.end() && it->is_array() && !it->empty())
    return (*it)[0].get<std::string>();
  // Configs written from a bare config object (no model) carry only model_type.
  const std::string model_type = get_or<std::string>(j, path, "model_type", "");
  if (model_type == "llama") return "LlamaForCausalLM";
  if (model_type == "opt") return "OPTForCausalLM";
  ALPS_FAIL(path.string(), ": no 'architectures' and unknown model_type '", model_type,
            "' (supported: LlamaForCausalLM, OPTForCausalLM)");
}

void parse_llama(const json& j, const std::filesystem::path& path, ModelConfig& c) {
  c.family = Family::kLlama;
  c.hidden_size = required_int(j, "hidden_size", path);
  c.intermediate_size = required_int(j, "intermediate_size", path);
  c.num_layers = required_int(j, "num_hidden_layers", path);
  c.num_heads = required_int(j, "num_attention_heads", path);
  c.num_kv_heads = get_or<int64_t>(j, path, "num_key_value_heads", c.num_heads);
  ALPS_CHECK(c.num_heads > 0, path.string(), ": num_attention_heads must be positive, got ", c.num_heads);
  if (get_or<int64_t>(j, path, "head_dim", 0) == 0)
    ALPS_CHECK(c.hidden_size % c.num_heads == 0, path.string(), ": hidden_size ", c.hidden_size,
               " is not divisible by num_attention_heads ", c.num_heads);
  c.head_dim = get_or<int64_t>(j, path, "head_dim", c.hidden_size / c.num_heads);
  c.vocab_size = required_int(j, "vocab_size", path);
  c.max_positions = get_or<int64_t>(j, path, "max_position_embeddings", 2048);
  c.norm_eps = get_or<double>(j, path, "rms_norm_eps", 1e-6);
  c.tie_word_embeddings = get_or<bool>(j, path, "tie_word_embeddings", false);
  c.attention_bias = get_or<bool>(j, path, "attention_bias", false);
  c.mlp_bias = get_or<bool>(j, path, "mlp_bias", false);
  c.activation = get_or<std::string>(j, path, "hidden_act", "silu");
  ALPS_CHECK(c.activation == "silu", path.string(), ": hidden_act: expected 'silu', got '", c.activation, "'");
  // transformers <= 4.x writes rope_theta / rope_scaling; 5.x folds both into rope_parameters.
  json rope = json::object();
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) rope = *it;
  if (auto it = j.find("rope_scaling"); it != j.end() && it->is_object()) rope.update(*it);
  c.rope_theta = get_or<double>(rope, path, "rope_theta", get_or<double>(j, path, "rope_theta", 10000.0));
  std::string type = get_or<std::string>(rope, path, "rope_type", get_or<std::string>(rope, path, "type", "default"));
  if (type != "default") {
    ALPS_CHECK(type == "llama3", path.string(), ": rope scaling type: expected 'llama3' (or none), got '", type, "'");
    RopeScaling s;
    s.type = type;
    s.factor = get_or<double>(rope, path, "factor", 1.0);
    s.low_freq_factor = get_or<double>(rope, path, "low_freq_factor", 1.0);
    s.high_freq_factor = get_or<double>(rope, path, "high_freq_factor", 4.0);
    s.original_max_position_embeddings = get_or<int64_t>(rope, path, "original_max_position_embeddings", 8192);
    ALPS_CHECK(s.high_freq_factor > s.low_freq_factor, path.string(), ": llama3 rope_scaling needs high_freq_factor > ",
               "low_freq_factor, got ", s.high_freq_factor, " and ", s.low_freq_factor);
    c.rope_scaling = s;
  }
  ALPS_CHECK(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, path.string(), ": num_attention_heads ",
             c.num_heads, " is not a multiple of num_key_value_heads ", c.num_kv_heads);
  ALPS_CHECK(c.head_dim % 2 == 0, path.string(), ": head_dim must be even for RoPE, got ", c.head_dim);
}

void parse_opt(const json& j, const std::filesystem::path& path, ModelConfig& c) {
  c.family = Family::kOpt;
  c.hidden_size = required_int(j, "hidden_size", path);
  c.intermediate_size = required_int(j, "ffn_dim", path);
  c.num_layers = required_int(j, "num_hidden_layers", path);
  c.num_heads = required_int(j, "num_attention_heads", path);
  c.num_kv_heads = c.num_heads;
  ALPS_CHECK(c.num_heads > 0 && c.hidden_size % c.num_heads == 0, path.string(), ": hidden_size ", c.hidden_size,
             " is not divisible by num_attention_heads ", c.num_heads);
  c.head_dim = c.hidden_size / c.num_heads;
  c.vocab_size = required_int(j, "vocab_size", path);
  c.max_positions = get_or<int64_t>(j, path, "max_position_embeddings", 2048);
  c.norm_eps = 1e-5;  // OPT uses nn.LayerNorm's default
  c.tie_word_embeddings = get_or<bool>(j, path, "tie_word_embeddings", true);
  c.do_layer_norm_before = get_or<bool>(j, path, "do_layer_norm_before", true);
  c.word_embed_proj_dim = get_or<int64_t>(j, path, "word_embed_proj_dim", c.hidden_size);
  c.enable_bias = get_or<bool>(j, path, "enable_bias", true);
  c.activation = get_or<std::string>(j, path, "activation_function", "relu");
  ALPS_CHECK(c.activation == "relu", path.string(), ": activation_function: expected 'relu', got '", c.activation,
             "'");
  ALPS_CHECK(get_or<bool>(j, path, "layer_norm_elementwise_affine", true), path.string(),
             ": layer_norm_elementwise_affine=false is not supported");
  ALPS_CHECK(!get_or<bool>(j, path, "_remove_final_layer_norm", false), path.string(),
             ": _remove_final_layer_norm=true is not supported");
}

}  // namespace

ModelConfig load_config(const std::filesystem::path& path) {
  const json j = io::read_json_file(path);
  ALPS_CHECK(j.is_object(), path.string(), ": expected a JSON object");
  ModelConfig c;
  try {
    c.architecture = architecture_of(j, path);
    if (c.architecture == "LlamaForCausalLM")
      parse_llama(j, path, c);
    else if (c.architecture == "OPTForCausalLM")
      parse_opt(j, path, c);
    else
      ALPS_FAIL(path.string(), ": unknown architecture '", c.architecture,
                "' (supported: LlamaForCausalLM, OPTForCausalLM)");
    c.bos_token_id = optional_id(j, "bos_token_id", path);
    c.eos_token_id = optional_id(j, "eos_token_id", path);
    c.torch_dtype = get_or<std::string>(j, path, "torch_dtype", get_or<std::string>(j, path, "dtype", ""));
  } catch (const json::exception& e) {
    ALPS_FAIL(path.string(), ": malformed field: ", e.what());
  }
  for (auto [v, what] : {std::pair{c.hidden_size, "hidden_size"}, {c.intermediate_size, "intermediate size"},
                         {c.num_layers, "num_hidden_layers"}, {c.vocab_size, "vocab_size"},
                         {c.max_positions, "max_position_embeddings"}, {c.head_dim, "head_dim"}})
    ALPS_CHECK(v > 0, path.string(), ": ", what, " must be positive, got ", v);
  return c;
}

}  // namespace alps::model
