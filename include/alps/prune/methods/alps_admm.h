#pragma once
// ALPS (docs/algorithms.md; paper Algorithms 1 and 2): ADMM with the rho schedule on the scaled problem, then masked PCG.
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "alps/prune/method.h"

namespace alps::prune {

/// Every constant of ALPS, with the reference defaults.
struct AlpsOptions {
  double damp = 0.01;            ///< lambda = damp * mean(diag G)
  double rho0 = 0.1;             ///< initial penalty
  int64_t max_iterations = 300;  ///< ADMM iterations at most
  int64_t check_every = 3;       ///< support-change check period (iterations)
  double grow_fast = 1.3;        ///< rho factor when s_t >= fast_fraction * k
  double grow_mid = 1.2;         ///< rho factor when s_t >= mid_fraction * k
  double grow_slow = 1.1;        ///< rho factor when s_t >= 1
  double fast_fraction = 0.1;
  double mid_fraction = 0.005;
  double shrink = 5.0;           ///< before the first increase, a stable/barely changing support divides rho by this
  bool restart = true;           ///< ... and, when some entries still change, restarts from B0, D0, V = 0
  double rho_max = 1e6;          ///< cap on rho
  int64_t late_iteration = 30;   ///< from this (0-based) iteration on, s_t < late_fraction * k also stops
  double late_fraction = 3e-4;
  int64_t pcg_iterations = 10;   ///< masked PCG refit after ADMM (0 = none)
  double pcg_tolerance = 1e-6;   ///< relative masked-residual tolerance of that refit
  /// Eigendecomposition of Hn in fp64 (the reference's precision) or fp32 (default: on the CPU half the time, 1.9
  /// vs 3.8 s at in = 3072, with the same errors to 3-4 digits on every problem of docs/benchmarks.md; the ADMM
  /// only uses it inside (Hn + rho I)^-1, and the PCG refit works with Hn itself).
  bool eigh_double = false;
  /// "eigenbasis": B = Q (Q^T R / (L + rho)), two products per iteration; "explicit": (Hn + rho I)^-1 formed
  /// from Q, L once per rho, one product per iteration; "auto": the cheaper one for the layer's shape.
  std::string b_update = "auto";
  /// CPU fp32: the vector work of an iteration (projection, dual update, right-hand side; PCG's updates) in fused
  /// passes. false runs the same arithmetic as ATen operations, as on other devices.
  bool fused = true;
};
/// Keys are the field names above; anything else is an error.
AlpsOptions alps_options_from_json(const nlohmann::json& j);

/// The rho schedule (docs/algorithms.md) as a small state machine, so that it can be driven by known support changes.
class RhoSchedule {
 public:
  enum class Action { kContinue, kRestart, kStop };
  explicit RhoSchedule(const AlpsOptions& options);
  /// Support check after 0-based `iteration` with `changed` = s_t entries whose zero status flipped since the
  /// last check and `kept` = k; updates rho and says what the ADMM loop does next.
  Action check(int64_t iteration, int64_t changed, int64_t kept);
  double rho() const { return rho_; }
  bool increased() const { return increased_; }

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

 private:
  AlpsOptions options_;
};

std::unique_ptr<Method> make_alps_admm(const nlohmann::json& options);

}  // namespace alps::prune
