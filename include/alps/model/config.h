#pragma once
// config.json of a Hugging Face checkpoint, reduced to what the forward pass needs (and validated).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace alps::model {

/// RoPE frequency scaling ("rope_scaling" / "rope_parameters" with a rope_type other than "default").
struct RopeScaling {
  std::string type;  ///< "linear", "dynamic" or "llama3" (others are rejected with a clear error)
  double factor = 1.0;
  // llama3 only
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture;  ///< config.json "architectures"[0], e.g. "LlamaForCausalLM", "OPTForCausalLM"
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
  // LLaMA family (LLaMA, Mistral, Qwen2)
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool attention_bias = false;  ///< bias on q, k, v and o projections (LLaMA's attention_bias)
  bool qkv_bias = false;        ///< bias on q, k and v only (Qwen2)
  bool mlp_bias = false;
  /// Per layer: how many keys a query sees, itself included (sliding-window attention); 0 = every earlier key.
  /// Empty means 0 for every layer.
  std::vector<int64_t> sliding_window;
  // OPT
  bool do_layer_norm_before = true;
  int64_t word_embed_proj_dim = 0;  ///< project_in/out exist when != hidden_size
  bool enable_bias = true;
  std::string activation = "silu";  ///< hidden_act / activation_function
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> eos_token_id;
  std::string torch_dtype;  ///< as written in config.json (informational)

  /// Longest token sequence a forward accepts: max_positions, except with dynamic RoPE scaling, which exists to
  /// run beyond it (the frequencies are rescaled for the length of each forward).
  int64_t max_sequence_length() const;
  /// The window of calibration and evaluation when none is given: kProtocolWindow, or max_positions when the model
  /// has fewer.
  int64_t default_window() const;
  /// The window of the pruning literature's protocol (SparseGPT, Wanda, ALPS: 2048 tokens).
  static constexpr int64_t kProtocolWindow = 2048;
  /// Sliding window of layer i (0 = none).
  int64_t window_of_layer(int64_t i) const;
};

/// Parses and validates `path` (config.json); unknown architectures and inconsistent sizes are errors naming the file.
ModelConfig load_config(const std::filesystem::path& path);

/// The architectures load_config accepts, as "LlamaForCausalLM, MistralForCausalLM, ...".
std::string supported_architectures();

}  // namespace alps::model
