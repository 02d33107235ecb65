#pragma once
// Where the LLaMA-like forward (llama.cc) finds its tensors, and what their shapes say once a structured run has
// removed units: a block's query and key/value heads and its experts, the rules by which its units leave
// (Architecture::unit_rules), and the config.json counts of the smaller checkpoint (Architecture::config_of_shapes).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "alps/model/causal_lm.h"
#include "alps/model/config.h"
#include "model/architecture.h"
#include "model/moe.h"

namespace alps::model {

class LlamaLayout {
 public:
  explicit LlamaLayout(const ModelConfig& c);
  LlamaLayout(const LlamaLayout&) = delete;  // moe_ refers to c_

  /// "model.layers.3." (inside a multimodal checkpoint "language_model.model.layers.3.").
  std::string block_prefix(int64_t i) const { return model_ + "layers." + std::to_string(i) + "."; }
  std::string embed_name() const { return model_ + "embed_tokens.weight"; }
  std::string final_norm_name() const { return model_ + "norm.weight"; }
  /// The head's weight: the embeddings' where tied.
  std::string head_name() const { return c_.tie_word_embeddings ? embed_name() : lm_head_; }
  /// The untied head's own tensor, which a tied checkpoint may still hold.
  const std::string& lm_head_name() const { return lm_head_; }
  /// The mixture layers' tensor names (a config with experts only).
  const MoeNames& moe() const { return *moe_; }

  /// A mixture block's experts: its router's rows (fewer than the config's where experts were removed).
  int64_t experts_of(int64_t block, const ShapeFn& shape) const;
  /// Block i's query and key/value heads as its tensors are now.
  std::pair<int64_t, int64_t> heads_of(int64_t block, const ShapeFn& shape) const;
  std::vector<UnitRule> unit_rules(int64_t block, Structure s, const ShapeFn& shape) const;
  nlohmann::json config_of_shapes(const ShapeFn& shape) const;

 private:
  UnitRule mlp_rule(const std::string& gate, const std::string& up, const std::string& down, const std::string& field,
                    int64_t units, bool bias) const;
  std::vector<UnitRule> neuron_rules(int64_t block, const ShapeFn& shape) const;
  UnitRule head_rule(int64_t block, Structure s, const ShapeFn& shape) const;

  ModelConfig c_;
  // The decoder's tensors ("model." or, inside a multimodal checkpoint, "language_model.model.") and the head's.
  std::string model_ = c_.language_model_prefix + "model.", lm_head_ = c_.language_model_prefix + "lm_head.weight";
  std::optional<MoeNames> moe_;
};

}  // namespace alps::model
