#include "alps/pipeline/sparsity_profile.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <numeric>

#include "alps/core/host_allocator.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/activations.h"
#include "alps/pipeline/exchange.h"
#include "alps/pipeline/run_state.h"
#include "alps/prune/methods/wanda.h"
#include "alps/prune/owl.h"

namespace alps::pipeline {

using json = nlohmann::json;

SparsityProfile::SparsityProfile(const RunPlan& plan, const model::CausalLM& m, const prune::Pattern* target)
    : plan_(plan), m_(m), target_(target) {}

void SparsityProfile::measure(model::CausalLM& m, const Activations& inputs, int64_t windows, Exchange& exchange,
                              Phases& phases) {
  const auto phase = phases.enter("sparsity_profile", "measuring the outliers of the dense blocks");
  const prune::OwlOptions& o = *plan_.owl;
  Activations x = inputs.copy();  // block 0's inputs are kept for the pruning
  std::vector<double> fractions;
  for (int64_t b = 0; b < m.num_blocks(); ++b) {
    const std::string step =
        fmt::format("measuring the outliers of dense block {}/{} (--sparsity-profile owl)", b + 1, m.num_blocks());
    phases.set_step(step);
    m.load_block(b);
    std::map<std::string, at::Tensor> sum_sq;  // per linear: the sums of squares of its input's columns
    x.pass(b, [&](const std::string& linear, const at::Tensor& in) {
      const at::Tensor s = in.reshape({-1, in.size(-1)}).to(at::kFloat).pow(2).sum(0);
      auto [it, fresh] = sum_sq.emplace(linear, s);
      if (!fresh) it->second.add_(s);
    });
    std::vector<at::Tensor> scores;
    for (const auto& linear : m.linear_names(b)) {
      exchange.sum(sum_sq.at(linear), step);  // over every rank's windows, the same sums on all
      scores.push_back(prune::wanda_score(m.tensor(m.weight_name(b, linear)).to(plan_.device), sum_sq.at(linear),
                                          static_cast<double>(windows)));
    }
    fractions.push_back(prune::outlier_fraction(scores, o.m));
    m.unload_block(b);
  }
  release_host_buffer_cache();
  allocate(fractions, o.m, o.lambda);
  const auto [lo, hi] = std::minmax_element(block_sparsity_.begin(), block_sparsity_.end());
  spdlog::info("sparsity profile owl (M {}, lambda {}): block sparsities {:.4f} .. {:.4f}, mean {:.4f}", o.m, o.lambda,
               *lo, *hi, target_->sparsity());
}

void SparsityProfile::allocate(const std::vector<double>& fractions, double m, double lambda) {
  json_ = {{"profile", "owl"},
           {"m", m},
           {"lambda", lambda},
           {"sparsity", target_->sparsity()},
           {"outlier_fraction", fractions}};
  if (target_->is_n_m()) {  // OWL's mixed N:M variant: a kept count per block
    block_kept_ = prune::owl_block_kept(fractions, target_->n(), lambda);
    block_sparsity_.clear();
    for (int64_t k : block_kept_)
      block_sparsity_.push_back(1.0 - static_cast<double>(k) / static_cast<double>(target_->m()));
    json_["pattern"] = target_->str();
    json_["block_kept"] = block_kept_;
    json_["block_sparsity"] = block_sparsity_;
  } else {
    block_sparsity_ = prune::owl_block_sparsities(fractions, target_->sparsity(), lambda);
    json_["block_sparsity"] = block_sparsity_;
    const auto [zeros, weights] = apportion();
    json_["zeros"] = zeros;
    json_["weights"] = weights;
  }
}

void SparsityProfile::restore(const json& saved) {
  if (saved.is_null()) return;
  json_ = saved;
  block_sparsity_ = saved.at("block_sparsity").get<std::vector<double>>();
  if (saved.contains("block_kept"))
    block_kept_ = saved.at("block_kept").get<std::vector<int64_t>>();
  else
    apportion();
}

// The zeros of every linear that follows the profile, from the blocks' sparsities, so that they total round(S N)
// over those linears' N weights (prune::apportion_zeros); returns that total and N.
std::pair<int64_t, int64_t> SparsityProfile::apportion() {
  std::vector<std::string> weights;
  std::vector<double> sparsity;
  std::vector<int64_t> numel;
  for (int64_t b = 0; b < plan_.num_blocks(); ++b)
    for (const LayerJob& j : plan_.block(b)) {
      if (j.skip || !j.follows_profile) continue;
      weights.push_back(j.weight);
      sparsity.push_back(block_sparsity_.at(static_cast<size_t>(b)));
      numel.push_back(m_.tensor(j.weight).numel());
    }
  const auto zeros = prune::apportion_zeros(sparsity, numel, target_->sparsity());
  zeros_.clear();
  for (size_t i = 0; i < weights.size(); ++i) zeros_[weights[i]] = zeros[i];
  return {std::accumulate(zeros.begin(), zeros.end(), int64_t{0}),
          std::accumulate(numel.begin(), numel.end(), int64_t{0})};
}

std::vector<LayerJob> SparsityProfile::jobs(int64_t b) const {
  std::vector<LayerJob> jobs = plan_.block(b);
  if (block_sparsity_.empty()) return jobs;
  // A profile's share of the model's zeros, where no override set another pattern.
  for (LayerJob& j : jobs) {
    if (j.skip || !j.follows_profile) continue;
    const auto w = m_.tensor(j.weight);
    j.pattern = block_kept_.empty()
                    ? prune::Pattern::unstructured_count(zeros_.at(j.weight), w.size(0), w.size(1))
                    : prune::Pattern::n_m(block_kept_.at(static_cast<size_t>(b)), target_->m());
  }
  return jobs;
}

}  // namespace alps::pipeline
