// The architecture table and the config readers of the LLaMA variants: which config.json values select which
// forward, and that everything unsupported fails naming config.json and the field. The forwards themselves are
// checked against transformers' logits in causal_lm_test.cc.
#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "alps/core/error.h"
#include "alps/model/causal_lm.h"
#include "alps/model/config.h"
#include "model_fixtures.h"
#include "support.h"

namespace alps::model {
namespace {

using nlohmann::json;

TEST(Architectures, TableListsEverySupportedArchitecture) {
  EXPECT_EQ(supported_architectures(),
            "Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration, LlamaForCausalLM, "
            "MistralForCausalLM, MixtralForCausalLM, OPTForCausalLM, Olmo2ForCausalLM, OlmoeForCausalLM, "
            "Phi3ForCausalLM, Qwen2ForCausalLM, Qwen2MoeForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM");
}

TEST(Architectures, ModelTypeSelectsTheArchitectureWhenArchitecturesIsAbsent) {
  test::TempDir tmp;
  for (auto [name, arch] : {std::pair{"mistral_swa", "MistralForCausalLM"},
                            {"qwen2_linear", "Qwen2ForCausalLM"},
                            {"llama_gqa", "LlamaForCausalLM"},
                            {"opt_pre", "OPTForCausalLM"},
                            {"qwen3_qknorm", "Qwen3ForCausalLM"},
                            {"olmo2_post", "Olmo2ForCausalLM"},
                            {"gemma2_softcap", "Gemma2ForCausalLM"},
                            {"gemma3_local_global", "Gemma3ForCausalLM"},
                            {"phi3_longrope", "Phi3ForCausalLM"},
                            {"qwen3_moe_routed", "Qwen3MoeForCausalLM"},
                            {"qwen2_moe_shared", "Qwen2MoeForCausalLM"},
                            {"mixtral_top2", "MixtralForCausalLM"},
                            {"olmoe_clip", "OlmoeForCausalLM"},
                            {"gemma3_multimodal", "Gemma3ForConditionalGeneration"}}) {
    const fs::path dir = copy_fixture(name, tmp);
    edit_config(dir, [](json& j) { j.erase("architectures"); });
    EXPECT_EQ(load_config(dir / "config.json").architecture, arch);
  }
}

TEST(Architectures, UnknownArchitectureOrModelTypeNamesFileFieldAndTheSupportedOnes) {
  test::TempDir tmp;
  const fs::path dir = copy_fixture("qwen2_linear", tmp);
  edit_config(dir, [](json& j) { j["architectures"] = {"DeepseekV3ForCausalLM"}; });
  std::string msg = test::error_message([&] { CausalLM::load(dir); });
  EXPECT_NE(
      msg.find((dir / "config.json").string() + ": unknown architecture 'DeepseekV3ForCausalLM' in field "
                                                "'architectures' (supported: Gemma2ForCausalLM, Gemma3ForCausalLM"),
      std::string::npos)
      << msg;
  edit_config(dir, [](json& j) {
    j.erase("architectures");
    j["model_type"] = "deepseek_v3";
  });
  msg = test::error_message([&] { CausalLM::load(dir); });
  EXPECT_NE(msg.find("no 'architectures' and unknown model_type 'deepseek_v3'"), std::string::npos) << msg;
  edit_config(dir, [](json& j) { j["architectures"] = {42}; });
  msg = test::error_message([&] { CausalLM::load(dir); });
  EXPECT_NE(msg.find("field 'architectures' must list names"), std::string::npos) << msg;
}

TEST(Architectures, MistralSlidingWindowDefaultsAsMistralConfig) {
  test::TempDir tmp;
  EXPECT_EQ(load_config(fixture("mistral_swa") / "config.json").sliding_window, (std::vector<int64_t>{8, 8}));
  const fs::path dir = copy_fixture("mistral_swa", tmp);
  edit_config(dir, [](json& j) { j.erase("sliding_window"); });  // MistralConfig's default
  EXPECT_EQ(load_config(dir / "config.json").sliding_window, (std::vector<int64_t>{4096, 4096}));
  edit_config(dir, [](json& j) { j["sliding_window"] = nullptr; });  // off
  const ModelConfig off = load_config(dir / "config.json");
  EXPECT_TRUE(off.sliding_window.empty());
  EXPECT_EQ(off.window_of_layer(1), 0);
  // Without the window, the 24-token golden sequence (window 8) no longer matches transformers' logits; a window
  // as long as the sequence computes exactly the full attention.
  io::SafetensorsFile golden(fixture("mistral_swa.golden.safetensors"));
  const at::Tensor ids = golden.tensor("input_ids");
  const at::Tensor full = CausalLM::load(dir).forward(ids);
  EXPECT_GT((full - golden.tensor("logits")).abs().max().item<double>(), 0.1);
  edit_config(dir, [](json& j) { j["sliding_window"] = 24; });
  EXPECT_TRUE(CausalLM::load(dir).forward(ids).equal(full));
  edit_config(dir, [](json& j) { j["sliding_window"] = 0; });
  EXPECT_NE(
      test::error_message([&] { load_config(dir / "config.json"); }).find("sliding_window must be positive, got 0"),
      std::string::npos);
}

TEST(Architectures, Qwen2LayersSlideFromMaxWindowLayersOnlyWithUseSlidingWindow) {
  test::TempDir tmp;
  EXPECT_TRUE(load_config(fixture("qwen2_linear") / "config.json").sliding_window == std::vector<int64_t>({0, 0}));
  EXPECT_TRUE(load_config(fixture("qwen2_linear") / "config.json").qkv_bias);
  EXPECT_FALSE(load_config(fixture("qwen2_linear") / "config.json").attention_bias);
  EXPECT_EQ(load_config(fixture("qwen2_swa") / "config.json").sliding_window, (std::vector<int64_t>{0, 6}));

  // A config written before layer_types existed: the layers from max_window_layers on slide, and the forward is
  // the same network (the golden logits still match).
  const fs::path legacy = copy_fixture("qwen2_swa", tmp);
  edit_config(legacy, [](json& j) { j.erase("layer_types"); });
  EXPECT_EQ(load_config(legacy / "config.json").sliding_window, (std::vector<int64_t>{0, 6}));
  io::SafetensorsFile golden(fixture("qwen2_swa.golden.safetensors"));
  const at::Tensor ids = golden.tensor("input_ids");
  EXPECT_TRUE(CausalLM::load(legacy).forward(ids).equal(CausalLM::load(fixture("qwen2_swa")).forward(ids)));
  edit_config(legacy, [](json& j) { j["max_window_layers"] = 0; });
  EXPECT_EQ(load_config(legacy / "config.json").sliding_window, (std::vector<int64_t>{6, 6}));
  edit_config(legacy, [](json& j) { j["use_sliding_window"] = false; });  // sliding_window is then ignored
  EXPECT_EQ(load_config(legacy / "config.json").sliding_window, (std::vector<int64_t>{0, 0}));
}

// Values transformers cannot run either, or that this forward does not implement: refused, naming config.json and
// the field.
TEST(Architectures, UnsupportedValuesNameFileAndField) {
  test::TempDir tmp;
  const std::vector<ConfigCase> cases = {
      {"qwen2_swa", [](json& j) { j["layer_types"] = {"full_attention"}; },
       "field 'layer_types': expected a list of 2"},
      {"qwen2_swa", [](json& j) { j["layer_types"][1] = "chunked_attention"; },
       "field 'layer_types': layer 1: expected 'full_attention' or 'sliding_attention', got \"chunked_attention\""},
      {"qwen2_swa", [](json& j) { j["use_sliding_window"] = false; }, "layer 1 is 'sliding_attention' but sliding"},
      {"qwen2_swa", [](json& j) { j["sliding_window"] = nullptr; }, "layer 1 is 'sliding_attention' but sliding"},
      {"qwen2_swa", [](json& j) { j["sliding_window"] = -6; }, "sliding_window must be positive"},
      {"qwen2_swa", [](json& j) { j["use_sliding_window"] = "yes"; },
       "field 'use_sliding_window' must be true or false"},
      {"qwen2_linear", [](json& j) { j["rope_parameters"]["rope_type"] = "yarn"; },
       "field 'rope_parameters.rope_type': expected one of default, linear, dynamic, llama3, longrope, got 'yarn'"},
      {"qwen2_linear", [](json& j) { j["rope_parameters"]["rope_type"] = "longrope"; },
       "field 'rope_parameters.short_factor' is required for rope_type 'longrope'"},
      {"qwen2_linear",
       [](json& j) {
         j.erase("rope_parameters");
         j["rope_scaling"] = {{"type", "su"}, {"factor", 2.0}};
       },
       "field 'rope_scaling.type': expected one of default, linear, dynamic, llama3, longrope, got 'su'"},
      {"qwen2_linear", [](json& j) { j["rope_parameters"]["type"] = "dynamic"; },
       "field 'rope_parameters.type' is 'dynamic' but 'rope_parameters.rope_type' is 'linear'"},
      {"qwen2_linear", [](json& j) { j["rope_parameters"].erase("factor"); },
       "field 'rope_parameters.factor' is required for rope_type 'linear'"},
      {"qwen2_linear", [](json& j) { j["rope_parameters"]["factor"] = -2.0; }, "factor must be positive"},
      {"qwen2_linear", [](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.5; },
       "field 'rope_parameters.partial_rotary_factor': only 1"},
      {"qwen2_linear", [](json& j) { j["partial_rotary_factor"] = 0.25; }, "field 'partial_rotary_factor': only 1"},
      {"qwen2_linear",
       [](json& j) {
         j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}};
       },
       "field 'rope_parameters.full_attention' is an object"},
      {"qwen2_linear", [](json& j) { j["rope_scaling"] = "linear"; }, "field 'rope_scaling' must be an object"},
      {"qwen2_linear", [](json& j) { j["hidden_act"] = "gelu"; }, "field 'hidden_act': expected 'silu', got 'gelu'"},
      {"llama_dynamic", [](json& j) { j["rope_parameters"]["factor"] = "2"; },
       "field 'rope_parameters.factor' must be a number"},
      {"llama_gqa", [](json& j) { j["tie_word_embeddings"] = 1; }, "field 'tie_word_embeddings' must be true or false"},
      {"mistral_swa", [](json& j) { j["sliding_window"] = 8.5; }, "field 'sliding_window' must be an integer"},
  };
  expect_config_refusals(cases, tmp);
}

TEST(Architectures, LegacyRopeScalingFieldsReadLikeRopeParameters) {
  test::TempDir tmp;
  const fs::path dir = copy_fixture("qwen2_linear", tmp);
  // transformers 4.x: rope_theta at the top level, {"type": ..., "factor": ...} in rope_scaling.
  edit_config(dir, [](json& j) {
    j.erase("rope_parameters");
    j["rope_theta"] = 1000000.0;
    j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  });
  const ModelConfig c = load_config(dir / "config.json");
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "linear");
  EXPECT_EQ(c.rope_scaling->factor, 4.0);
  EXPECT_EQ(c.rope_theta, 1e6);
  io::SafetensorsFile golden(fixture("qwen2_linear.golden.safetensors"));
  EXPECT_TRUE(CausalLM::load(dir)
                  .forward(golden.tensor("input_ids"))
                  .equal(CausalLM::load(fixture("qwen2_linear")).forward(golden.tensor("input_ids"))));
}

// Dynamic NTK scaling exists to run past max_position_embeddings (16 here); the other rules keep that limit.
TEST(Architectures, OnlyDynamicRopeRunsPastMaxPositionEmbeddings) {
  CausalLM dynamic = CausalLM::load(fixture("llama_dynamic"));
  EXPECT_EQ(dynamic.config().max_positions, 16);
  EXPECT_EQ(dynamic.config().max_sequence_length(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(dynamic.forward(at::zeros({1, 100}, at::kLong)).size(1), 100);
  CausalLM linear = CausalLM::load(fixture("qwen2_linear"));
  EXPECT_EQ(linear.config().max_sequence_length(), 128);
  EXPECT_NE(test::error_message([&] {
              linear.forward(at::zeros({1, 129}, at::kLong));
            }).find("sequence of 129 tokens exceeds the model's 128 positions"),
            std::string::npos);
}

TEST(Architectures, Qwen2NeedsQkvBiasesAndNoOtherBias) {
  test::TempDir tmp;
  fs::path dir = copy_fixture("qwen2_linear", tmp);
  rewrite_weights(dir, [](auto& ts) {
    auto k_bias = [](auto& t) { return t.first == "model.layers.1.self_attn.k_proj.bias"; };
    ts.erase(std::remove_if(ts.begin(), ts.end(), k_bias), ts.end());
  });
  const std::string missing = test::error_message([&] { CausalLM::load(dir); });
  EXPECT_NE(missing.find("missing tensor model.layers.1.self_attn.k_proj.bias ([16])"), std::string::npos) << missing;
  dir = copy_fixture("qwen2_linear", tmp);
  rewrite_weights(dir, [](auto& ts) { ts.emplace_back("model.layers.0.self_attn.o_proj.bias", at::zeros({32})); });
  EXPECT_NE(
      test::error_message([&] { CausalLM::load(dir); }).find("unexpected tensor model.layers.0.self_attn.o_proj.bias"),
      std::string::npos);
}

}  // namespace
}  // namespace alps::model
