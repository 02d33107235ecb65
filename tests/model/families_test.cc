// The config readers of the families that run the LLaMA forward with features of their own (Qwen3, OLMo 2, Gemma 2
// and 3, Phi-3). Their forwards match transformers' logits on the fixtures (causal_lm_test.cc); here, that each feature
// the fixtures switch on shapes those logits (so that matching them is evidence the feature is computed), that the
// older ways of writing a config read the same, and that what is not supported is refused naming the field.
#include <ATen/ATen.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "alps/core/error.h"
#include "alps/model/causal_lm.h"
#include "alps/model/config.h"
#include "model_fixtures.h"
#include "support.h"

namespace alps::model {
namespace {

using nlohmann::json;

at::Tensor golden_logits_of(const fs::path& dir, const std::string& name) {
  io::SafetensorsFile golden(fixture(name + ".golden.safetensors"));
  return CausalLM::load(dir).forward(golden.tensor("input_ids"));
}

TEST(Families, ConfigsReadAsTheirConfigClasses) {
  const ModelConfig qwen3 = load_config(fixture("qwen3_qknorm") / "config.json");
  EXPECT_EQ(qwen3.qk_norm, QkNorm::per_head);
  EXPECT_TRUE(qwen3.attention_bias);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_EQ(qwen3.head_dim, 16);
  EXPECT_EQ(qwen3.sliding_window, (std::vector<int64_t>{0, 6}));
  const ModelConfig qwen3_moe = load_config(fixture("qwen3_moe_routed") / "config.json");
  ASSERT_TRUE(qwen3_moe.moe.has_value());
  EXPECT_EQ(qwen3_moe.moe->num_experts, 6);  // written as num_local_experts by transformers 5
  EXPECT_EQ(qwen3_moe.moe->top_k, 2);
  EXPECT_EQ(qwen3_moe.moe->intermediate_size, 24);
  EXPECT_TRUE(qwen3_moe.moe->norm_topk_prob);
  EXPECT_EQ(qwen3_moe.moe->layers, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(qwen3_moe.intermediate_size, 48);  // the dense layer's
  const ModelConfig qwen2_moe = load_config(fixture("qwen2_moe_shared") / "config.json");
  EXPECT_EQ(qwen2_moe.moe->layers, (std::vector<bool>{false, true}));
  EXPECT_EQ(qwen2_moe.moe->shared_expert_intermediate_size, 40);
  EXPECT_TRUE(qwen2_moe.qkv_bias);
  const ModelConfig mixtral = load_config(fixture("mixtral_top2") / "config.json");
  EXPECT_EQ(mixtral.moe->naming, ExpertNaming::mixtral);
  EXPECT_TRUE(mixtral.moe->norm_topk_prob);
  EXPECT_TRUE(mixtral.moe->weights_fp32);
  EXPECT_EQ(mixtral.moe->intermediate_size, 48);
  EXPECT_EQ(mixtral.sliding_window, (std::vector<int64_t>{8, 8}));
  const ModelConfig olmoe = load_config(fixture("olmoe_clip") / "config.json");
  EXPECT_EQ(olmoe.qk_norm, QkNorm::whole);
  EXPECT_DOUBLE_EQ(olmoe.clip_qkv, 0.5);
  EXPECT_EQ(olmoe.moe->top_k, 3);
  EXPECT_FALSE(olmoe.moe->norm_topk_prob);
  EXPECT_FALSE(load_config(fixture("qwen3_qknorm") / "config.json").moe.has_value());
  const ModelConfig olmo2 = load_config(fixture("olmo2_post") / "config.json");
  EXPECT_EQ(olmo2.norm_placement, NormPlacement::post);
  EXPECT_EQ(olmo2.qk_norm, QkNorm::whole);
  EXPECT_EQ(olmo2.norm_scale, NormScale::weight_fp32);
  const ModelConfig gemma2 = load_config(fixture("gemma2_softcap") / "config.json");
  EXPECT_EQ(gemma2.norm_placement, NormPlacement::sandwich);
  EXPECT_EQ(gemma2.norm_scale, NormScale::one_plus_weight);
  EXPECT_TRUE(gemma2.scale_embeddings);
  EXPECT_EQ(gemma2.activation, "gelu_pytorch_tanh");
  EXPECT_EQ(gemma2.attention_softcap, 2.0);
  EXPECT_EQ(gemma2.logit_softcap, 5.0);
  EXPECT_DOUBLE_EQ(gemma2.attention_scale, 1 / std::sqrt(24.0));
  EXPECT_EQ(gemma2.sliding_window, (std::vector<int64_t>{6, 0}));
  EXPECT_TRUE(gemma2.tie_word_embeddings);
  const ModelConfig gemma3 = load_config(fixture("gemma3_local_global") / "config.json");
  EXPECT_EQ(gemma3.qk_norm, QkNorm::per_head);
  EXPECT_EQ(gemma3.attention_softcap, 0);
  EXPECT_EQ(gemma3.logit_softcap, 0);
  EXPECT_EQ(gemma3.sliding_window, (std::vector<int64_t>{6, 0, 6}));
  EXPECT_EQ(gemma3.rope_theta, 1e6);
  ASSERT_TRUE(gemma3.rope_scaling.has_value());
  EXPECT_EQ(gemma3.rope_scaling->type, "linear");
  EXPECT_EQ(gemma3.sliding_rope_theta, 100.0);
  const ModelConfig mm = load_config(fixture("gemma3_multimodal") / "config.json");
  EXPECT_EQ(mm.architecture, "Gemma3ForConditionalGeneration");
  EXPECT_EQ(mm.language_model_prefix, "language_model.");
  EXPECT_EQ(mm.num_layers, 3);
  EXPECT_EQ(mm.qk_norm, QkNorm::per_head);
  EXPECT_TRUE(mm.tie_word_embeddings);
  EXPECT_EQ(mm.bos_token_id, 1);  // from text_config: the top level has none
  EXPECT_EQ(mm.eos_token_id, 2);
  const ModelConfig phi3 = load_config(fixture("phi3_longrope") / "config.json");
  EXPECT_TRUE(phi3.fused_projections);
  EXPECT_EQ(phi3.partial_rotary_factor, 0.5);
  EXPECT_EQ(phi3.rotary_dim(), 8);
  ASSERT_TRUE(phi3.rope_scaling.has_value());
  EXPECT_EQ(phi3.rope_scaling->type, "longrope");
  EXPECT_EQ(phi3.rope_scaling->original_max_position_embeddings, 16);
  EXPECT_EQ(phi3.rope_scaling->short_factor, (std::vector<double>{1.0, 1.3, 2.1, 3.7}));
  EXPECT_EQ(phi3.rope_scaling->long_factor, (std::vector<double>{1.1, 2.5, 5.0, 9.0}));
  EXPECT_DOUBLE_EQ(phi3.rope_scaling->attention_factor, std::sqrt(1 + std::log(4.0) / std::log(16.0)));
  EXPECT_EQ(CausalLM::load(fixture("phi3_longrope")).linear_names(0),
            (std::vector<std::string>{"self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"}));
}

// A config edit that removes one feature moves the logits far from transformers' (the golden logits have O(1)
// spread; these moves are at least a tenth of it).
TEST(Families, EachFeatureOfTheFixturesShapesTheirLogits) {
  test::TempDir tmp;
  const std::vector<std::pair<const char*, std::function<void(json&)>>> removals = {
      {"gemma2_softcap", [](json& j) { j["attn_logit_softcapping"] = nullptr; }},
      {"gemma2_softcap", [](json& j) { j["final_logit_softcapping"] = nullptr; }},
      {"gemma2_softcap", [](json& j) { j["query_pre_attn_scalar"] = 16; }},
      {"gemma2_softcap",
       [](json& j) {
         j["layer_types"] = {"full_attention", "full_attention"};
       }},
      {"gemma3_local_global", [](json& j) { j["rope_parameters"]["sliding_attention"]["rope_theta"] = 1e6; }},
      {"gemma3_local_global",
       [](json& j) {
         j["rope_parameters"]["full_attention"] = {{"rope_type", "default"}};
       }},
      {"gemma3_local_global",
       [](json& j) {
         j["layer_types"] = {"full_attention", "full_attention", "full_attention"};
       }},
      {"qwen3_qknorm",
       [](json& j) {
         j["layer_types"] = {"full_attention", "full_attention"};
       }},
      {"olmo2_post",
       [](json& j) {
         j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
       }},
      {"phi3_longrope",
       [](json& j) {
         j["rope_parameters"]["long_factor"] = {1.0, 1.3, 2.1, 3.7};
       }},
      {"phi3_longrope", [](json& j) { j["rope_parameters"]["attention_factor"] = 1.0; }},
      {"phi3_longrope",
       [](json& j) {
         j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
       }},
      {"phi3_swa", [](json& j) { j["sliding_window"] = nullptr; }},
      {"phi3_longrope",
       [](json& j) {
         j["rope_parameters"]["partial_rotary_factor"] = 0.25;
         j["rope_parameters"]["short_factor"] = {1.0, 1.3};
         j["rope_parameters"]["long_factor"] = {1.1, 2.5};
       }},
      // The mixtures: renormalising the top-k weights, how many experts a token takes, clipping. (Which layers are
      // mixtures shows in the tensors a checkpoint must hold: EveryNormAndFusedProjectionOfTheBlockIsRequired.)
      {"qwen3_moe_routed", [](json& j) { j["norm_topk_prob"] = false; }},
      {"qwen3_moe_routed", [](json& j) { j["num_experts_per_tok"] = 3; }},
      {"olmoe_clip", [](json& j) { j["clip_qkv"] = nullptr; }},
      {"olmoe_clip", [](json& j) { j["norm_topk_prob"] = true; }},
      {"qwen2_moe_shared", [](json& j) { j["norm_topk_prob"] = true; }},
  };
  for (const auto& [name, edit] : removals) {
    const fs::path dir = copy_fixture(name, tmp);
    edit_config(dir, edit);
    io::SafetensorsFile golden(fixture(std::string(name) + ".golden.safetensors"));
    const at::Tensor moved = golden_logits_of(dir, name) - golden.tensor("logits");
    EXPECT_GT(moved.abs().max().item<double>(), 0.1) << name << " " << [&] {
      json j;
      edit(j);
      return j.dump();
    }();
  }
}

// transformers 4.x wrote Gemma 3's RoPE as rope_theta, rope_local_base_freq and rope_scaling; Qwen3 configs from
// before layer_types mark the sliding layers with max_window_layers. Both read as the same network.
TEST(Families, OlderConfigFormsReadTheSameNetwork) {
  test::TempDir tmp;
  const fs::path gemma3 = copy_fixture("gemma3_local_global", tmp);
  edit_config(gemma3, [](json& j) {
    j.erase("rope_parameters");
    j["rope_theta"] = 1e6;
    j["rope_local_base_freq"] = 100.0;
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
    j.erase("layer_types");  // sliding_window_pattern 2: sliding, full, sliding
  });
  EXPECT_TRUE(golden_logits_of(gemma3, "gemma3_local_global")
                  .equal(golden_logits_of(fixture("gemma3_local_global"), "gemma3_local_global")));
  const fs::path qwen3 = copy_fixture("qwen3_qknorm", tmp);
  edit_config(qwen3, [](json& j) { j.erase("layer_types"); });  // max_window_layers 1: layer 1 slides
  EXPECT_TRUE(golden_logits_of(qwen3, "qwen3_qknorm").equal(golden_logits_of(fixture("qwen3_qknorm"), "qwen3_qknorm")));
  // Absent fields take the config classes' defaults: Gemma's head_dim 256 and Qwen3's 128 (not hidden / heads).
  edit_config(qwen3, [](json& j) { j.erase("head_dim"); });
  EXPECT_EQ(load_config(qwen3 / "config.json").head_dim, 128);
  edit_config(gemma3, [](json& j) { j.erase("head_dim"); });
  EXPECT_EQ(load_config(gemma3 / "config.json").head_dim, 256);
}

// An EOS list (several end tokens, as Llama 3 and Gemma 3 configs write it) gives its first id; a bad element is named
// as the field.
TEST(Families, TokenIdListsGiveTheirFirstId) {
  test::TempDir tmp;
  const fs::path dir = copy_fixture("qwen3_qknorm", tmp);
  edit_config(dir, [](json& j) { j["eos_token_id"] = {7, 2}; });
  EXPECT_EQ(load_config(dir / "config.json").eos_token_id, 7);
  edit_config(dir, [](json& j) { j["eos_token_id"] = {"seven"}; });
  EXPECT_NE(test::error_message([&] {
              load_config(dir / "config.json");
            }).find("field 'eos_token_id' must be an integer, got \"seven\""),
            std::string::npos);
}

// A multimodal checkpoint's tensors beside the language model are carried: loaded without a spec, written out as
// they are; the language model's own are checked as a causal LM's.
TEST(Families, MultimodalCheckpointsCarryTheVisionTowerAndCheckTheTextModel) {
  test::TempDir tmp;
  const CausalLM m = CausalLM::load(fixture("gemma3_multimodal"));
  EXPECT_EQ(m.weight_name(2, "self_attn.q_proj"), "language_model.model.layers.2.self_attn.q_proj.weight");
  const fs::path out = tmp / "saved";
  m.save(out);
  io::SafetensorsFile in(fixture("gemma3_multimodal") / "model.safetensors"), saved(out / "model.safetensors");
  int64_t carried = 0;
  for (const io::TensorEntry& e : in.entries()) {
    carried += e.name.rfind("language_model.", 0) != 0;
    EXPECT_TRUE(saved.tensor(e.name).equal(in.tensor(e.name))) << e.name;
  }
  EXPECT_GT(carried, 10);
  EXPECT_EQ(saved.entries().size(), in.entries().size());
  const fs::path broken = copy_fixture("gemma3_multimodal", tmp);
  rewrite_weights(broken, [](auto& ts) {
    ts.erase(std::remove_if(ts.begin(), ts.end(),
                            [](auto& t) { return t.first == "language_model.model.layers.1.self_attn.k_norm.weight"; }),
             ts.end());
  });
  EXPECT_NE(test::error_message([&] {
              CausalLM::load(broken);
            }).find("missing tensor language_model.model.layers.1.self_attn.k_norm.weight"),
            std::string::npos);
}

TEST(Families, UnsupportedValuesNameFileAndField) {
  test::TempDir tmp;
  const std::vector<ConfigCase> cases = {
      {"gemma2_softcap", [](json& j) { j["hidden_activation"] = "gelu"; },
       "field 'hidden_activation': expected 'gelu_pytorch_tanh', got 'gelu'"},
      {"gemma2_softcap", [](json& j) { j["use_bidirectional_attention"] = true; },
       "field 'use_bidirectional_attention': bidirectional attention"},
      {"gemma2_softcap", [](json& j) { j["attn_logit_softcapping"] = -1.0; },
       "field 'attn_logit_softcapping' must be positive or null, got -1"},
      {"gemma2_softcap", [](json& j) { j["query_pre_attn_scalar"] = 0; },
       "field 'query_pre_attn_scalar' must be positive"},
      {"gemma2_softcap", [](json& j) { j["sliding_window"] = nullptr; },
       "field 'layer_types': layer 0 is 'sliding_attention' but sliding_window is null"},
      {"gemma2_softcap", [](json& j) { j["layer_types"][1] = "chunked_attention"; },
       "field 'layer_types': layer 1: expected 'full_attention' or 'sliding_attention'"},
      {"gemma3_local_global",
       [](json& j) {
         j["rope_parameters"] = {{"rope_type", "default"}};
       },
       "field 'rope_parameters': expected an object per layer type (full_attention, sliding_attention), got "
       "'rope_type'"},
      {"gemma3_local_global",
       [](json& j) {
         j["rope_parameters"]["sliding_attention"] = {{"rope_type", "linear"}, {"factor", 2.0}};
       },
       "field 'rope_parameters.sliding_attention.rope_type': only 'default' (no scaling) is supported on the "
       "sliding layers, got 'linear'"},
      {"gemma3_local_global", [](json& j) { j["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; },
       "field 'rope_parameters.full_attention.rope_type': expected one of default, linear, dynamic, llama3, "
       "longrope, got 'yarn'"},
      {"gemma3_local_global",
       [](json& j) {
         j.erase("layer_types");
         j["sliding_window_pattern"] = 0;
       },
       "sliding_window_pattern must be positive"},
      {"qwen3_qknorm", [](json& j) { j["hidden_act"] = "gelu"; }, "field 'hidden_act': expected 'silu', got 'gelu'"},
      {"olmo2_post", [](json& j) { j["rms_norm_eps"] = 0; }, "rms_norm_eps must be positive"},
      {"phi3_longrope",
       [](json& j) {
         j["rope_parameters"]["short_factor"] = {1.0, 1.3};
       },
       "field 'rope_parameters.short_factor': expected a list of 4 numbers"},
      {"phi3_longrope", [](json& j) { j["rope_parameters"]["long_factor"][2] = -5.0; },
       "field 'rope_parameters.long_factor': every factor must be a positive number, got -5.0"},
      {"phi3_longrope", [](json& j) { j["rope_parameters"].erase("long_factor"); },
       "field 'rope_parameters.long_factor' is required for rope_type 'longrope'"},
      {"phi3_longrope", [](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.1; },
       "field 'rope_parameters.partial_rotary_factor': 0.1 rotates int(head_dim 16 * factor) = 1 dimensions"},
      {"phi3_longrope", [](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.5; },
       "field 'rope_parameters.partial_rotary_factor': 1.5 rotates"},
      {"phi3_longrope", [](json& j) { j["sliding_window"] = 0; }, "sliding_window must be positive"},
      {"qwen3_qknorm", [](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.5; },
       "field 'rope_parameters.partial_rotary_factor': only 1"},
      {"gemma3_multimodal", [](json& j) { j.erase("text_config"); },
       "field 'text_config': a Gemma 3 multimodal config holds its text model's config here; found nothing"},
      {"gemma3_multimodal", [](json& j) { j["text_config"]["hidden_activation"] = "relu"; },
       "field 'text_config.hidden_activation': expected 'gelu_pytorch_tanh', got 'relu'"},
      // Mixtures of experts: the expert count under either name, top-k within it, the layers that are mixtures.
      {"qwen3_moe_routed", [](json& j) { j["num_experts_per_tok"] = 7; },
       "field 'num_experts_per_tok': 7 experts per token, but num_local_experts is 6"},
      {"qwen3_moe_routed", [](json& j) { j["num_experts"] = 5; }, "num_experts 5 and num_local_experts 6 disagree"},
      {"qwen3_moe_routed", [](json& j) { j["mlp_only_layers"] = {3}; },
       "field 'mlp_only_layers': expected layer indices below num_hidden_layers 3, got 3"},
      {"qwen2_moe_shared", [](json& j) { j["decoder_sparse_step"] = 0; }, "decoder_sparse_step must be positive"},
      {"qwen2_moe_shared", [](json& j) { j["shared_expert_intermediate_size"] = 0; },
       "shared_expert_intermediate_size must be positive"},
      {"mixtral_top2", [](json& j) { j["num_local_experts"] = 0; }, "num_local_experts must be positive"},
      {"olmoe_clip", [](json& j) { j["clip_qkv"] = -1.0; }, "field 'clip_qkv' must be positive or null, got -1"},
  };
  expect_config_refusals(cases, tmp);
}

// The norms and fused projections a family's block has are the tensors it requires: a Gemma block without its
// pre-feedforward norm, an OLMo 2 block without its key norm, a Phi-3 block without gate_up_proj is a broken
// checkpoint named by the tensor; a fused projection whose width does not match the heads is refused by its shape,
// naming the config values that shape comes from.
TEST(Families, EveryNormAndFusedProjectionOfTheBlockIsRequired) {
  test::TempDir tmp;
  for (auto [name, tensor, shape] :
       {std::tuple{"gemma2_softcap", "model.layers.1.pre_feedforward_layernorm.weight", "[32]"},
        {"olmo2_post", "model.layers.0.self_attn.k_norm.weight", "[32]"},
        {"qwen3_qknorm", "model.layers.1.self_attn.q_norm.weight", "[16]"},
        {"phi3_longrope", "model.layers.0.mlp.gate_up_proj.weight", "[96, 32]"},
        // A mixture's router, an expert's projection, Qwen2-MoE's shared expert and its gate.
        {"qwen3_moe_routed", "model.layers.2.mlp.gate.weight", "[6, 32]"},
        {"mixtral_top2", "model.layers.1.block_sparse_moe.experts.3.w2.weight", "[32, 48]"},
        {"qwen2_moe_shared", "model.layers.1.mlp.shared_expert.down_proj.weight", "[32, 40]"},
        {"qwen2_moe_shared", "model.layers.1.mlp.shared_expert_gate.weight", "[1, 32]"}}) {
    const fs::path dir = copy_fixture(name, tmp);
    rewrite_weights(dir, [&, tensor = std::string(tensor)](auto& ts) {
      ts.erase(std::remove_if(ts.begin(), ts.end(), [&](auto& t) { return t.first == tensor; }), ts.end());
    });
    const std::string msg = test::error_message([&] { CausalLM::load(dir); });
    EXPECT_NE(msg.find(std::string("missing tensor ") + tensor + " (" + shape + ")"), std::string::npos) << msg;
  }
  // Which layers are mixtures is the config's: a dense layer made a mixture misses its experts.
  const fs::path moe = copy_fixture("qwen3_moe_routed", tmp);
  edit_config(moe, [](json& j) { j["mlp_only_layers"] = json::array(); });
  const std::string missing = test::error_message([&] { CausalLM::load(moe); });
  EXPECT_NE(missing.find("missing tensor model.layers.1.mlp."), std::string::npos) << missing;
  const fs::path dir = copy_fixture("phi3_longrope", tmp);
  edit_config(dir, [](json& j) { j["num_key_value_heads"] = 2; });  // q, k, v of 32 each: 96 rows, 64 stored
  const std::string msg = test::error_message([&] { CausalLM::load(dir); });
  EXPECT_NE(msg.find("model.layers.0.self_attn.qkv_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[96, 32]"), std::string::npos) << msg;
  // The message says which of config.json's values give that shape.
  EXPECT_NE(msg.find("from the query and key/value head counts, head_dim and hidden_size in config.json"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace alps::model
