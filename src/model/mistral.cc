// MistralForCausalLM: a LLaMA block without biases whose attention slides: with sliding_window W every query sees
// its W most recent positions (itself included), in every layer. Sequences of at most W tokens therefore compute
// exactly what full causal attention computes; longer ones get the window mask transformers builds.
#include "model/architecture.h"
#include "model/config_reader.h"

namespace alps::model {

void read_mistral_config(const ConfigReader& r, ModelConfig& c) {
  read_llama_family_config(r, LlamaDefaults(131072, 8), c);
  // MistralConfig's window is 4096 when the field is absent; null turns it off. (transformers' Mistral ignores
  // layer_types: every layer slides.)
  const int64_t window = read_sliding_window(r, 4096);
  if (window > 0) c.sliding_window.assign(static_cast<size_t>(c.num_layers), window);
}

}  // namespace alps::model
