// OlmoeForCausalLM (OLMoE-1B-7B): a pre-norm LLaMA block whose queries and keys are RMS-normalised over the whole
// projection (every head at once) before RoPE, q, k and v optionally clamped to +-clip_qkv, and a mixture of experts
// in place of the MLP (moe.h: 64 experts of intermediate_size, 8 per token, renormalised when norm_topk_prob).
#include "alps/core/error.h"
#include "model/architecture.h"
#include "model/config_reader.h"
#include "model/moe.h"

namespace alps::model {

void read_olmoe_config(const ConfigReader& r, ModelConfig& c) {
  LlamaDefaults defaults(4096);
  defaults.norm_eps = 1e-5;
  read_llama_family_config(r, defaults, c);
  c.attention_bias = r.boolean("attention_bias", false);
  c.qk_norm = QkNorm::whole;
  c.clip_qkv = r.number("clip_qkv", 0);
  ALPS_CHECK(c.clip_qkv >= 0, r.field("clip_qkv"), " must be positive or null, got ", c.clip_qkv);
  read_moe_config(r, MoeDefaults{64, 8, std::nullopt}, c);
}

}  // namespace alps::model
