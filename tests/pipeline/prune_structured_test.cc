// `alps prune --remove-neurons / --remove-heads` (docs/structured.md): the smaller checkpoint states its shapes in
// config.json and computes what the dense model computes with the removed units' output columns zeroed (a second
// formulation of the forward with fewer heads and neurons); the unstructured solves after it see the kept columns'
// statistics; a resumed run ends where an uninterrupted one does; what no family rule or count allows is refused
// before any work. That transformers loads the output with alps's perplexity is scripts/check_hf_load.py's check.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "alps/io/safetensors.h"
#include "alps/io/text_files.h"
#include "alps/model/causal_lm.h"
#include "alps/prune/problem.h"
#include "prune_cli_support.h"
#include "structured_support.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test_structured::args_for;
using test_structured::kept_units;
using test_structured::structured_of;
using test_structured::zero_removed;

struct Family {
  std::string fixture;  // empty: stories260K
  std::string down, o;  // linears whose inputs the units are ("": that kind is not removed)
  int64_t head_dim;
};

class PruneStructured : public ::testing::TestWithParam<Family> {};

TEST_P(PruneStructured, TheSmallerModelComputesTheDenseOneWithTheRemovedUnitsSilenced) {
  const Family f = GetParam();
  test::TempDir dir;
  const fs::path model =
      f.fixture.empty() ? test_prune::model_dir() : test_prune::fixture_with_tokenizer(f.fixture, dir.path());
  std::vector<std::string> flags = {"--structured-method", "score"};
  if (!f.down.empty()) flags.insert(flags.end(), {"--remove-neurons", "0.25"});
  if (!f.o.empty()) flags.insert(flags.end(), {"--remove-heads", "0.5"});
  const auto r = test::run_cli(args_for(model, dir / "out", flags));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json structured = structured_of(r);

  model::CausalLM dense = model::CausalLM::load(model);
  const model::CausalLM pruned = model::CausalLM::load(dir / "out");
  const json config = json::parse(io::read_text_file(dir / "out/config.json"));
  const int64_t f0 = dense.config().intermediate_size, f1 = f0 - (f0 + 2) / 4;  // round(0.25 f0)
  if (!f.down.empty()) EXPECT_EQ(config.value("intermediate_size", int64_t{0}), f1);
  if (!f.o.empty()) {
    EXPECT_EQ(config.at("num_attention_heads"), dense.config().num_heads / 2);
    EXPECT_EQ(config.at("num_key_value_heads"), dense.config().num_kv_heads);
    EXPECT_EQ(config.at("head_dim"), f.head_dim);
  }
  EXPECT_LT(pruned.num_parameters(), dense.num_parameters());
  for (int64_t b = 0; b < dense.num_blocks(); ++b) {
    if (!f.down.empty()) {
      const std::string down = dense.weight_name(b, f.down);
      dense.set_tensor(down, zero_removed(dense.tensor(down), kept_units(structured, b, "neurons"), 1));
    }
    if (!f.o.empty()) {
      const std::string o = dense.weight_name(b, f.o);
      dense.set_tensor(o, zero_removed(dense.tensor(o), kept_units(structured, b, "heads"), f.head_dim));
    }
  }
  at::manual_seed(0);
  const at::Tensor ids = at::randint(dense.config().vocab_size, {2, 24}, at::kLong);
  const at::Tensor expected = dense.forward(ids), got = pruned.forward(ids);
  // fp32 sums over fewer terms in another order: a few ulps of the logits' scale through the blocks.
  const double scale = expected.abs().max().item<double>();
  EXPECT_LT((got - expected).abs().max().item<double>(), 1e-4 * scale) << f.fixture;
}

INSTANTIATE_TEST_SUITE_P(Families, PruneStructured,
                         ::testing::Values(Family{"", "mlp.down_proj", "self_attn.o_proj", 8},
                                           Family{"qwen3_qknorm", "mlp.down_proj", "self_attn.o_proj", 16},
                                           Family{"gemma2_softcap", "mlp.down_proj", "self_attn.o_proj", 16},
                                           Family{"qwen2_linear", "mlp.down_proj", "self_attn.o_proj", 8},
                                           Family{"phi3_longrope", "mlp.down_proj", "", 16},
                                           // a mixture's attention heads (its experts' neurons have no rule)
                                           Family{"qwen3_moe_routed", "", "self_attn.o_proj", 16}),
                         [](const auto& info) {
                           return info.param.fixture.empty() ? "stories260K" : info.param.fixture;
                         });

TEST(PruneStructuredRun, UnstructuredSolvesAfterwardSeeTheKeptColumnsStatistics) {
  test::TempDir dir;
  const auto r = test::run_cli(
      args_for(test_prune::model_dir(), dir / "out",
               {"--remove-neurons", "0.25", "--remove-heads", "0.5", "--head-rule", "whole-groups", "--method",
                "sparsegpt", "--sparsity", "0.5", "--dump-problems", (dir / "problems").string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json structured = structured_of(r);
  const json config = json::parse(io::read_text_file(dir / "out/config.json"));
  EXPECT_EQ(config.at("num_key_value_heads"), 2);  // whole groups: 2 of 4, with their 4 of 8 query heads
  EXPECT_EQ(config.at("num_attention_heads"), 4);
  // Block 0's down_proj problem: the dense Gram of its input (block 0 sees the embeddings whatever was pruned),
  // restricted to the kept neurons; the dense model's own Gram is in an unstructured run's dump.
  const auto dense = test::run_cli(args_for(test_prune::model_dir(), dir / "dense",
                                            {"--method", "sparsegpt", "--sparsity", "0.5", "--dump-problems",
                                             (dir / "dense_problems").string(), "--stop-after", "1"}));
  ASSERT_EQ(dense.exit_code, 0) << dense.err;
  const prune::LayerProblem full = prune::load_problem(dir / "dense_problems/model.layers.0.mlp.down_proj.safetensors");
  const prune::LayerProblem kept = prune::load_problem(dir / "problems/model.layers.0.mlp.down_proj.safetensors");
  const at::Tensor cols = at::tensor(kept_units(structured, 0, "neurons"), at::kLong);
  EXPECT_TRUE(at::equal(kept.G, full.G.index_select(0, cols).index_select(1, cols)));
  EXPECT_EQ(kept.W0.size(1), cols.numel());
  const json report = json::parse(r.out);
  for (const json& l : report.at("layers"))
    if (l.at("name") == "model.layers.0.mlp.down_proj") EXPECT_NEAR(l.at("sparsity").get<double>(), 0.5, 0.01);
}

TEST(PruneStructuredRun, AResumedRunEndsWhereAnUninterruptedOneDoes) {
  test::TempDir dir;
  const std::vector<std::string> flags = {"--remove-neurons", "0.3",   "--remove-heads", "0.5",
                                          "--method",         "wanda", "--sparsity",     "0.4"};
  ASSERT_EQ(test::run_cli(args_for(test_prune::model_dir(), dir / "whole", flags)).exit_code, 0);
  std::vector<std::string> first = flags;
  first.insert(first.end(), {"--stop-after", "2"});
  ASSERT_EQ(test::run_cli(args_for(test_prune::model_dir(), dir / "legs", first)).exit_code, 0);
  std::vector<std::string> second = flags;
  second.push_back("--resume");
  const auto r = test::run_cli(args_for(test_prune::model_dir(), dir / "legs", second));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const io::SafetensorsFile a(dir / "whole/model.safetensors"), b(dir / "legs/model.safetensors");
  ASSERT_EQ(a.entries().size(), b.entries().size());
  for (const auto& e : a.entries()) EXPECT_TRUE(at::equal(a.tensor(e.name), b.tensor(e.name))) << e.name;
  EXPECT_EQ(structured_of(r).at("blocks").size(), 2u * 5);  // heads and neurons of 5 blocks, restored and new
  // The report names both legs of the run: blocks 1-2, then 3-5 after --resume.
  const json legs = json::parse(r.out).at("extra").at("legs");
  ASSERT_EQ(legs.size(), 2u) << legs.dump();
  EXPECT_EQ(legs[0].at("first_block"), 0);
  EXPECT_EQ(legs[0].at("end_block"), 2);
  EXPECT_EQ(legs[1].at("first_block"), 2);
  EXPECT_EQ(legs[1].at("end_block"), 5);
  EXPECT_EQ(legs[1].at("world_size"), 1);
  EXPECT_EQ(legs[1].at("device"), "cpu");
  // inspect reads the smaller shapes from the checkpoint and what they were from the report beside it.
  const auto inspect = test::run_cli({"inspect", "--model", (dir / "legs").string(), "--json"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  const json doc = json::parse(inspect.out);
  EXPECT_EQ(doc.at("intermediate_size"), 172 - 52);  // round(0.3 x 172) = 52 removed
  EXPECT_EQ(doc.at("num_heads"), 4);
  EXPECT_EQ(doc.at("structured").at("steps").size(), 2u);
  EXPECT_GT(doc.at("structured").at("parameters").at("before").get<int64_t>(), doc.at("parameters").get<int64_t>());
}

// stories260K with its q, k, v and its gate, up stored fused, as Phi3ForCausalLM stores them (the same function:
// Phi-3's block is LLaMA's with fused projections; its RoPE with partial_rotary_factor 1 is LLaMA's default).
fs::path fused_twin(const fs::path& dir) {
  const fs::path src = test_prune::model_dir(), out = dir / "fused";
  fs::create_directories(out);
  for (const char* f :
       {"tokenizer.model", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"})
    fs::copy_file(src / f, out / f);
  json config = json::parse(io::read_text_file(src / "config.json"));
  config["architectures"] = {"Phi3ForCausalLM"};
  config["model_type"] = "phi3";
  std::ofstream(out / "config.json") << config.dump(2);
  const io::SafetensorsFile file(src / "model.safetensors");
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& e : file.entries()) {
    const std::string& n = e.name;
    auto fused = [&](const std::string& first, const std::vector<std::string>& parts, const std::string& name) {
      if (n.find(first) == std::string::npos) return false;
      std::vector<at::Tensor> rows;
      for (const std::string& part : parts) {
        std::string other = n;
        other.replace(other.find(first), first.size(), part);
        rows.push_back(file.tensor(other));
      }
      std::string to = n;
      to.replace(to.find(first), first.size(), name);
      tensors.emplace_back(to, at::cat(rows, 0));
      return true;
    };
    if (fused("self_attn.q_proj", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}, "self_attn.qkv_proj") ||
        fused("mlp.gate_proj", {"mlp.gate_proj", "mlp.up_proj"}, "mlp.gate_up_proj"))
      continue;
    if (n.find("k_proj") != std::string::npos || n.find("v_proj") != std::string::npos ||
        n.find("up_proj") != std::string::npos)
      continue;  // in the fused ones
    tensors.emplace_back(n, file.tensor(n));
  }
  io::save_safetensors(out / "model.safetensors", tensors);
  return out;
}

TEST(PruneStructuredRun, AFusedCheckpointLosesTheUnitsItsSeparateTwinLoses) {
  // Neurons, query heads and whole key/value groups: the same units go, the same smaller config, and the two outputs
  // compute the same.
  test::TempDir dir;
  const fs::path fused = fused_twin(dir.path());
  const model::CausalLM separate_dense = model::CausalLM::load(test_prune::model_dir()),
                        fused_dense = model::CausalLM::load(fused);
  at::manual_seed(0);
  const at::Tensor ids = at::randint(512, {2, 24}, at::kLong);
  const at::Tensor logits = separate_dense.forward(ids);
  // The same dot products with their outputs stacked: only the blocking of the wider products can round otherwise, a
  // few ulps of the logits' scale through the five blocks.
  ASSERT_LT((fused_dense.forward(ids) - logits).abs().max().item<double>(), 1e-5 * logits.abs().max().item<double>());

  struct Case {
    std::vector<std::string> flags;
    std::vector<std::string> kinds;
  };
  const std::vector<Case> cases = {
      {{"--remove-neurons", "0.25", "--remove-heads", "0.5", "--head-rule", "whole-groups"}, {"neurons", "kv_groups"}},
      {{"--remove-heads", "0.5"}, {"heads"}}};
  for (const Case& c : cases) {
    const std::string name = c.kinds.back();
    SCOPED_TRACE(name);
    std::vector<std::string> flags = {"--structured-method", "score"};
    flags.insert(flags.end(), c.flags.begin(), c.flags.end());
    const auto a = test::run_cli(args_for(test_prune::model_dir(), dir / ("separate-" + name), flags));
    const auto b = test::run_cli(args_for(fused, dir / ("fused-" + name), flags));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    const json sa = structured_of(a), sb = structured_of(b);
    for (int64_t blk = 0; blk < separate_dense.num_blocks(); ++blk)
      for (const std::string& kind : c.kinds)
        EXPECT_EQ(kept_units(sb, blk, kind), kept_units(sa, blk, kind)) << "block " << blk << " " << kind;
    const json ca = json::parse(io::read_text_file(dir / ("separate-" + name) / "config.json")),
               cb = json::parse(io::read_text_file(dir / ("fused-" + name) / "config.json"));
    for (const char* key : {"intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim"})
      EXPECT_EQ(cb.value(key, json()), ca.value(key, json())) << key;
    EXPECT_EQ(cb.at("num_key_value_heads"), name == "heads" ? 4 : 2);
    const at::Tensor smaller = model::CausalLM::load(dir / ("separate-" + name)).forward(ids);
    EXPECT_LT((model::CausalLM::load(dir / ("fused-" + name)).forward(ids) - smaller).abs().max().item<double>(),
              1e-4 * smaller.abs().max().item<double>());
  }
}

TEST(PruneStructuredRun, ACountOfHeadsPerGroupRemovesWhatItsFractionRemoves) {
  // stories260K has two query heads per key/value group: one of them is half of them.
  test::TempDir dir;
  const std::vector<std::string> method = {"--structured-method", "score", "--structured-option", "refit=true"};
  std::vector<std::string> count = {"--remove-heads-per-group", "1"}, fraction = {"--remove-heads", "0.5"};
  count.insert(count.end(), method.begin(), method.end());
  fraction.insert(fraction.end(), method.begin(), method.end());
  const auto a = test::run_cli(args_for(test_prune::model_dir(), dir / "count", count));
  const auto b = test::run_cli(args_for(test_prune::model_dir(), dir / "fraction", fraction));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const json config = json::parse(io::read_text_file(dir / "count" / "config.json"));
  EXPECT_EQ(config, json::parse(io::read_text_file(dir / "fraction" / "config.json")));
  EXPECT_EQ(config.at("num_attention_heads"), config.at("num_key_value_heads"));
  const json sa = structured_of(a), sb = structured_of(b);
  for (int64_t blk = 0; blk < config.at("num_hidden_layers").get<int64_t>(); ++blk)
    EXPECT_EQ(kept_units(sa, blk, "heads"), kept_units(sb, blk, "heads")) << "block " << blk;
  // The same choice and refit, computed alike: the same bytes.
  EXPECT_TRUE(test::slurp(dir / "count" / "model.safetensors") == test::slurp(dir / "fraction" / "model.safetensors"));
}

TEST(PruneStructuredRun, AMultipleOfNeuronsIsKeptAndTheLogSaysSo) {
  // A quarter of stories260K's 172 neurons leaves 129; the nearest multiple of 32 is 128, whose 2:4 groups fit.
  test::TempDir dir;
  const auto r = test::run_cli(args_for(test_prune::model_dir(), dir / "out",
                                        {"--remove-neurons", "0.25", "--neuron-multiple", "32", "--pattern", "2:4",
                                         "--method", "wanda", "--structured-method", "score"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("128 stay, not 129: a multiple of 32 (--neuron-multiple 32)"), std::string::npos) << r.err;
  EXPECT_EQ(json::parse(io::read_text_file(dir / "out" / "config.json")).at("intermediate_size"), 128);
  const json structured = structured_of(r);
  for (const json& step : structured.at("blocks")) EXPECT_EQ(step.at("kept"), 128) << step.at("linear");
  // 90% of them leaves 17, whose nearest multiple of 64 keeps none: 64 stay, and a warning, which --quiet still
  // shows, says how far that is from what was asked.
  const auto far = test::run_cli(
      args_for(test_prune::model_dir(), dir / "far",
               {"--remove-neurons", "0.9", "--neuron-multiple", "64", "--structured-method", "score", "--quiet"}));
  ASSERT_EQ(far.exit_code, 0) << far.err;
  EXPECT_NE(far.err.find("--remove-neurons 0.9 of 172 MLP neurons: 64 stay, not 17: a multiple of 64 "
                         "(--neuron-multiple 64); 62.8% of them go, not 90.1%"),
            std::string::npos)
      << far.err;
  EXPECT_EQ(json::parse(io::read_text_file(dir / "far" / "config.json")).at("intermediate_size"), 64);
}

TEST(PruneStructuredRun, WhatNoRuleOrCountAllowsIsRefusedBeforeAnyWork) {
  test::TempDir dir;
  struct Case {
    std::string fixture;
    std::vector<std::string> flags;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"", {"--remove-heads", "0.3"}, "--remove-heads 0.3 of 2 query heads of each key/value group is 0.6"},
      {"", {"--remove-neurons", "0.999"}, "leaves none"},
      {"", {"--remove-neurons", "0.001"}, "removes none"},
      {"", {"--remove-neurons", "0.2", "--sparsity", "0.5", "--sparsity-profile", "owl"}, "--sparsity-profile owl"},
      {"", {"--remove-neurons", "0.2", "--structured-method", "oscar"}, "did you mean"},
      {"olmo2_post", {"--remove-heads", "0.5"}, "normalise all heads together"},
      {"phi3_longrope", {"--remove-heads", "0.5"}, "its longrope factors are checked against hidden_size"},
      {"", {"--remove-neurons", "1.5"}, "--remove-neurons"},
      {"",
       {"--remove-heads-per-group", "2"},
       "--remove-heads-per-group 2 of 2 query heads of each key/value group "
       "leaves none"},
      {"", {"--remove-heads-per-group", "1", "--remove-heads", "0.5"}, "give one of them"},
      {"", {"--remove-heads-per-group", "1", "--head-rule", "whole-groups"}, "give --remove-heads F instead"},
      {"", {"--remove-heads-per-group", "-1"}, "--remove-heads-per-group"},
      // 172 neurons less a quarter is 129: no 2:4 groups along down_proj's input. The flag to change is named.
      {"", {"--remove-neurons", "0.25", "--pattern", "2:4"}, "--remove-neurons leaves 129 of 172"},
      {"",
       {"--sparsity", "0.5", "--neuron-multiple", "32"},
       "--neuron-multiple 32 rounds the MLP neurons --remove-neurons keeps"},
      {"", {"--remove-neurons", "0.25", "--neuron-multiple", "0"}, "--neuron-multiple: expected an integer >= 1"},
      {"",
       {"--remove-neurons", "0.25", "--neuron-multiple", "172"},
       "--remove-neurons 0.25 of 172 MLP neurons: they keep a multiple of 172 (--neuron-multiple 172), and none below "
       "172 is one"},
      // A mixture's experts keep a multiple of 8 and of --neuron-multiple: of 24, and none of Qwen2-MoE's 24 is one.
      {"qwen2_moe_shared",
       {"--remove-neurons", "0.25", "--neuron-multiple", "12"},
       "they keep a multiple of 24 (transformers multiplies a mixture's experts in grouped products, whose rows must "
       "be whole multiples of 16 bytes; --neuron-multiple 12)"}};
  for (const Case& c : cases) {
    const fs::path model =
        c.fixture.empty() ? test_prune::model_dir() : test_prune::fixture_with_tokenizer(c.fixture, dir.path());
    const fs::path out = dir / ("out-" + std::to_string(&c - cases.data()));
    const auto r = test::run_cli(args_for(model, out, c.flags));
    EXPECT_EQ(r.exit_code, 2) << c.says << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.says;
  }
}

TEST(PruneStructuredRun, OptRemovesNeuronsButNotHeads) {
  // transformers' OPT has no head_dim field: fewer heads is no OPT config. Its neurons are fc1's rows and bias.
  const model::CausalLM m = model::CausalLM::load(test::source_dir() / "tests/data/model/opt_pre");
  EXPECT_NE(m.unit_rules(0, model::Structure::heads).front().refusal.find("no head_dim"), std::string::npos);
  ASSERT_EQ(m.unit_rules(0, model::Structure::neurons).size(), 1u);
  const model::UnitRule neurons = m.unit_rules(0, model::Structure::neurons).front();
  EXPECT_TRUE(neurons.refusal.empty());
  EXPECT_EQ(neurons.consumer, "fc2");
  EXPECT_EQ(neurons.units, m.config().intermediate_size);
  ASSERT_EQ(neurons.rows.size(), 2u);
  EXPECT_EQ(neurons.rows[1].tensor, "fc1.bias");
}

}  // namespace
}  // namespace alps
