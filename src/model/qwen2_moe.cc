// Qwen2MoeForCausalLM (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention (q, k and v biases unless qkv_bias is
// false; sliding layers as Qwen2) with a mixture of experts (moe.h: 60 experts, 4 per token) plus a shared expert
// that every token passes, scaled by sigmoid(shared_expert_gate x). decoder_sparse_step and mlp_only_layers may leave
// layers with a dense MLP of intermediate_size.
#include "model/architecture.h"
#include "model/config_reader.h"
#include "model/moe.h"

namespace alps::model {

void read_qwen2_moe_config(const ConfigReader& r, ModelConfig& c) {
  read_llama_family_config(r, LlamaDefaults(32768, 16), c);
  c.qkv_bias = r.boolean("qkv_bias", true);
  read_qwen_sliding_windows(r, c);
  MoeDefaults moe{60, 4, 1408};
  moe.sparse_layers = true;
  moe.shared_expert_intermediate_size = 5632;
  read_moe_config(r, moe, c);
}

}  // namespace alps::model
