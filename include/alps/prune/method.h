#pragma once
// The solver interface: one implementation per file in src/prune/methods/, chosen by name from one explicit
// table (src/prune/registry.cc).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace alps::prune {

struct LayerProblem;
class Pattern;

/// A method's result.
struct Solution {
  at::Tensor W;                ///< [out, in], fp32, on the device of the problem, support allowed by the pattern
  int64_t iterations = 0;      ///< ADMM iterations (ALPS), swap cycles (DSnoT), 0 otherwise
  double rho = 0;              ///< final ADMM penalty (ALPS)
  int64_t factorizations = 0;  ///< eigendecompositions / Cholesky factorisations of the Gram matrix performed
  int64_t refit_iterations = 0;  ///< PCG iterations of the method's own refit (ALPS)
};

class Method {
 public:
  virtual ~Method() = default;
  virtual std::string_view name() const = 0;
  /// Returns W whose support is allowed by `pattern`; never modifies `problem`.
  virtual Solution solve(const LayerProblem& problem, const Pattern& pattern) const = 0;
};

using MethodFactory = std::unique_ptr<Method> (*)(const nlohmann::json& options);

/// Builds method `name` with `options` (a JSON object of that method's option fields; unknown keys are errors).
std::unique_ptr<Method> make_method(std::string_view name, const nlohmann::json& options);
/// Known method names, sorted.
std::vector<std::string> method_names();
/// Every method as [{name, summary, patterns: {unstructured, n_m}, options: [{name, type, default, help}]}], from the
/// same table make_method() reads: what `alps methods` prints.
nlohmann::json method_catalog();

}  // namespace alps::prune
