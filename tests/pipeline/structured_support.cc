#include "structured_support.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "prune_cli_support.h"

namespace alps::test_structured {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> args_for(const fs::path& model, const fs::path& out, std::vector<std::string> extra) {
  std::vector<std::string> a = {"prune",   "--model",           model.string(), "--out", out.string(),
                                "--calib", test_prune::calib(), "--nsamples",   "4",     "--seqlen",
                                "32",      "--device",          "cpu",          "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

json structured_of(const test::CliResult& r) { return json::parse(r.out).at("extra").at("structured"); }

std::vector<int64_t> kept_units(const json& structured, int64_t b, const std::string& structure) {
  for (const json& s : structured.at("blocks"))
    if (s.at("block") == b && s.at("structure") == structure) return s.at("kept_units").get<std::vector<int64_t>>();
  ADD_FAILURE() << "no " << structure << " step for block " << b;
  return {};
}

std::pair<test::CliResult, fs::path> score_a_quarter_of_the_neurons(const std::string& fixture, const fs::path& dir) {
  const fs::path model = test_prune::fixture_with_tokenizer(fixture, dir);
  return {test::run_cli(args_for(model, dir / "out", {"--structured-method", "score", "--remove-neurons", "0.25"})),
          model};
}

at::Tensor zero_removed(at::Tensor W, const std::vector<int64_t>& kept, int64_t width) {
  at::Tensor keep = at::zeros({W.size(1) / width}, at::kBool);
  for (int64_t u : kept) keep[u] = true;
  return W * keep.repeat_interleave(width).to(W.scalar_type()).unsqueeze(0);
}

}  // namespace alps::test_structured
