#pragma once
// ALPS (docs/algorithms.md; paper Algorithms 1 and 2): ADMM with the rho schedule on the scaled problem, then
// masked PCG. "The reference" below is the authors' code, github.com/mazumder-lab/ALPS at commit
// 8af9e6b5c8b1b06a028bde6065e5c38829df3a19 (the one docs/benchmarks.md compares with).
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "alps/prune/method.h"

namespace alps::prune {

/// Every constant of ALPS, with the reference defaults; what each means is declared once, in its option table
/// (alps_option_list(), `alps methods alps`).
struct AlpsOptions {
  double damp = 0.01;
  double rho0 = 0.1;
  int64_t max_iterations = 300;
  int64_t check_every = 3;
  double grow_fast = 1.3;
  double grow_mid = 1.2;
  double grow_slow = 1.1;
  double fast_fraction = 0.1;
  double mid_fraction = 0.005;
  double shrink = 5.0;
  bool restart = true;
  double rho_max = 1e6;
  int64_t late_iteration = 30;
  double late_fraction = 3e-4;
  int64_t pcg_iterations = 10;
  double pcg_tolerance = 1e-6;
  bool eigh_double = false;
  std::string b_update = "auto";
  std::string products = "auto";
  bool fused = true;
};
/// Reads an options object (keys: the table's names; anything else is an error).
AlpsOptions alps_options_from_json(const nlohmann::json& j);
/// The option table as [{name, type, default, help}].
nlohmann::json alps_option_list();

/// Whether, on a GPU, a Cholesky factorization per value of rho costs less than the eigendecomposition of an [in, in]
/// Hn (shared by `users` linears, or already made) plus the explicit inverse per rho, for a weight [out, in].
bool cholesky_is_cheaper(int64_t in, int64_t out, int64_t users, bool eigh_cached);

/// The rho schedule (docs/algorithms.md) as a small state machine, so that it can be driven by known support changes.
class RhoSchedule {
 public:
  enum class Action { kContinue, kRestart, kStop };
  explicit RhoSchedule(const AlpsOptions& options);
  /// Support check after 0-based `iteration` with `changed` = s_t entries whose zero status flipped since the
  /// last check and `kept` = k; updates rho and says what the ADMM loop does next.
  Action check(int64_t iteration, int64_t changed, int64_t kept);
  double rho() const { return rho_; }

 private:
  AlpsOptions o_;
  double rho_;
  bool increased_ = false;
};

class Alps final : public Method {
 public:
  explicit Alps(AlpsOptions options = {});
  std::string_view name() const override { return "alps"; }
  /// Solution::iterations = ADMM iterations run, rho = final rho, factorizations = 1 (one eigendecomposition).
  Solution solve(const LayerProblem& problem, const Pattern& pattern) const override;
  bool splits_rows() const override { return true; }
  bool refits_weights() const override { return true; }

 private:
  AlpsOptions options_;
};

std::unique_ptr<Method> make_alps_admm(const nlohmann::json& options);

}  // namespace alps::prune
