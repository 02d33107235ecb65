// `alps prune --remove-neurons` beyond a dense LLaMA (docs/structured.md): a mixture loses the same share of each
// expert's neurons and of its shared expert's and dense MLPs', and the report and inspect say where each count holds;
// an expert no calibration token reached keeps its largest columns; a multimodal Gemma 3 states its smaller count in
// its text_config and carries its vision tower as it was.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alps/io/safetensors.h"
#include "alps/io/text_files.h"
#include "alps/model/causal_lm.h"
#include "prune_cli_support.h"
#include "structured_support.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test_structured::args_for;
using test_structured::kept_units;
using test_structured::score_a_quarter_of_the_neurons;
using test_structured::structured_of;
using test_structured::zero_removed;

TEST(PruneStructuredRun, AMixtureLosesTheSameShareOfEachExpertsNeuronsAndItsSharedExperts) {
  // Qwen2-MoE: block 0 holds a dense MLP of 48 neurons, block 1 a mixture of 4 experts of 24 and a shared expert of
  // 40. A quarter of each: 18 of 24 rounds to 16 (a multiple of 8 for transformers' grouped expert products).
  test::TempDir dir;
  const auto [r, model] = score_a_quarter_of_the_neurons("qwen2_moe_shared", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("16 stay, not 18: a multiple of 8"), std::string::npos) << r.err;
  const json config = json::parse(io::read_text_file(dir / "out/config.json"));
  EXPECT_EQ(config.at("moe_intermediate_size"), 16);
  EXPECT_EQ(config.at("shared_expert_intermediate_size"), 30);
  EXPECT_EQ(config.at("intermediate_size"), 36);
  const json structured = structured_of(r);
  std::map<std::string, int64_t> kept_by_field;
  model::CausalLM dense = model::CausalLM::load(model);
  int64_t experts = 0;
  for (const json& step : structured.at("blocks")) {
    const std::string linear = step.at("linear");
    kept_by_field[step.at("field")] = step.at("kept");
    experts += linear.find(".experts.") != std::string::npos;
    // Each expert chose on the tokens routed to it: its own count.
    EXPECT_GT(step.at("tokens").get<int64_t>(), 0) << linear;
    const std::string down = linear + ".weight";
    dense.set_tensor(down, zero_removed(dense.tensor(down), step.at("kept_units").get<std::vector<int64_t>>(), 1));
  }
  EXPECT_EQ(experts, 4);
  EXPECT_EQ(kept_by_field,
            (std::map<std::string, int64_t>{
                {"moe_intermediate_size", 16}, {"shared_expert_intermediate_size", 30}, {"intermediate_size", 36}}));
  // The smaller model computes the dense one with every removed neuron's down column zeroed (score keeps the kept
  // columns as they were).
  const model::CausalLM pruned = model::CausalLM::load(dir / "out");
  at::manual_seed(0);
  const at::Tensor ids = at::randint(dense.config().vocab_size, {2, 24}, at::kLong);
  const at::Tensor expected = dense.forward(ids), got = pruned.forward(ids);
  EXPECT_LT((got - expected).abs().max().item<double>(), 1e-4 * expected.abs().max().item<double>());
  // inspect says where each count holds (the summary's words): none of the three is in every block.
  const std::string said =
      "kept 36 of 48 neurons in 1 of 2 blocks, the dense MLPs; 16 of 24 neurons in every expert; 30 of 40 neurons in "
      "every shared expert";
  const auto inspected = test::run_cli({"inspect", "--model", (dir / "out").string()});
  ASSERT_EQ(inspected.exit_code, 0) << inspected.err;
  EXPECT_NE(inspected.out.find(said), std::string::npos) << inspected.out;
  const json doc = json::parse(test::run_cli({"inspect", "--model", (dir / "out").string(), "--json"}).out);
  EXPECT_EQ(doc.at("weight_file_bytes").get<int64_t>(),
            static_cast<int64_t>(fs::file_size(dir / "out/model.safetensors")));
  EXPECT_EQ(doc.at("structured").at("weight_bytes_before").get<int64_t>(),
            static_cast<int64_t>(fs::file_size(model / "model.safetensors")));
}

TEST(PruneStructuredRun, AMixturesExpertsKeepTheLeastCommonMultipleOfEightAndTheOneAsked) {
  // --neuron-multiple 4: each expert's 18 of 24 rounds to a multiple of 8 (16), the shared expert's 30 of 40 to the
  // nearest multiple of 4 above (32: halves round up), the dense MLP's 36 of 48 stays.
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer("qwen2_moe_shared", dir.path());
  const auto r = test::run_cli(args_for(
      model, dir / "out", {"--remove-neurons", "0.25", "--neuron-multiple", "4", "--structured-method", "score"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("16 stay, not 18: a multiple of 8 (transformers multiplies a mixture's experts in grouped "
                       "products, whose rows must be whole multiples of 16 bytes; --neuron-multiple 4)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("32 stay, not 30: a multiple of 4 (--neuron-multiple 4)"), std::string::npos) << r.err;
  const json config = json::parse(io::read_text_file(dir / "out/config.json"));
  EXPECT_EQ(config.at("moe_intermediate_size"), 16);
  EXPECT_EQ(config.at("shared_expert_intermediate_size"), 32);
  EXPECT_EQ(config.at("intermediate_size"), 36);
}

TEST(PruneStructuredRun, AMultimodalGemma3ShrinksItsTextConfigAndCarriesTheRest) {
  // The smaller count goes where the checkpoint states it (text_config), not beside it at the top level, where
  // transformers would not read it and would refuse the smaller tensors.
  test::TempDir dir;
  const auto [r, model] = score_a_quarter_of_the_neurons("gemma3_multimodal", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json in = json::parse(io::read_text_file(model / "config.json"));
  const json out = json::parse(io::read_text_file(dir / "out/config.json"));
  EXPECT_EQ(out.at("text_config").at("intermediate_size"), 36);  // 48 less a quarter
  in["text_config"]["intermediate_size"] = 36;
  EXPECT_EQ(out, in);  // nothing else changed, nothing added at the top level
  // The vision tower and projector are carried as they were; the text model computes the dense one with the removed
  // neurons' down columns zeroed (score keeps the kept columns as they were).
  const io::SafetensorsFile a(model / "model.safetensors"), b(dir / "out/model.safetensors");
  int64_t carried = 0;
  for (const auto& e : a.entries())
    if (e.name.find("language_model.") == std::string::npos) {
      EXPECT_TRUE(at::equal(a.tensor(e.name), b.tensor(e.name))) << e.name;
      ++carried;
    }
  EXPECT_GT(carried, 0);
  model::CausalLM dense = model::CausalLM::load(model);
  const json structured = structured_of(r);
  for (int64_t blk = 0; blk < dense.num_blocks(); ++blk) {
    const std::string down = dense.weight_name(blk, "mlp.down_proj");
    dense.set_tensor(down, zero_removed(dense.tensor(down), kept_units(structured, blk, "neurons"), 1));
  }
  const model::CausalLM pruned = model::CausalLM::load(dir / "out");
  EXPECT_EQ(pruned.config().intermediate_size, 36);
  at::manual_seed(0);
  const at::Tensor ids = at::randint(dense.config().vocab_size, {2, 24}, at::kLong);
  const at::Tensor expected = dense.forward(ids), got = pruned.forward(ids);
  EXPECT_LT((got - expected).abs().max().item<double>(), 1e-4 * expected.abs().max().item<double>());
}

TEST(PruneStructuredRun, AnExpertNoTokenReachedKeepsItsLargestColumnsUnchanged) {
  // 16 tokens, 2 of 6 experts each: in block 2 some experts receive none (as in PruneMoe's unreached-expert test).
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer("qwen3_moe_routed", dir.path());
  std::vector<std::string> args = args_for(model, dir / "out", {"--remove-neurons", "0.25"});
  args[8] = "1";    // --nsamples
  args[10] = "16";  // --seqlen
  const auto r = test::run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const model::CausalLM dense = model::CausalLM::load(model), pruned = model::CausalLM::load(dir / "out");
  int64_t unreached = 0;
  const json structured = structured_of(r);
  for (const json& step : structured.at("blocks")) {
    if (step.at("tokens").get<int64_t>() != 0) continue;
    ++unreached;
    const std::string linear = step.at("linear");
    EXPECT_NE(step.at("rule").get<std::string>().find("no calibration token"), std::string::npos);
    const at::Tensor W0 = dense.tensor(linear + ".weight");
    const auto kept = step.at("kept_units").get<std::vector<int64_t>>();
    // The kept columns are those of largest norm, unchanged.
    const at::Tensor norms = W0.norm(2, {0});
    const double lowest_kept = norms.index_select(0, at::tensor(kept, at::kLong)).min().item<double>();
    EXPECT_EQ(norms.gt(lowest_kept).sum().item<int64_t>() + 1, static_cast<int64_t>(kept.size())) << linear;
    EXPECT_TRUE(pruned.tensor(linear + ".weight").equal(W0.index_select(1, at::tensor(kept, at::kLong)))) << linear;
  }
  EXPECT_GT(unreached, 0);
}

}  // namespace
}  // namespace alps
