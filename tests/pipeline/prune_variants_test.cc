// `alps prune`, `eval` and `generate` on the LLaMA variants: a Qwen2 fixture (q/k/v biases, tied head,
// linear RoPE), a Mistral one whose 8-token sliding window is shorter than the calibration windows, Qwen3 (QK-norm,
// biases on all attention projections), OLMo 2 (norms after the sublayers), Gemma 2 (soft-capping, sandwich norms,
// GeGLU), Gemma 3 (RoPE per layer type, bf16; and its multimodal form, whose vision tower is carried) and Phi-3 (fused
// qkv_proj and gate_up_proj, pruned as stored; partial longrope). The fixtures have stories260K's vocabulary size, so
// that model's tokenizer drives them. That the pruned checkpoints load in transformers with the same perplexity is
// checked by scripts/check_hf_load.py (docs/architectures.md).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "alps/io/safetensors.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/calibration.h"
#include "alps/prune/method.h"
#include "alps/prune/problem.h"
#include "alps/tokenizer/tokenizer.h"
#include "checkpoint_names.h"
#include "prune_cli_support.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string calib() { return (test::committed_data_dir() / "text/tinystories/tinystories_sample.txt").string(); }


// Gram of the input of `linear` in block 0 over `ids`, from the dense model's own forward, in fp64.
// The inputs of `linear` in block 0, [sequences, L, in] in fp64.
at::Tensor block0_inputs(const model::CausalLM& m, const at::Tensor& ids, const std::string& linear) {
  at::Tensor inputs;
  model::LinearObserver obs = [&](const std::string& name, const at::Tensor& x) {
    if (name == linear) inputs = x.to(at::kDouble);
  };
  m.block_forward(0, m.embed(ids), &obs);
  return inputs;
}

at::Tensor gram_of(const at::Tensor& inputs) {
  const at::Tensor X = inputs.reshape({-1, inputs.size(-1)});
  return at::matmul(X.t(), X);
}

class PruneVariants : public ::testing::TestWithParam<std::string> {};

TEST_P(PruneVariants, PruneKeepsBiasesAndThePrunedModelEvaluatesAndGenerates) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer(GetParam(), dir.path());
  const fs::path out = dir / "pruned";
  const int64_t nsamples = 4, seqlen = 32;
  const auto r = test::run_cli({"prune",
                                "--model",
                                model.string(),
                                "--out",
                                out.string(),
                                "--calib",
                                calib(),
                                "--nsamples",
                                std::to_string(nsamples),
                                "--seqlen",
                                std::to_string(seqlen),
                                "--batch-size",
                                "4",
                                "--method",
                                "sparsegpt",
                                "--sparsity",
                                "0.5",
                                "--dump-problems",
                                (dir / "problems").string(),
                                "--device",
                                "cpu",
                                "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(r.out);
  const model::ModelConfig c = model::load_config(model / "config.json");
  const auto dense = model::CausalLM::load(model);
  const auto pruned = model::CausalLM::load(out);
  // 4 or 7 per dense block; a mixture's: 4 for attention and 3 per expert (and for a shared one).
  size_t linears = 0;
  for (int64_t b = 0; b < c.num_layers; ++b)
    linears += (c.fused_projections ? 2 : 4) +
               (c.is_moe_layer(b)     ? 3 * (c.moe->num_experts + (c.moe->shared_expert_intermediate_size > 0))
                : c.fused_projections ? 2
                                      : 3);
  EXPECT_EQ(report["layers"].size(), linears);
  EXPECT_EQ(test::slurp(out / "config.json"), test::slurp(model / "config.json"));
  std::set<std::string> pruned_names;
  for (const auto& layer : report["layers"]) {
    const at::Tensor W = pruned.tensor(layer["name"].get<std::string>() + ".weight");
    EXPECT_EQ(W.eq(0).sum().item<int64_t>(), W.numel() / 2) << layer["name"];  // 128-column blocks, even sizes
    pruned_names.insert(layer["name"].get<std::string>() + ".weight");
  }
  // Everything else, the q/k/v biases among them, is the input's, byte for byte.
  int64_t biases = 0;
  for (const auto& name : test::checkpoint_tensor_names(dense.dir())) {
    // A multimodal checkpoint's vision tower has biases of its own; it is carried like every other tensor.
    const bool carried = name.rfind(c.language_model_prefix, 0) != 0;
    biases += !carried && name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (carried || pruned_names.count(name) == 0)  // the routers among them
      EXPECT_TRUE(pruned.tensor(name).equal(dense.tensor(name))) << name;
  }
  EXPECT_EQ(biases, c.num_layers * (c.qkv_bias ? 3 : c.attention_bias ? 4 : 0));

  // The statistics pass ran the dense block 0 (biases, sliding window) on the calibration windows: the o_proj
  // gram is that of the attention output computed here. Both sum 128 products of the same inputs, rounded in
  // fp32 by differently blocked products (at most `chain` roundings each) and accumulated in fp32 there.
  const auto tok = tokenizer::load_tokenizer(model);
  const at::Tensor ids =
      pipeline::sample_windows(pipeline::read_documents(calib()), *tok, {calib(), nsamples, seqlen, 0});
  std::string o_proj = dense.weight_name(0, "self_attn.o_proj");
  o_proj.resize(o_proj.size() - std::string(".weight").size());
  const prune::LayerProblem p = prune::load_problem(dir / "problems" / (o_proj + ".safetensors"));
  const at::Tensor inputs = block0_inputs(dense, ids, "self_attn.o_proj");
  const at::Tensor expected = gram_of(inputs);
  const int64_t T = nsamples * seqlen;
  const int64_t chain = c.hidden_size + c.head_dim + 2 * seqlen;
  const double xmax2 = expected.diagonal().max().item<double>();  // >= max_t x_ti^2
  EXPECT_EQ(p.tokens, T);
  EXPECT_EQ(p.sequences, nsamples);
  EXPECT_ALL_CLOSE(p.G.to(at::kDouble), expected, test::rounding_bound(T + 2 * chain, T * xmax2), 0);
  // DSnoT's per-sequence statistic: each sequence's sum S of L inputs differs by <= d := 2 gamma_{L + 2 chain}
  // L max|x| between the two forwards, so S^2 / L by (2 L max|x| + d) d / L, and (1/T) sum_s of it, T = nsamples L,
  // by (2 L max|x| + d) d / L^2.
  const at::Tensor q = inputs.mean(1).pow(2).mean(0);  // (1/T) sum_s L m_s^2
  const double max_sq = inputs.pow(2).max().item<double>();
  const double L = static_cast<double>(seqlen), d = test::rounding_bound(L + 2 * chain, L * std::sqrt(max_sq));
  EXPECT_ALL_CLOSE(p.sequence_mean_sq, q, (2 * L * std::sqrt(max_sq) + d) * d / (L * L), 0);
  if (c.qkv_bias) {  // without the biases the gram is another one: the check above can tell
    model::CausalLM no_bias = model::CausalLM::load(model);
    for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
      const std::string name = c.language_model_prefix + "model.layers.0.self_attn." + std::string(proj) + ".bias";
      no_bias.set_tensor(name, at::zeros_like(no_bias.tensor(name)));
    }
    EXPECT_GT((gram_of(block0_inputs(no_bias, ids, "self_attn.o_proj")) - expected).abs().max().item<double>(),
              10 * test::rounding_bound(T + 2 * chain, T * xmax2));
  }

  const auto e = test::run_cli({"eval", "--model", out.string(), "--ppl", calib(), "--seqlen", "64", "--max-windows",
                                "3", "--device", "cpu", "--json"});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  const json ev = json::parse(e.out)["results"][0];
  EXPECT_EQ(ev["windows"].get<int64_t>(), 3);
  EXPECT_TRUE(std::isfinite(ev["perplexity"].get<double>())) << ev;
  const auto i = test::run_cli({"inspect", "--model", out.string(), "--json"});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  const json info = json::parse(i.out);
  EXPECT_EQ(info["architecture"], c.architecture);
  EXPECT_EQ(info["sliding_window"], json(c.sliding_window));
  const json rope =
      c.rope_scaling ? json{{"type", c.rope_scaling->type}, {"factor", c.rope_scaling->factor}} : json(nullptr);
  EXPECT_EQ(info["rope_scaling"], rope);
  EXPECT_DOUBLE_EQ(info["linear_sparsity"].get<double>(), 0.5);
  EXPECT_EQ(info["head_dim"], c.head_dim);
  EXPECT_EQ(info["rotary_dim"], c.rotary_dim());
  // The newer families say what their block adds to LLaMA's; Qwen2 and Mistral add nothing of that kind.
  EXPECT_EQ(info["block_features"].empty(), GetParam() == "qwen2_linear" || GetParam() == "mistral_swa")
      << info["block_features"];
  EXPECT_EQ(info.contains("experts"), c.moe.has_value());
  // A mixture's routers are listed, dense as no rule named them, and count in no total (linear_sparsity above).
  int64_t routers = 0;
  for (const json& l : info["linears"])
    if (l.contains("router")) {
      EXPECT_EQ(l["zeros"], 0) << l;
      ++routers;
    }
  EXPECT_EQ(routers, c.moe ? std::count(c.moe->layers.begin(), c.moe->layers.end(), true) : 0);

  const auto g = test::run_cli({"generate", "--model", out.string(), "--prompt", "Once upon a time", "--max-tokens",
                                "5", "--device", "cpu", "--json"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const json gen = json::parse(g.out);
  EXPECT_EQ(gen["prompt"], "Once upon a time");
  EXPECT_GE(gen["ids"].size(), 1u);  // 5 unless an EOS comes first
  EXPECT_LE(gen["ids"].size(), 5u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PruneVariants,
                         ::testing::Values("qwen2_linear", "mistral_swa", "qwen3_qknorm", "olmo2_post",
                                           "gemma2_softcap", "gemma3_local_global", "gemma3_multimodal",
                                           "phi3_longrope", "qwen3_moe_routed", "qwen2_moe_shared", "mixtral_top2",
                                           "olmoe_clip"));

// Phi-3's fused projections are linears like any other for a recipe: a rule matching `*.qkv_proj` gives it its own
// method and N:M pattern, a `skip` rule leaves one gate_up_proj dense, and OWL spreads the rest over the blocks.
TEST(PruneVariantsFused, RecipeRulesNmAndOwlApplyToFusedProjections) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer("phi3_longrope", dir.path());
  const fs::path recipe = dir / "recipe.json";
  std::ofstream(recipe) << R"({"method": "alps", "sparsity": 0.6, "sparsity_profile": "owl", "overrides": [
      {"match": "*.self_attn.qkv_proj", "method": "wanda", "pattern": "2:4"},
      {"match": "model.layers.1.mlp.gate_up_proj", "skip": true}]})";
  const fs::path out = dir / "pruned";
  const auto r =
      test::run_cli({"prune", "--model", model.string(), "--config", recipe.string(), "--calib", calib(), "--nsamples",
                     "8", "--seqlen", "32", "--out", out.string(), "--device", "cpu", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto pruned = model::CausalLM::load(out), dense = model::CausalLM::load(model);
  std::vector<double> block_sparsity(2, 0);
  const json report = json::parse(r.out);
  for (const auto& layer : report["layers"]) {
    const std::string name = layer["name"];
    const at::Tensor W = pruned.tensor(name + ".weight");
    if (name.find("qkv_proj") != std::string::npos) {
      EXPECT_EQ(layer["method"], "wanda");
      // Every group of 4 consecutive inputs of every row of q, k and v together keeps 2.
      EXPECT_TRUE(W.view({W.size(0), -1, 4}).ne(0).sum(-1).eq(2).all().item<bool>()) << name;
    } else if (name == "model.layers.1.mlp.gate_up_proj") {
      EXPECT_TRUE(layer["skipped"].get<bool>());
      EXPECT_TRUE(W.equal(dense.tensor(name + ".weight")));
    } else {
      EXPECT_EQ(layer["method"], "alps") << name;
      block_sparsity[layer["block"].get<size_t>()] = W.eq(0).to(at::kDouble).mean().item<double>();
    }
  }
  // OWL gives the two blocks different sparsities (uniform would give both 0.6).
  EXPECT_GT(std::abs(block_sparsity[0] - block_sparsity[1]), 0.05) << block_sparsity[0] << " " << block_sparsity[1];
}

// Every method prunes Phi-3's fused projections as stored: one linear each, whose every row (q, k and v rows alike;
// gate and up rows alike) keeps 2 of every 4 inputs, written back fused under the input's names and shapes.
TEST(PruneVariantsFused, EveryMethodPrunesTheFusedProjectionsAsStored) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer("phi3_longrope", dir.path());
  const io::SafetensorsFile input(model / "model.safetensors");
  for (const std::string& method : prune::method_names()) {
    const fs::path out = dir / method;
    const auto r =
        test::run_cli({"prune", "--model", model.string(), "--method", method, "--pattern", "2:4", "--calib", calib(),
                       "--nsamples", "4", "--seqlen", "32", "--out", out.string(), "--device", "cpu", "--json"});
    ASSERT_EQ(r.exit_code, 0) << method << "\n" << r.err;
    const io::SafetensorsFile written(out / "model.safetensors");
    ASSERT_EQ(written.entries().size(), input.entries().size()) << method;
    int64_t fused = 0;
    for (const auto& e : input.entries()) {
      const at::Tensor W = written.tensor(e.name);
      EXPECT_EQ(W.sizes(), input.tensor(e.name).sizes()) << method << " " << e.name;
      if (e.name.find("qkv_proj.weight") == std::string::npos &&
          e.name.find("gate_up_proj.weight") == std::string::npos)
        continue;
      EXPECT_TRUE(W.view({W.size(0), -1, 4}).ne(0).sum(-1).eq(2).all().item<bool>()) << method << " " << e.name;
      ++fused;
    }
    EXPECT_EQ(fused, 2 * 2) << method;  // qkv_proj and gate_up_proj of both blocks
  }
}

}  // namespace
}  // namespace alps
