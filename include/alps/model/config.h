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
  std::string type;  ///< "linear", "dynamic", "llama3" or "longrope" (others are rejected with a clear error)
  double factor = 1.0;
  // llama3 only
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;  ///< llama3 and longrope
  // longrope only: per-frequency divisors up to / beyond original_max_position_embeddings, and the factor on cos and
  // sin
  std::vector<double> short_factor, long_factor;
  double attention_factor = 1.0;
};

/// Where a LLaMA-style block applies its RMSNorms.
enum class NormPlacement {
  pre,       ///< on the inputs of attention and of the MLP (LLaMA, Mistral, Qwen)
  post,      ///< on the outputs of attention and of the MLP, before each residual sum (OLMo 2)
  sandwich,  ///< both: four norms per block (Gemma 2 and 3)
};
/// RMSNorm of the queries and keys, before RoPE.
enum class QkNorm {
  none,
  per_head,  ///< over each head's head_dim (Qwen3, Gemma 3)
  whole,     ///< over the whole projection, every head at once (OLMo 2)
};
/// How an RMSNorm's weight w scales the normalised x (the same in fp32; in half precision they round differently).
enum class NormScale {
  weight,           ///< x cast back to its dtype, then times w (LLaMA)
  weight_fp32,      ///< times w in fp32, then cast back (OLMo 2)
  one_plus_weight,  ///< times (1 + w) in fp32, then cast back (Gemma)
};

/// How a mixture-of-experts layer names its tensors within the block.
enum class ExpertNaming {
  qwen,     ///< router mlp.gate, experts mlp.experts.{e}.{gate,up,down}_proj (Qwen2-MoE, Qwen3-MoE, OLMoE)
  mixtral,  ///< router block_sparse_moe.gate, experts block_sparse_moe.experts.{e}.{w1,w3,w2} (gate, up, down)
};

/// A mixture-of-experts MLP: a router picks each token's top_k of num_experts gated MLPs (softmax over all of them in
/// fp32, then top-k) and sums their outputs weighted by the routing weights.
struct MoeConfig {
  int64_t num_experts = 0;
  /// The config.json fields that state num_experts (num_experts, num_local_experts: those the file has, else the
  /// family's), rewritten where experts are removed.
  std::vector<std::string> count_keys;
  int64_t top_k = 0;              ///< experts per token (num_experts_per_tok)
  int64_t intermediate_size = 0;  ///< each expert's
  /// The config.json field of each expert's intermediate_size: moe_intermediate_size (Qwen) or intermediate_size.
  std::string intermediate_key = "intermediate_size";
  bool norm_topk_prob = false;    ///< the top_k weights divided by their sum (Mixtral always; the others by config)
  /// The weights multiply the experts' outputs in fp32 and the product rounds to the compute dtype (Mixtral); the
  /// others round the weights first.
  bool weights_fp32 = false;
  /// Qwen2-MoE's shared expert: a gated MLP every token passes, scaled by sigmoid(shared_expert_gate x); 0: none.
  int64_t shared_expert_intermediate_size = 0;
  ExpertNaming naming = ExpertNaming::qwen;
  /// The checkpoint stores the experts as transformers 5's fused 3D tensors (mlp.experts.gate_up_proj, down_proj),
  /// which alps holds per expert and writes back fused (CausalLM::load).
  bool fused = false;
  /// Per layer: whether its MLP is the mixture (decoder_sparse_step, mlp_only_layers); the others hold a dense MLP of
  /// ModelConfig::intermediate_size.
  std::vector<bool> layers;
};

/// Which tokens a mixture of experts shows each expert's linears while observed.
enum class ExpertInputs {
  routed,  ///< the tokens the router sends it (what the expert computes on)
  all,     ///< every token (the block's output is still the routed one)
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
  // LLaMA family (LLaMA, Mistral, Qwen2 and 3, OLMo 2, Gemma 2 and 3, Phi-3)
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  /// The leading int(head_dim * factor) dimensions of each head rotate, the rest pass (Phi-3 and Phi-4).
  double partial_rotary_factor = 1.0;
  /// q, k and v as one qkv_proj (in that order) and gate and up as one gate_up_proj (gate first), as Phi-3 stores
  /// them: each is one linear with one input.
  bool fused_projections = false;
  /// Where the language model's tensors sit in a multimodal checkpoint ("language_model." in Gemma 3's), empty for a
  /// causal LM's own checkpoint. Every tensor outside it (a vision tower, a projector) is carried to the output as
  /// it is.
  std::string language_model_prefix;
  /// Where config.json holds the language model's fields in such a checkpoint ("text_config" in Gemma 3's); empty:
  /// at its top level. A structured run's smaller counts are written there.
  std::string config_section;
  bool attention_bias = false;  ///< bias on q, k, v and o projections (LLaMA's attention_bias)
  bool qkv_bias = false;        ///< bias on q, k and v only (Qwen2)
  bool mlp_bias = false;
  /// Per layer: how many keys a query sees, itself included (sliding-window attention); 0 = every earlier key.
  /// Empty means 0 for every layer.
  std::vector<int64_t> sliding_window;
  /// The RoPE base of the sliding layers where it differs from the others' (Gemma 3's rope_local_base_freq; they
  /// rotate without scaling).
  std::optional<double> sliding_rope_theta;
  NormPlacement norm_placement = NormPlacement::pre;
  QkNorm qk_norm = QkNorm::none;
  NormScale norm_scale = NormScale::weight;
  bool scale_embeddings = false;  ///< embeddings times sqrt(hidden_size), rounded to the compute dtype (Gemma)
  double attention_scale = 0;     ///< multiplies q k^T; 0: 1 / sqrt(head_dim) (Gemma: query_pre_attn_scalar^-1/2)
  double attention_softcap = 0;   ///< > 0: attention scores s -> cap * tanh(s / cap) before the mask (Gemma 2)
  double logit_softcap = 0;       ///< > 0: the same on the final logits (Gemma 2)
  double clip_qkv = 0;            ///< > 0: q, k and v clamped to [-clip, clip] after their norms (OLMoE)
  std::optional<MoeConfig> moe;   ///< mixture-of-experts MLPs (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE)
  // OPT
  bool do_layer_norm_before = true;
  int64_t word_embed_proj_dim = 0;  ///< project_in/out exist when != hidden_size
  bool enable_bias = true;
  std::string activation = "silu";  ///< hidden_act / hidden_activation / activation_function
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
  /// The dimensions of a head that RoPE rotates: int(head_dim * partial_rotary_factor).
  int64_t rotary_dim() const;
  /// Whether layer i's MLP is a mixture of experts.
  bool is_moe_layer(int64_t i) const;
};

/// The dimensions of a head of `head_dim` that RoPE rotates with `partial_rotary_factor`: int(head_dim * factor),
/// truncated as transformers' Python int() truncates.
int64_t rotary_dim(int64_t head_dim, double partial_rotary_factor);

/// Parses and validates `path` (config.json); unknown architectures and inconsistent sizes are errors naming the file.
ModelConfig load_config(const std::filesystem::path& path);

/// The architectures load_config accepts, as "LlamaForCausalLM, MistralForCausalLM, ...".
std::string supported_architectures();

}  // namespace alps::model
