// Phi3ForCausalLM (Phi-3, Phi-3.5 and Phi-4 dense): a LLaMA block whose q, k and v projections are stored as one
// qkv_proj and gate and up as one gate_up_proj (pruned as stored: one linear each, with one input); RoPE on the
// leading partial_rotary_factor of each head, with the longrope scaling of the long-context models; a sliding window
// on every layer when sliding_window is set.
#include "model/architecture.h"
#include "model/config_reader.h"

namespace alps::model {

void read_phi3_config(const ConfigReader& r, ModelConfig& c) {
  LlamaDefaults defaults(4096);
  defaults.norm_eps = 1e-5;
  defaults.partial_rotary = true;
  read_llama_family_config(r, defaults, c);
  c.fused_projections = true;
  const int64_t window = read_sliding_window(r, 0);  // Phi3Config: null, no window
  if (window > 0) c.sliding_window.assign(static_cast<size_t>(c.num_layers), window);
}

}  // namespace alps::model
