// Gemma3ForCausalLM (Gemma 3's text models): Gemma 2's block with an RMSNorm on every head of the queries and keys
// (q_norm, k_norm, scaling by 1 + w) and without soft-capping unless config.json asks for it; five sliding layers to
// one full one by default (sliding_window_pattern); the sliding layers rotate with their own RoPE base
// (rope_local_base_freq, 10000, unscaled), the full ones with rope_theta (1e6) and its scaling. transformers 5.x
// writes both as rope_parameters per layer type, 4.x as rope_theta, rope_local_base_freq and rope_scaling.
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "model/architecture.h"
#include "model/config_reader.h"
#include "model/rope.h"

namespace alps::model {

namespace {

void read_gemma3_rope(const ConfigReader& r, ModelConfig& c) {
  nlohmann::json full = nlohmann::json::object(), sliding = nlohmann::json::object();
  if (r.has("rope_parameters")) {
    const nlohmann::json& rope = r.raw().at("rope_parameters");
    ALPS_CHECK(rope.is_object(), r.field("rope_parameters"), " must be an object, got ", rope.dump());
    for (const auto& [key, value] : rope.items()) {
      ALPS_CHECK(key == "full_attention" || key == "sliding_attention", r.field("rope_parameters"),
                 ": expected an object per layer type (full_attention, sliding_attention), got '", key, "'");
      ALPS_CHECK(value.is_object() || value.is_null(), r.field("rope_parameters"), ".", key, " must be an object, got ",
                 value.dump());
    }
    if (rope.contains("full_attention") && rope["full_attention"].is_object()) full = rope["full_attention"];
    if (rope.contains("sliding_attention") && rope["sliding_attention"].is_object())
      sliding = rope["sliding_attention"];
  }
  if (r.has("rope_scaling")) {  // transformers lays it over the full layers' parameters
    const nlohmann::json& scaling = r.raw().at("rope_scaling");
    ALPS_CHECK(scaling.is_object(), r.field("rope_scaling"), " must be an object, got ", scaling.dump());
    full.update(scaling);
  }
  const RopeParameters global = read_rope_parameters(ConfigReader(full, r.path(), "rope_parameters.full_attention."), r,
                                                     r.number("rope_theta", 1e6), c);
  const ConfigReader local_reader(sliding, r.path(), "rope_parameters.sliding_attention.");
  const RopeParameters local = read_rope_parameters(local_reader, r, r.number("rope_local_base_freq", 1e4), c);
  ALPS_CHECK(!local.scaling, local_reader.field("rope_type"),
             ": only 'default' (no scaling) is supported on the sliding layers, got '", local.scaling->type, "'");
  c.rope_theta = global.theta;
  c.rope_scaling = global.scaling;
  c.sliding_rope_theta = local.theta;
}

}  // namespace

void read_gemma3_config(const ConfigReader& r, ModelConfig& c) {
  GemmaDefaults gemma{131072, r.optional_int("sliding_window_pattern").value_or(6), 0, 0, true};
  read_gemma_family_config(r, gemma, c);
  c.qk_norm = QkNorm::per_head;
  read_gemma3_rope(r, c);
}

// Gemma3ForConditionalGeneration (Gemma 3 4B and larger): the text model's config under text_config and its tensors
// under language_model. (model.*, lm_head), beside a SigLIP vision tower and its projector, which text never
// reaches: alps prunes and evaluates the text model and carries the rest to the output byte for byte.
void read_gemma3_multimodal_config(const ConfigReader& r, ModelConfig& c) {
  ALPS_CHECK(r.has("text_config") && r.raw().at("text_config").is_object(), r.field("text_config"),
             ": a Gemma 3 multimodal config holds its text model's config here; found ",
             r.raw().contains("text_config") ? r.raw().at("text_config").dump() : std::string("nothing"));
  const ConfigReader text(r.raw().at("text_config"), r.path(), "text_config.");
  read_gemma3_config(text, c);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", c.tie_word_embeddings);
  c.language_model_prefix = "language_model.";
  c.config_section = "text_config";
  c.bos_token_id = read_token_id(text, "bos_token_id");
  c.eos_token_id = read_token_id(text, "eos_token_id");
}

}  // namespace alps::model
