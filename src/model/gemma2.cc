// Gemma2ForCausalLM (Gemma 2): a LLaMA block with four RMSNorms (on the inputs and on the outputs of attention and
// of the MLP), each scaling by (1 + w) in fp32; embeddings multiplied by sqrt(hidden_size); a GeGLU MLP
// (gelu_pytorch_tanh); queries scaled by query_pre_attn_scalar^-1/2; attention scores and final logits soft-capped
// (cap * tanh(x / cap)); sliding windows on the layers layer_types marks (every other one by default); a tied head.
#include <cmath>
#include <vector>

#include "alps/core/error.h"
#include "model/architecture.h"
#include "model/config_reader.h"

namespace alps::model {

namespace {

// Absent: the config class's default; null: no capping.
double read_softcap(const ConfigReader& r, const char* key, double fallback) {
  if (r.raw().contains(key) && !r.has(key)) return 0;
  const double cap = r.number(key, fallback);
  ALPS_CHECK(cap > 0, r.field(key), " must be positive or null, got ", cap);
  return cap;
}

}  // namespace

void read_gemma_family_config(const ConfigReader& r, const GemmaDefaults& gemma, ModelConfig& c) {
  LlamaDefaults defaults(gemma.max_positions, 4);
  defaults.head_dim = 256;
  defaults.tie_word_embeddings = true;
  defaults.activation_field = "hidden_activation";
  defaults.activation = "gelu_pytorch_tanh";
  defaults.rope_by_layer_type = gemma.rope_by_layer_type;
  read_llama_family_config(r, defaults, c);
  ALPS_CHECK(!r.boolean("use_bidirectional_attention", false), r.field("use_bidirectional_attention"),
             ": bidirectional attention is not a causal LM's; only false is supported");
  c.attention_bias = r.boolean("attention_bias", false);
  c.norm_placement = NormPlacement::sandwich;
  c.norm_scale = NormScale::one_plus_weight;
  c.scale_embeddings = true;
  const double scalar = r.number("query_pre_attn_scalar", 256);
  ALPS_CHECK(scalar > 0, r.field("query_pre_attn_scalar"), " must be positive, got ", scalar);
  c.attention_scale = std::pow(scalar, -0.5);  // as Python's scalar**-0.5
  c.attention_softcap = read_softcap(r, "attn_logit_softcapping", gemma.attention_softcap);
  c.logit_softcap = read_softcap(r, "final_logit_softcapping", gemma.logit_softcap);

  const auto L = static_cast<size_t>(c.num_layers);
  r.check_positive(gemma.sliding_pattern, "sliding_window_pattern");
  std::vector<bool> every_nth(L);
  for (size_t i = 0; i < L; ++i) every_nth[i] = (i + 1) % static_cast<size_t>(gemma.sliding_pattern) != 0;
  set_sliding_layers(r, every_nth, read_sliding_window(r, 4096), "sliding_window is null", c);
}

void read_gemma2_config(const ConfigReader& r, ModelConfig& c) {
  read_gemma_family_config(r, GemmaDefaults{8192, 2, 50.0, 30.0, false}, c);
}

}  // namespace alps::model
