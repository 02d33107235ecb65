// transformers 5's fused experts (model/fused_experts.h): a checkpoint whose mixture layers hold
// mlp.experts.gate_up_proj [E, 2I, H] and mlp.experts.down_proj [E, H, I] computes what its per-expert twin computes,
// is written back in the layout it was read, and prunes (inside the experts, whole experts, the experts' neurons) to
// what its twin prunes to, fused.
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
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The per-expert layout's name of a fused layout's tensor: Mixtral's block_sparse_moe.experts.{e}.w1 is
// mlp.experts.{e}.gate_proj there (transformers 5's conversion), the other families' names are the same.
std::string per_expert_name(const std::string& fused_layout_name, bool mixtral) {
  if (!mixtral) return fused_layout_name;
  std::string n = fused_layout_name;
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{{".mlp.gate.", ".block_sparse_moe.gate."},
                                                        {".mlp.experts.", ".block_sparse_moe.experts."},
                                                        {".gate_proj.", ".w1."},
                                                        {".up_proj.", ".w3."},
                                                        {".down_proj.", ".w2."}})
    if (auto pos = n.find(from); pos != std::string::npos) n.replace(pos, from.size(), to);
  return n;
}

// `model`'s checkpoint with every mixture layer's experts fused as transformers 5 fuses them (and Mixtral's
// block_sparse_moe named mlp), in dir/name with the same config and tokenizer.
fs::path fused_twin(const fs::path& model, const fs::path& dir, bool mixtral) {
  const fs::path out = dir / ("fused-" + model.filename().string());
  fs::create_directories(out);
  for (const auto& e : fs::directory_iterator(model))
    if (e.path().filename() != "model.safetensors") fs::copy_file(e.path(), out / e.path().filename());
  const io::SafetensorsFile file(model / "model.safetensors");
  const model::CausalLM m = model::CausalLM::load(model);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::map<std::string, bool> moved;
  for (int64_t b = 0; b < m.num_blocks(); ++b) {
    const std::string experts = "model.layers." + std::to_string(b) + ".mlp.experts.";
    std::vector<at::Tensor> gate_up, down;
    for (int64_t e = 0; e < m.num_experts(b); ++e) {
      auto take = [&](const char* projection) {
        const std::string name = per_expert_name(experts + std::to_string(e) + "." + projection + ".weight", mixtral);
        moved[name] = true;
        return file.tensor(name);
      };
      gate_up.push_back(at::cat({take("gate_proj"), take("up_proj")}, 0));
      down.push_back(take("down_proj"));
    }
    if (gate_up.empty()) continue;
    tensors.emplace_back(experts + "gate_up_proj", at::stack(gate_up));
    tensors.emplace_back(experts + "down_proj", at::stack(down));
  }
  for (const auto& e : file.entries()) {
    if (moved.count(e.name)) continue;
    std::string name = e.name;
    if (mixtral && name.find(".block_sparse_moe.gate.") != std::string::npos)
      name.replace(name.find(".block_sparse_moe."), 18, ".mlp.");
    tensors.emplace_back(name, file.tensor(e.name));
  }
  io::save_safetensors(out / "model.safetensors", tensors);
  return out;
}

// Every tensor of `fused` (a fused checkpoint's file) against the per-expert checkpoint `separate`: the fused ones
// are the stacks of its experts' tensors, the others its tensors under their per-expert names.
void expect_fused_equal(const fs::path& fused, const fs::path& separate, bool mixtral) {
  const io::SafetensorsFile f(fused / "model.safetensors"), s(separate / "model.safetensors");
  size_t held = 0;
  for (const auto& e : f.entries()) {
    SCOPED_TRACE(e.name);
    const at::Tensor t = f.tensor(e.name);
    const auto pos = e.name.rfind(".experts.");
    const std::string projection = pos == std::string::npos ? "" : e.name.substr(pos + 9);
    if (projection == "gate_up_proj" || projection == "down_proj") {
      const std::string experts = e.name.substr(0, pos + 9);
      ASSERT_EQ(t.dim(), 3);
      for (int64_t x = 0; x < t.size(0); ++x) {
        auto part = [&](const char* p) {
          return s.tensor(per_expert_name(experts + std::to_string(x) + "." + p + ".weight", mixtral));
        };
        const at::Tensor want =
            projection == "down_proj" ? part("down_proj") : at::cat({part("gate_proj"), part("up_proj")}, 0);
        EXPECT_TRUE(at::equal(t[x], want)) << "expert " << x;
        held += projection == "down_proj" ? 1 : 2;
      }
    } else {
      EXPECT_TRUE(at::equal(t, s.tensor(per_expert_name(e.name, mixtral))));
      ++held;
    }
  }
  EXPECT_EQ(held, s.entries().size()) << "every tensor of the per-expert checkpoint, once";
}

struct Fixture {
  const char* name;
  bool mixtral;
};
const std::vector<Fixture> kFixtures = {
    {"qwen3_moe_routed", false}, {"qwen2_moe_shared", false}, {"mixtral_top2", true}, {"olmoe_clip", false}};

TEST(FusedExperts, AFusedCheckpointComputesWhatItsTwinComputesAndIsWrittenAsItWasRead) {
  test::TempDir dir;
  for (const Fixture& fx : kFixtures) {
    SCOPED_TRACE(fx.name);
    const fs::path separate = test::source_dir() / "tests/data/model" / fx.name;
    const fs::path fused = fused_twin(separate, dir.path(), fx.mixtral);
    const model::CausalLM a = model::CausalLM::load(separate), b = model::CausalLM::load(fused);
    std::vector<std::string> names;
    for (const std::string& n : b.linear_names(0)) {
      const std::string full = per_expert_name("model.layers.0." + n + ".weight", fx.mixtral);
      names.push_back(full.substr(15, full.size() - 15 - 7));
    }
    EXPECT_EQ(names, a.linear_names(0));
    EXPECT_EQ(b.num_parameters(), a.num_parameters());
    EXPECT_TRUE(b.config().moe->fused);
    EXPECT_FALSE(a.config().moe->fused);
    const auto inspected = test::run_cli({"inspect", "--model", fused.string()});
    EXPECT_NE(inspected.out.find("stored fused (mlp.experts.gate_up_proj and down_proj)"), std::string::npos)
        << inspected.out;
    at::manual_seed(0);
    const at::Tensor ids = at::randint(512, {2, 12}, at::kLong);
    // The same weights (views of the fused tensors), the same products.
    EXPECT_TRUE(at::equal(b.forward(ids), a.forward(ids)));
    const fs::path saved = dir / (std::string("saved-") + fx.name);
    b.save(saved);
    const io::SafetensorsFile in(fused / "model.safetensors"), out(saved / "model.safetensors");
    ASSERT_EQ(out.entries().size(), in.entries().size());
    for (const auto& e : in.entries()) EXPECT_TRUE(at::equal(out.tensor(e.name), in.tensor(e.name))) << e.name;
    expect_fused_equal(saved, separate, fx.mixtral);
  }
}

TEST(FusedExperts, APrunedFusedCheckpointHoldsWhatItsTwinsPrunedCheckpointHoldsFused) {
  // Experts removed, a quarter of the kept experts' neurons, then SparseGPT at 50%: each step on views of the fused
  // file computes what it computes on the per-expert tensors.
  test::TempDir dir;
  for (const Fixture& fx : {kFixtures[1], kFixtures[2]}) {
    SCOPED_TRACE(fx.name);
    const fs::path separate = test_prune::fixture_with_tokenizer(fx.name, dir.path());
    const fs::path fused = fused_twin(separate, dir.path(), fx.mixtral);
    std::vector<std::string> flags = {"prune", "--calib", test_prune::calib()};
    for (const char* f :
         {"--nsamples", "4", "--seqlen", "32", "--device", "cpu", "--method", "sparsegpt", "--sparsity", "0.5",
          "--remove-experts", "0.25", "--remove-neurons", "0.25", "--structured-method", "score", "--json"})
      flags.push_back(f);
    std::map<std::string, json> reports;
    for (const fs::path& model : {separate, fused}) {
      std::vector<std::string> args = flags;
      args.insert(args.end(),
                  {"--model", model.string(), "--out", (dir / ("out-" + model.filename().string())).string()});
      const auto r = test::run_cli(args);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      reports[model.filename().string()] = json::parse(r.out);
    }
    const fs::path a = dir / ("out-" + separate.filename().string()), b = dir / ("out-" + fused.filename().string());
    expect_fused_equal(b, a, fx.mixtral);
    EXPECT_EQ(json::parse(io::read_text_file(b / "config.json")), json::parse(io::read_text_file(a / "config.json")));
    const json& ra = reports.at(separate.filename().string()).at("layers");
    const json& rb = reports.at(fused.filename().string()).at("layers");
    ASSERT_EQ(rb.size(), ra.size());
    for (size_t l = 0; l < ra.size(); ++l) {
      EXPECT_EQ(per_expert_name(rb[l].at("name").get<std::string>() + ".weight", fx.mixtral),
                ra[l].at("name").get<std::string>() + ".weight");
      EXPECT_EQ(rb[l].at("rel_error"), ra[l].at("rel_error")) << ra[l].at("name");
    }
  }
}

TEST(FusedExperts, AFusedTensorThatIsNotExpertsBySizeIsRefusedNamingIt) {
  test::TempDir dir;
  const fs::path separate = test::source_dir() / "tests/data/model/qwen3_moe_routed";
  const fs::path fused = fused_twin(separate, dir.path(), false);
  // gate_up_proj with an odd row count: not gate then up of one size.
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  const io::SafetensorsFile file(fused / "model.safetensors");
  for (const auto& e : file.entries()) {
    at::Tensor t = file.tensor(e.name);
    if (e.name == "model.layers.0.mlp.experts.gate_up_proj") t = t.narrow(1, 0, t.size(1) - 1).contiguous();
    tensors.emplace_back(e.name, t);
  }
  fs::remove(fused / "model.safetensors");
  io::save_safetensors(fused / "model.safetensors", tensors);
  const std::string message = test::error_message([&] { model::CausalLM::load(fused); });
  EXPECT_NE(message.find("model.layers.0.mlp.experts.gate_up_proj in model.safetensors: its 47 rows per expert are "
                         "not 2 projections of one size"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace alps
