// Qwen2ForCausalLM (Qwen2, Qwen2.5): a LLaMA block with biases on the q, k and v projections (not on o_proj nor
// the MLP). Sliding-window attention is off unless use_sliding_window is true; then layer_types says which layers
// slide, or, in configs written before layer_types existed, the layers from max_window_layers on.
#include <vector>

#include "alps/core/error.h"
#include "model/architecture.h"
#include "model/config_reader.h"

namespace alps::model {

void read_qwen2_config(const ConfigReader& r, ModelConfig& c) {
  read_llama_family_config(r, LlamaDefaults(32768, 32), c);
  c.qkv_bias = true;
  read_qwen_sliding_windows(r, c);
}

void read_qwen_sliding_windows(const ConfigReader& r, ModelConfig& c) {
  // The config classes drop sliding_window (absent: 4096) unless use_sliding_window.
  const int64_t window = r.boolean("use_sliding_window", false) ? read_sliding_window(r, 4096) : 0;
  // Configs written before layer_types existed: the layers from max_window_layers on.
  const auto L = static_cast<size_t>(c.num_layers);
  std::vector<bool> legacy(L, false);
  const int64_t first_sliding = r.optional_int("max_window_layers").value_or(28);
  for (size_t i = 0; i < L; ++i) legacy[i] = window > 0 && static_cast<int64_t>(i) >= first_sliding;
  set_sliding_layers(r, legacy, window, "sliding attention is off (use_sliding_window false or sliding_window null)",
                     c);
}

}  // namespace alps::model
