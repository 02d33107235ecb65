// Qwen3MoeForCausalLM (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention (QK-norm per head, no biases unless
// attention_bias) with a mixture of experts in place of the MLP (moe.h): 128 experts, 8 per token, the top-k weights
// renormalised when norm_topk_prob. decoder_sparse_step and mlp_only_layers may leave layers with a dense MLP.
// head_dim defaults to hidden_size / num_attention_heads (Qwen3's 128 is not this config's). With
// use_sliding_window, every layer slides.
#include "model/architecture.h"
#include "model/config_reader.h"
#include "model/moe.h"

namespace alps::model {

void read_qwen3_moe_config(const ConfigReader& r, ModelConfig& c) {
  read_llama_family_config(r, LlamaDefaults(32768, 4), c);
  c.attention_bias = r.boolean("attention_bias", false);
  c.qk_norm = QkNorm::per_head;
  const int64_t window = r.boolean("use_sliding_window", false) ? read_sliding_window(r, 4096) : 0;
  if (window > 0) c.sliding_window.assign(static_cast<size_t>(c.num_layers), window);
  MoeDefaults moe{128, 8, 768};
  moe.sparse_layers = true;
  read_moe_config(r, moe, c);
}

}  // namespace alps::model
