#pragma once
// Structured pruning (docs/structured.md): which input units of a linear to keep (MLP neurons: columns of down_proj;
// attention heads: groups of head_dim columns of o_proj) and the kept columns' weights. The layer-wise problem is
// the paper's with whole units removed: for a kept set S of units, min over W_S of ||X W0^T - X_S W_S^T||_F^2, whose
// value follows from the Gram matrix G = X^T X alone. One method per file in src/prune/structured/, chosen by name
// from one table (src/prune/structured/registry.cc).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace alps::prune {

/// Which units of one linear's input to keep. The input's columns come in `units` consecutive units of `width`
/// columns; the units come in `parts` consecutive parts of equal size (a key/value group's query heads), and each
/// part keeps `keep` of its units.
struct UnitProblem {
  at::Tensor W0;  ///< [out, units * width] the linear's dense weight
  at::Tensor G;   ///< [in, in] Gram matrix of its input (undamped)
  int64_t width = 1;
  int64_t parts = 1;
  int64_t keep = 0;  ///< units kept in each part
  std::string name;  ///< the linear's name, for messages

  int64_t in() const { return W0.size(1); }
  int64_t units() const { return in() / width; }
  int64_t units_per_part() const { return units() / parts; }
};

/// A structured method's answer.
struct UnitSolution {
  std::vector<int64_t> kept;  ///< the kept units, ascending: `keep` of each part
  at::Tensor W;               ///< [out, kept * width] fp32: the kept columns' new weights, in the kept units' order
  nlohmann::json stats = nlohmann::json::object();  ///< what the method says about its search (swaps, ...)
};

class UnitMethod {
 public:
  virtual ~UnitMethod() = default;
  virtual std::string_view name() const = 0;
  virtual UnitSolution solve(const UnitProblem& problem) const = 0;
};

/// Throws unless the problem is well formed (shapes, divisibility, 1 <= keep <= units per part, finite values).
void check_unit_problem(const UnitProblem& p, const std::string& what);

/// The input columns of `units` (ascending unit indices) of width `width`: [units.size() * width] int64.
at::Tensor unit_columns(const std::vector<int64_t>& units, int64_t width, c10::Device device);

/// The least-squares refit of the columns `cols` of W0: W0 H[:, C] H[C, C]^-1 with H = G + lambda I, lambda =
/// damp * mean(diag G) (dead inputs, G_jj = 0, count as 1 there so H stays invertible); fp32 [out, |C|].
at::Tensor refit_columns(const at::Tensor& W0, const at::Tensor& G, const at::Tensor& cols, double damp);

/// tr(D G D^T) / tr(W0 G W0^T) in fp64 for D = W0 - W (W's kept columns in place, zeros elsewhere): the share of the
/// output's energy on the calibration tokens that the structured layer loses.
double unit_relative_error(const UnitProblem& p, const UnitSolution& s);

/// Builds structured method `name` with `options` (its option fields; unknown keys are usage errors).
std::unique_ptr<UnitMethod> make_unit_method(std::string_view name, const nlohmann::json& options);
/// Known names, sorted.
std::vector<std::string> unit_method_names();
/// [{name, summary, options: [{name, type, default, help}]}] from the same table (`alps methods`).
nlohmann::json unit_method_catalog();

}  // namespace alps::prune
