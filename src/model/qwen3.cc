// Qwen3ForCausalLM: Qwen2's block with an RMSNorm on every head of the queries and of the keys before RoPE
// (self_attn.q_norm and k_norm, over head_dim), attention_bias on all four attention projections in place of
// Qwen2's q/k/v biases, and head_dim 128 unless config.json gives it. Sliding windows as Qwen2.
#include "model/architecture.h"
#include "model/config_reader.h"

namespace alps::model {

void read_qwen3_config(const ConfigReader& r, ModelConfig& c) {
  LlamaDefaults defaults(32768, 32);
  defaults.head_dim = 128;
  read_llama_family_config(r, defaults, c);
  c.attention_bias = r.boolean("attention_bias", false);
  c.qk_norm = QkNorm::per_head;
  read_qwen_sliding_windows(r, c);
}

}  // namespace alps::model
