#pragma once
// The mixture-of-experts MLP of Mixtral, Qwen2-MoE, Qwen3-MoE and OLMoE, as transformers computes it: a router (a
// linear without bias) scores every expert, the softmax over all of them in fp32 picks each token's top-k, whose
// weights are renormalised where the family does so; each expert (a gated MLP) runs on the tokens routed to it and
// its output, times the token's weight, is added to the token's sum in ascending expert order. Qwen2-MoE adds a
// shared expert every token passes, scaled by a sigmoid gate.
#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "alps/model/causal_lm.h"
#include "alps/model/config.h"

namespace alps::model {

struct TensorSpec;
class ConfigReader;

/// The short names (within a block) of a mixture layer's tensors.
class MoeNames {
 public:
  explicit MoeNames(const MoeConfig& c);
  std::string router() const;
  /// Expert e's gated MLP: gate, up and down projections.
  std::string gate(int64_t e) const;
  std::string up(int64_t e) const;
  std::string down(int64_t e) const;
  /// Qwen2-MoE's shared expert ("gate_proj", "up_proj", "down_proj") and its gate.
  std::string shared(const char* projection) const;
  std::string shared_gate() const;
  /// The prunable linears in execution order: each of `experts` experts' gate, up and down (a block whose experts
  /// were removed holds fewer than the config's), then the shared expert's. The routers (a row per expert) are not
  /// among them.
  std::vector<std::string> linears(int64_t experts) const;
  /// Expert e's tensors (short names within the block).
  std::vector<std::string> expert_tensors(int64_t e) const;
  /// Every tensor of the layer (hidden: the model's width), under `prefix` ("model.layers.3.").
  std::vector<TensorSpec> specs(const std::string& prefix, int64_t hidden) const;

 private:
  const MoeConfig& c_;
  std::string root_;                ///< "mlp." / "block_sparse_moe."
  const char *gate_, *up_, *down_;  ///< the experts' projection names
};

/// What the mixture reads its weights and shows its inputs through: `weight(name)` is a weight by its linear's short
/// name; `observe(name, x)`, when set, shows x as that linear's input; `activation` is the experts' (in place).
struct MoeIo {
  std::function<at::Tensor(const std::string&)> weight;
  std::function<void(const std::string&, const at::Tensor&)> observe;
  std::function<at::Tensor(at::Tensor)> activation;
};

/// How a forward shows the experts' inputs to an observer.
struct MoeObservation {
  /// Every expert sees every token (its gate and up every token's input, its down the gated product on every token),
  /// while the layer's output stays the routed one: --moe-calibration all. Otherwise each expert sees the tokens
  /// routed to it.
  bool all_experts = false;
  /// Only the inputs are wanted: the down projections' products (and the output) are not computed, unless `outputs`
  /// wants them.
  bool inputs_only = false;
  /// When set, sees each expert's output on the tokens routed to it with their routing probabilities (REAP's
  /// saliency, docs/moe.md).
  const ExpertObserver* outputs = nullptr;
  /// Shows the router (a linear of a row per expert) its input, every token, before the experts': a recipe rule
  /// prunes it (docs/moe.md). Otherwise it is not among the observed linears.
  bool router = false;
};

/// The mixture on h [batch, seq, hidden] -> [batch, seq, hidden] (undefined when inputs_only). Its experts are the
/// router's rows, as many as the config says or fewer where experts were removed.
at::Tensor moe_forward(const MoeConfig& c, const MoeNames& names, const MoeIo& io, const at::Tensor& h,
                       const MoeObservation& observation);

/// What an MoE family's config.json omits, as its config class defaults it.
struct MoeDefaults {
  int64_t num_experts;
  int64_t top_k;
  /// The experts' width: moe_intermediate_size (the Qwen MoEs, beside a dense intermediate_size) or, where absent
  /// (Mixtral, OLMoE), ModelConfig::intermediate_size.
  std::optional<int64_t> moe_intermediate_size;
  bool sparse_layers = false;     ///< decoder_sparse_step and mlp_only_layers say which layers are mixtures (Qwen)
  bool always_normalise = false;  ///< the top-k weights always renormalised (Mixtral), else norm_topk_prob
  bool weights_fp32 = false;      ///< MoeConfig::weights_fp32 (Mixtral)
  std::optional<int64_t> shared_expert_intermediate_size;  ///< Qwen2-MoE's default; nullopt: no shared expert
  ExpertNaming naming = ExpertNaming::qwen;
};
/// Reads the mixture's fields into c.moe (after the family's sizes): the expert count under num_experts or
/// num_local_experts (transformers 5 writes either for the same config), top-k within it, which layers are mixtures.
void read_moe_config(const ConfigReader& r, const MoeDefaults& defaults, ModelConfig& c);

}  // namespace alps::model
