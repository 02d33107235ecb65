#include "alps/model/config.h"

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/io/text_files.h"

namespace alps::model {

namespace {

using nlohmann::json;

// A value that config.json may omit or set to null takes its Hugging Face default.
template <typename T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

// Integer fields take integers only: nlohmann converts 2.5 to 2 without complaint (a size written as a float is a
// broken config, not a size to round), 1e30 with undefined behaviour, and wraps an unsigned value past int64.
int64_t to_int(const json& v, const char* key, const std::filesystem::path& path) {
  ALPS_CHECK(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}),
             path.string(), ": field '", key, "' must be an integer, got ", v.dump());
  return v.get<int64_t>();
}

std::optional<int64_t> optional_int(const json& j, const char* key, const std::filesystem::path& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return to_int(*it, key, path);
}

int64_t required_int(const json& j, const char* key, const std::filesystem::path& path) {
  auto it = j.find(key);
  ALPS_CHECK(it != j.end(), path.string(), ": expected integer field '", key, "', found nothing");
  return to_int(*it, key, path);
}

// A JSON number far beyond the double range parses as infinity; every real-valued field must be finite.
double optional_number(const json& j, const char* key, double fallback, const std::filesystem::path& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  ALPS_CHECK(it->is_number(), path.string(), ": field '", key, "' must be a number, got ", it->dump());
  const double v = it->get<double>();
  ALPS_CHECK(std::isfinite(v), path.string(), ": field '", key, "' must be finite, got ", it->dump());
  return v;
}

void check_positive(int64_t v, const char* key, const std::filesystem::path& path) {
  ALPS_CHECK(v > 0, path.string(), ": ", key, " must be positive, got ", v);
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
  const std::string model_type = get_or<std::string>(j, "model_type", "");
  if (model_type == "llama") return "LlamaForCausalLM";
  if (model_type == "opt") return "OPTForCausalLM";
  ALPS_FAIL(path.string(), ": no 'architectures' and unknown model_type '", model_type,
            "' (supported: LlamaForCausalLM, OPTForCausalLM)");
}

// Sizes every architecture has; each must be a positive integer (a zero or negative one gives empty tensors or a
// division by zero long after loading).
void parse_sizes(const json& j, const std::filesystem::path& path, const char* intermediate_key, ModelConfig& c) {
  c.hidden_size = required_int(j, "hidden_size", path);
  c.intermediate_size = required_int(j, intermediate_key, path);
  c.num_layers = required_int(j, "num_hidden_layers", path);
  c.num_heads = required_int(j, "num_attention_heads", path);
  c.vocab_size = required_int(j, "vocab_size", path);
  c.max_positions = optional_int(j, "max_position_embeddings", path).value_or(2048);
  check_positive(c.hidden_size, "hidden_size", path);
  check_positive(c.intermediate_size, intermediate_key, path);
  check_positive(c.num_layers, "num_hidden_layers", path);
  check_positive(c.num_heads, "num_attention_heads", path);
  check_positive(c.vocab_size, "vocab_size", path);
  check_positive(c.max_positions, "max_position_embeddings", path);
}

void parse_llama(const json& j, const std::filesystem::path& path, ModelConfig& c) {
  c.family = Family::kLlama;
  parse_sizes(j, path, "intermediate_size", c);
  c.num_kv_heads = optional_int(j, "num_key_value_heads", path).value_or(c.num_heads);
  check_positive(c.num_kv_heads, "num_key_value_heads", path);
  ALPS_CHECK(c.num_heads % c.num_kv_heads == 0, path.string(), ": num_attention_heads ", c.num_heads,
             " is not a multiple of num_key_value_heads ", c.num_kv_heads);
  // transformers reads `head_dim or hidden_size // num_attention_heads`: absent, null and 0 all mean the default,
  // which only makes sense when the division is exact. An explicit head_dim may differ from the quotient (the
  // projections are [heads * head_dim, hidden]).
  c.head_dim = optional_int(j, "head_dim", path).value_or(0);
  if (c.head_dim == 0) {
    ALPS_CHECK(c.hidden_size % c.num_heads == 0, path.string(), ": hidden_size ", c.hidden_size,
               " is not divisible by num_attention_heads ", c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  check_positive(c.head_dim, "head_dim", path);
  ALPS_CHECK(c.head_dim % 2 == 0, path.string(), ": head_dim must be even for RoPE, got ", c.head_dim);
  // RMSNorm divides by sqrt(mean(x^2) + eps): eps <= 0 turns a zero hidden state into NaN.
  c.norm_eps = optional_number(j, "rms_norm_eps", 1e-6, path);
  ALPS_CHECK(c.norm_eps > 0, path.string(), ": rms_norm_eps must be positive, got ", c.norm_eps);
  c.tie_word_embeddings = get_or<bool>(j, "tie_word_embeddings", false);
  c.attention_bias = get_or<bool>(j, "attention_bias", false);
  c.mlp_bias = get_or<bool>(j, "mlp_bias", false);
  c.activation = get_or<std::string>(j, "hidden_act", "silu");
  ALPS_CHECK(c.activation == "silu", path.string(), ": hidden_act: expected 'silu', got '", c.activation, "'");
  // transformers <= 4.x writes rope_theta / rope_scaling; 5.x folds both into rope_parameters.
  json rope = json::object();
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) rope = *it;
  if (auto it = j.find("rope_scaling"); it != j.end() && it->is_object()) rope.update(*it);
  // inv_freq = theta^(-2i/d): theta <= 0 gives NaN or infinite frequencies.
  c.rope_theta = optional_number(rope, "rope_theta", optional_number(j, "rope_theta", 10000.0, path), path);
  ALPS_CHECK(c.rope_theta > 0, path.string(), ": rope_theta must be positive, got ", c.rope_theta);
  std::string type = get_or<std::string>(rope, "rope_type", get_or<std::string>(rope, "type", "default"));
  if (type != "default") {
    ALPS_CHECK(type == "llama3", path.string(), ": rope scaling type: expected 'llama3' (or none), got '", type, "'");
    RopeScaling s;
    s.type = type;
    s.factor = optional_number(rope, "factor", 1.0, path);
    s.low_freq_factor = optional_number(rope, "low_freq_factor", 1.0, path);
    s.high_freq_factor = optional_number(rope, "high_freq_factor", 4.0, path);
    s.original_max_position_embeddings = optional_int(rope, "original_max_position_embeddings", path).value_or(8192);
    // The llama3 rule divides frequencies by `factor` and the original length by both frequency factors.
    ALPS_CHECK(s.factor > 0, path.string(), ": llama3 rope_scaling factor must be positive, got ", s.factor);
    ALPS_CHECK(s.low_freq_factor > 0, path.string(), ": llama3 rope_scaling low_freq_factor must be positive, got ",
               s.low_freq_factor);
    ALPS_CHECK(s.high_freq_factor > s.low_freq_factor, path.string(), ": llama3 rope_scaling needs high_freq_factor > ",
               "low_freq_factor, got ", s.high_freq_factor, " and ", s.low_freq_factor);
    check_positive(s.original_max_position_embeddings, "rope_scaling original_max_position_embeddings", path);
    c.rope_scaling = s;
  }
}

void parse_opt(const json& j, const std::filesystem::path& path, ModelConfig& c) {
  c.family = Family::kOpt;
  parse_sizes(j, path, "ffn_dim", c);
  c.num_kv_heads = c.num_heads;
  ALPS_CHECK(c.hidden_size % c.num_heads == 0, path.string(), ": hidden_size ", c.hidden_size,
             " is not divisible by num_attention_heads ", c.num_heads);
  c.head_dim = c.hidden_size / c.num_heads;
  c.norm_eps = 1e-5;  // OPT uses nn.LayerNorm's default
  c.tie_word_embeddings = get_or<bool>(j, "tie_word_embeddings", true);
  c.do_layer_norm_before = get_or<bool>(j, "do_layer_norm_before", true);
  c.word_embed_proj_dim = optional_int(j, "word_embed_proj_dim", path).value_or(c.hidden_size);
  check_positive(c.word_embed_proj_dim, "word_embed_proj_dim", path);
  c.enable_bias = get_or<bool>(j, "enable_bias", true);
  c.activation = get_or<std::string>(j, "activation_function", "relu");
  ALPS_CHECK(c.activation == "relu", path.string(), ": activation_function: expected 'relu', got '", c.activation,
             "'");
  ALPS_CHECK(get_or<bool>(j, "layer_norm_elementwise_affine", true), path.string(),
             ": layer_norm_elementwise_affine=false is not supported");
  ALPS_CHECK(!get_or<bool>(j, "_remove_final_layer_norm", false), path.string(),
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
    c.torch_dtype = get_or<std::string>(j, "torch_dtype", get_or<std::string>(j, "dtype", ""));
  } catch (const json::exception& e) {
    ALPS_FAIL(path.string(), ": malformed field: ", e.what());
  }
  return c;
}

}  // namespace alps::model
