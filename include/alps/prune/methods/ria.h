#pragma once
// RIA, relative importance and activations (docs/algorithms.md): score (|W_ij| / sum_k |W_kj| + |W_ij| / sum_k
// |W_ik|) * (||X_j|| / sqrt(T))^a, the lowest pruned across the layer (or per output row); for N:M, optionally after
// a channel permutation that spreads large scores over different groups. Weights are left as they are.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "alps/prune/method.h"

namespace alps::prune {

/// RIA's constants; their meaning is declared once, in the option table (ria_option_list()).
struct RiaOptions {
  double a = 0.5;
  bool per_row = false;
  std::string permutation = "none";
  int64_t lsa_blocks = 1;
};
/// Reads an options object (keys: the table's names; anything else is an error).
RiaOptions ria_options_from_json(const nlohmann::json& j);
/// The option table as [{name, type, default, help}].
nlohmann::json ria_option_list();

/// RIA's score of every weight ([out, in], fp32): relative importance times the input's RMS to the power a.
at::Tensor ria_score(const LayerProblem& problem, double a);

/// The order of the input channels in which N:M groups are formed (position p holds channel order[p], int64 [in]),
/// for `permutation` "heuristic" (channels sorted by their summed score, dealt to the M members of the groups in
/// turn, every other member's deal reversed) or "lsa" (then, for each member c of the groups in turn, the linear
/// sum assignment of the channels at member c to the groups that maximises the kept score; `lsa_blocks` > 1 solves
/// it within that many runs of consecutive groups).
at::Tensor ria_channel_order(const at::Tensor& score, const Pattern& pattern, const std::string& permutation,
                             int64_t lsa_blocks);

class Ria final : public Method {
 public:
  explicit Ria(RiaOptions options = {});
  std::string_view name() const override { return "ria"; }
  Solution solve(const LayerProblem& problem, const Pattern& pattern) const override;
  bool reorders_inputs() const override { return options_.permutation != "none"; }

 private:
  RiaOptions options_;
};

std::unique_ptr<Method> make_ria(const nlohmann::json& options);

}  // namespace alps::prune
