#include "moe_support.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "alps/pipeline/calibration.h"
#include "alps/tokenizer/tokenizer.h"
#include "support.h"

namespace alps::test_moe {

namespace fs = std::filesystem;
using nlohmann::json;

std::string calib() { return (test::committed_data_dir() / "text/tinystories/tinystories_sample.txt").string(); }

PruneRun prune(const fs::path& model, const fs::path& dir, int64_t nsamples, int64_t seqlen,
               std::vector<std::string> extra, bool dump) {
  std::vector<std::string> args = {
      "prune", "--model",    model.string(),           "--out",    (dir / "pruned").string(), "--calib",
      calib(), "--nsamples", std::to_string(nsamples), "--seqlen", std::to_string(seqlen),    "--device",
      "cpu",   "--json"};
  if (dump) args.insert(args.end(), {"--dump-problems", (dir / "problems").string()});
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = test::run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return {r.exit_code == 0 ? json::parse(r.out) : json(), dir / "problems"};
}

at::Tensor calibration_ids(const fs::path& model, int64_t nsamples, int64_t seqlen) {
  const auto tok = tokenizer::load_tokenizer(model);
  return pipeline::sample_windows(pipeline::read_documents(calib()), *tok, {calib(), nsamples, seqlen, 0});
}

at::Tensor mlp_inputs(const model::CausalLM& m, const at::Tensor& ids) {
  at::Tensor h;
  m.observe_block(
      0, m.embed(ids),
      [&](const std::string& linear, const at::Tensor& x) {
        if (linear == "mlp.experts.0.gate_proj") h = x.reshape({-1, x.size(-1)}).to(at::kDouble);
      },
      model::ExpertInputs::all);
  return h;
}

std::vector<std::vector<int64_t>> routed_tokens(const at::Tensor& probs, int64_t k) {
  std::vector<std::vector<int64_t>> tokens(static_cast<size_t>(probs.size(1)));
  const auto p = probs.accessor<float, 2>();
  for (int64_t t = 0; t < probs.size(0); ++t) {
    std::vector<int64_t> order(static_cast<size_t>(probs.size(1)));
    for (size_t e = 0; e < order.size(); ++e) order[e] = static_cast<int64_t>(e);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return p[t][a] > p[t][b] || (p[t][a] == p[t][b] && a > b); });
    for (int64_t j = 0; j < k; ++j) tokens[static_cast<size_t>(order[static_cast<size_t>(j)])].push_back(t);
  }
  return tokens;
}

}  // namespace alps::test_moe
