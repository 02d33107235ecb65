// The supported architectures: the only list. A new architecture is a file with its config reader (and, for a new
// family, its forward) plus one row here, with the declarations of what the row names beside it.
#include <string>

#include "model/architecture.h"

namespace alps::model {

// Forwards, one per family (llama.cc, opt.cc).
std::unique_ptr<Architecture> make_llama(const ModelConfig& config);
std::unique_ptr<Architecture> make_opt(const ModelConfig& config);
// Config readers, one per architecture (the file of the same name).
void read_llama_config(const ConfigReader& r, ModelConfig& c);
void read_opt_config(const ConfigReader& r, ModelConfig& c);
void read_mistral_config(const ConfigReader& r, ModelConfig& c);
void read_qwen2_config(const ConfigReader& r, ModelConfig& c);
void read_qwen3_config(const ConfigReader& r, ModelConfig& c);
void read_olmo2_config(const ConfigReader& r, ModelConfig& c);
void read_phi3_config(const ConfigReader& r, ModelConfig& c);
void read_gemma2_config(const ConfigReader& r, ModelConfig& c);
void read_gemma3_config(const ConfigReader& r, ModelConfig& c);
void read_gemma3_multimodal_config(const ConfigReader& r, ModelConfig& c);
void read_mixtral_config(const ConfigReader& r, ModelConfig& c);
void read_qwen2_moe_config(const ConfigReader& r, ModelConfig& c);
void read_qwen3_moe_config(const ConfigReader& r, ModelConfig& c);
void read_olmoe_config(const ConfigReader& r, ModelConfig& c);

namespace {

// Mistral, Qwen2 and 3, OLMo 2, Gemma 2 and 3, Phi-3 and the mixtures of experts are LLaMA blocks with config-driven
// differences (sliding-window attention, biases, QK-norm, where the norms sit and how they scale, soft-capping, RoPE
// per layer type, fused projections, partial rotary, expert MLPs), so they share its forward.
constexpr ArchitectureEntry kArchitectures[] = {
    {"Gemma2ForCausalLM", "gemma2", &read_gemma2_config, &make_llama},
    {"Gemma3ForCausalLM", "gemma3_text", &read_gemma3_config, &make_llama},
    {"Gemma3ForConditionalGeneration", "gemma3", &read_gemma3_multimodal_config, &make_llama},
    {"LlamaForCausalLM", "llama", &read_llama_config, &make_llama},
    {"MistralForCausalLM", "mistral", &read_mistral_config, &make_llama},
    {"MixtralForCausalLM", "mixtral", &read_mixtral_config, &make_llama},
    {"OPTForCausalLM", "opt", &read_opt_config, &make_opt},
    {"Olmo2ForCausalLM", "olmo2", &read_olmo2_config, &make_llama},
    {"OlmoeForCausalLM", "olmoe", &read_olmoe_config, &make_llama},
    {"Phi3ForCausalLM", "phi3", &read_phi3_config, &make_llama},
    {"Qwen2ForCausalLM", "qwen2", &read_qwen2_config, &make_llama},
    {"Qwen2MoeForCausalLM", "qwen2_moe", &read_qwen2_moe_config, &make_llama},
    {"Qwen3ForCausalLM", "qwen3", &read_qwen3_config, &make_llama},
    {"Qwen3MoeForCausalLM", "qwen3_moe", &read_qwen3_moe_config, &make_llama},
};

}  // namespace

const ArchitectureEntry* find_architecture(const std::string& name) {
  for (const ArchitectureEntry& a : kArchitectures)
    if (name == a.name) return &a;
  return nullptr;
}

const ArchitectureEntry* find_model_type(const std::string& model_type) {
  for (const ArchitectureEntry& a : kArchitectures)
    if (model_type == a.model_type) return &a;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const ArchitectureEntry& a : kArchitectures) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

}  // namespace alps::model
