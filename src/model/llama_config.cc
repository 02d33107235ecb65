// The config readers of the LLaMA family (llama.cc's forward): sizes, grouped-query attention, head_dim, RMSNorm,
// the MLP's activation, RoPE, and the sliding windows its descendants declare.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alps/core/error.h"
#include "model/architecture.h"
#include "model/config_reader.h"
#include "model/rope.h"

namespace alps::model {

void read_llama_family_config(const ConfigReader& r, const LlamaDefaults& defaults, ModelConfig& c) {
  read_sizes(r, "intermediate_size", defaults.max_positions, c);
  // Absent takes the config class's default; null means "as many as the query heads".
  c.num_kv_heads = r.raw().contains("num_key_value_heads") ? r.optional_int("num_key_value_heads").value_or(c.num_heads)
                                                           : defaults.num_kv_heads.value_or(c.num_heads);
  r.check_positive(c.num_kv_heads, "num_key_value_heads");
  ALPS_CHECK(c.num_heads % c.num_kv_heads == 0, r.path().string(), ": num_attention_heads ", c.num_heads,
             " is not a multiple of num_key_value_heads ", c.num_kv_heads);
  // transformers reads `head_dim or hidden_size // num_attention_heads`: absent, null and 0 all mean the default,
  // which only makes sense when the division is exact. An explicit head_dim may differ from the quotient (the
  // projections are [heads * head_dim, hidden]).
  c.head_dim = r.raw().contains("head_dim") ? r.optional_int("head_dim").value_or(0) : defaults.head_dim.value_or(0);
  if (c.head_dim == 0) {
    ALPS_CHECK(c.hidden_size % c.num_heads == 0, r.path().string(), ": hidden_size ", c.hidden_size,
               " is not divisible by num_attention_heads ", c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  r.check_positive(c.head_dim, "head_dim");
  ALPS_CHECK(c.head_dim % 2 == 0, r.path().string(), ": head_dim must be even for RoPE, got ", c.head_dim);
  // RMSNorm divides by sqrt(mean(x^2) + eps): eps <= 0 turns a zero hidden state into NaN.
  c.norm_eps = r.number("rms_norm_eps", defaults.norm_eps);
  ALPS_CHECK(c.norm_eps > 0, r.path().string(), ": rms_norm_eps must be positive, got ", c.norm_eps);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", defaults.tie_word_embeddings);
  c.activation = r.string(defaults.activation_field, defaults.activation);
  ALPS_CHECK(c.activation == defaults.activation, r.field(defaults.activation_field), ": expected '",
             defaults.activation, "', got '", c.activation, "'");
  if (!defaults.rope_by_layer_type) read_rope(r, c, defaults.partial_rotary);
}

int64_t read_sliding_window(const ConfigReader& r, int64_t absent) {
  if (r.raw().contains("sliding_window") && !r.has("sliding_window")) return 0;
  if (!r.has("sliding_window")) return absent;
  const int64_t window = r.required_int("sliding_window");
  r.check_positive(window, "sliding_window");
  return window;
}

void set_sliding_layers(const ConfigReader& r, const std::vector<bool>& fallback, int64_t window, const char* off,
                        ModelConfig& c) {
  const auto L = static_cast<size_t>(c.num_layers);
  std::vector<bool> sliding = fallback;
  if (r.has("layer_types")) {
    const nlohmann::json& types = r.raw().at("layer_types");
    ALPS_CHECK(types.is_array() && types.size() == L, r.field("layer_types"), ": expected a list of ", L,
               " layer types (num_hidden_layers), got ", types.dump());
    for (size_t i = 0; i < L; ++i) {
      const nlohmann::json& t = types[i];
      ALPS_CHECK(t == "full_attention" || t == "sliding_attention", r.field("layer_types"), ": layer ", i,
                 ": expected 'full_attention' or 'sliding_attention', got ", t.dump());
      sliding[i] = t == "sliding_attention";
    }
  }
  c.sliding_window.assign(L, 0);
  for (size_t i = 0; i < L; ++i) {
    if (!sliding[i]) continue;
    // transformers cannot build this layer's mask either.
    ALPS_CHECK(window > 0, r.field("layer_types"), ": layer ", i, " is 'sliding_attention' but ", off);
    c.sliding_window[i] = window;
  }
}

void read_llama_config(const ConfigReader& r, ModelConfig& c) {
  read_llama_family_config(r, LlamaDefaults(), c);
  c.attention_bias = r.boolean("attention_bias", false);
  c.mlp_bias = r.boolean("mlp_bias", false);
}

}  // namespace alps::model
