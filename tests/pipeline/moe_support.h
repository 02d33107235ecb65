#pragma once
// What the mixture-of-experts pipeline tests (prune_moe_test.cc, prune_experts_test.cc) share: a prune run on a
// fixture with its report and dumped layer problems, and a second formulation of block 0's routing.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alps/model/causal_lm.h"

namespace alps::test_moe {

/// The committed TinyStories sample the MoE tests calibrate on.
std::string calib();

struct PruneRun {
  nlohmann::json report;
  std::filesystem::path problems;
};

/// `alps prune` of `model` into dir/pruned on `nsamples` windows of `seqlen` tokens of calib(), on the CPU, its layer
/// problems into dir/problems when `dump` (a method that reads calibration data); `extra` follows.
PruneRun prune(const std::filesystem::path& model, const std::filesystem::path& dir, int64_t nsamples, int64_t seqlen,
               std::vector<std::string> extra, bool dump = true);

/// The calibration windows such a run draws, as token ids [nsamples, seqlen].
at::Tensor calibration_ids(const std::filesystem::path& model, int64_t nsamples, int64_t seqlen);

/// The hidden states entering block 0's MLP, [tokens, hidden] in fp64: what every expert's gate and up projections
/// read when every token is shown to every expert.
at::Tensor mlp_inputs(const model::CausalLM& m, const at::Tensor& ids);

/// Each token's top-k experts by a scan over the router's probabilities [tokens, experts] (ties to the higher index,
/// as torch.topk picks them in the fixtures), a second formulation of the forward's sort: per expert, its tokens.
std::vector<std::vector<int64_t>> routed_tokens(const at::Tensor& probs, int64_t k);

}  // namespace alps::test_moe
