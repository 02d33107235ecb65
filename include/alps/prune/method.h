#pragma once
// The solver interface: one implementation per file in src/prune/methods/, chosen by name from one explicit
// table (src/prune/registry.cc).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace alps::prune {

struct LayerProblem;
class Pattern;

/// A method's result.
struct Solution {
  at::Tensor W;  ///< [out, in], fp32, on the device of the problem, support allowed by the pattern
  /// What the method says about how it got W, as named numbers (ALPS: iterations, rho, refit_iterations,
  /// factorizations; DSnoT: cycles; SparseGPT: factorizations). Reports, `solve-layer` and the layer benchmark print
  /// them without knowing the method.
  nlohmann::json stats = nlohmann::json::object();
  /// Set by a method that forms N:M groups in another order of the inputs (RIA's channel permutation): position p
  /// of that order reads input order[p] (int64 [in]). W keeps the model's order: the layer computes the same function,
  /// and W[:, order] is N:M.
  at::Tensor input_order{};
};

class Method {
 public:
  virtual ~Method() = default;
  virtual std::string_view name() const = 0;
  /// Returns W whose support is allowed by `pattern`; never modifies `problem`.
  virtual Solution solve(const LayerProblem& problem, const Pattern& pattern) const = 0;
  /// Whether solve() reads the calibration statistics (G, mean, tokens); a method that reads only W0 is given a
  /// problem without them when the run has no calibration data.
  virtual bool needs_statistics() const { return true; }
  /// Whether solve() accepts a problem holding some rows of the weight (LayerProblem::split), solving them together
  /// with the processes that hold the others: the same solution as one process solving the whole weight, to the
  /// rounding of the sums the parts add up.
  virtual bool splits_rows() const { return false; }
  /// Whether solve() may set Solution::input_order (RIA with a channel permutation).
  virtual bool reorders_inputs() const { return false; }
  /// Whether solve() fits the kept weights to the calibration statistics (a least-squares update, not only a mask):
  /// such a method needs more calibration tokens than a score does before it generalises (README, "Choosing a
  /// method and a calibration size").
  virtual bool refits_weights() const { return false; }
};

/// Solution::stats on one line: "iterations 33, rho 0.717" (integers as they are, other numbers to 3 digits).
std::string stats_text(const nlohmann::json& stats);

using MethodFactory = std::unique_ptr<Method> (*)(const nlohmann::json& options);

/// Builds method `name` with `options` (a JSON object of that method's option fields; unknown keys are errors).
std::unique_ptr<Method> make_method(std::string_view name, const nlohmann::json& options);
/// Known method names, sorted.
std::vector<std::string> method_names();
/// Every method as [{name, summary, patterns: {unstructured, n_m}, options: [{name, type, default, help}]}], from the
/// same table make_method() reads: what `alps methods` prints.
nlohmann::json method_catalog();

}  // namespace alps::prune
