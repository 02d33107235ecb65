#pragma once
// config.json of a Hugging Face checkpoint, reduced to what the forward pass needs (and validated).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace alps::model {

enum class Family { kLlama, kOpt };

/// LLaMA-3 style frequency scaling ("rope_scaling": {"rope_type": "llama3", ...}).
struct RopeScaling {
  std::string type;  ///< "llama3" (others are rejected with a clear error)
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Family family = Family::kLlama;
  std::string architecture;  ///< "LlamaForCausalLM" / "OPTForCausalLM"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  ///< LLaMA intermediate_size, OPT ffn_dim
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  ///< == num_heads without GQA
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_positions = 0;
  double norm_eps = 1e-5;
  bool tie_word_embeddings = true;
  // LLaMA
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool attention_bias = false;
  bool mlp_bias = false;
  // OPT
  bool do_layer_norm_before = true;
  int64_t word_embed_proj_dim = 0;  ///< project_in/out exist when != hidden_size
  bool enable_bias = true;
  std::string activation = "silu";  ///< hidden_act / activation_function
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> eos_token_id;
  std::string torch_dtype;  ///< as written in config.json (informational)
};

/// Parses and validates `path` (config.json); unknown architectures and inconsistent sizes are errors naming the file.
ModelConfig load_config(const std::filesystem::path& path);

}  // namespace alps::model
