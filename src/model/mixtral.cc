// MixtralForCausalLM (Mixtral 8x7B, 8x22B): Mistral's attention (a sliding window only where config.json gives one)
// with a mixture of experts under block_sparse_moe (moe.h: 8 experts w1/w3/w2 of intermediate_size, 2 per token,
// the top-k weights always renormalised and kept in fp32 where they scale the experts' outputs).
#include "model/architecture.h"
#include "model/config_reader.h"
#include "model/moe.h"

namespace alps::model {

void read_mixtral_config(const ConfigReader& r, ModelConfig& c) {
  read_llama_family_config(r, LlamaDefaults(131072, 8), c);
  const int64_t window = read_sliding_window(r, 0);
  if (window > 0) c.sliding_window.assign(static_cast<size_t>(c.num_layers), window);
  MoeDefaults moe{8, 2, std::nullopt};
  moe.always_normalise = true;
  moe.weights_fp32 = true;
  moe.naming = ExpertNaming::mixtral;
  read_moe_config(r, moe, c);
}

}  // namespace alps::model
