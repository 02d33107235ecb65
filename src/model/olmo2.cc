// Olmo2ForCausalLM (OLMo 2): a LLaMA block whose norms sit on the outputs of attention and of the MLP, before each
// residual sum (h = x + norm(attn(x)); no norm on the sublayers' inputs), with an RMSNorm of the whole query and key
// projections (every head at once: self_attn.q_norm [heads * head_dim]) before RoPE. Its RMSNorm multiplies by the
// weight in fp32 and then casts back.
#include "model/architecture.h"
#include "model/config_reader.h"

namespace alps::model {

void read_olmo2_config(const ConfigReader& r, ModelConfig& c) {
  LlamaDefaults defaults;
  defaults.norm_eps = 1e-5;
  read_llama_family_config(r, defaults, c);
  c.attention_bias = r.boolean("attention_bias", false);
  c.norm_placement = NormPlacement::post;
  c.qk_norm = QkNorm::whole;
  c.norm_scale = NormScale::weight_fp32;
}

}  // namespace alps::model
