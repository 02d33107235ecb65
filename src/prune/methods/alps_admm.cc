#include "alps/prune/methods/alps_admm.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "../mask.h"
#include "../options.h"
#include "../pcg.h"
#include "alps/core/error.h"
#include "alps/core/log.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"

namespace alps::prune {

AlpsOptions alps_options_from_json(const nlohmann::json& j) {
  AlpsOptions o;
  detail::OptionReader r(j, "alps");
  r.read("damp", o.damp);
  r.read("rho0", o.rho0);
  r.read("max_iterations", o.max_iterations);
  r.read("check_every", o.check_every);
  r.read("grow_fast", o.grow_fast);
  r.read("grow_mid", o.grow_mid);
  r.read("grow_slow", o.grow_slow);
  r.read("fast_fraction", o.fast_fraction);
  r.read("mid_fraction", o.mid_fraction);
  r.read("shrink", o.shrink);
  r.read("restart", o.restart);
  r.read("rho_max", o.rho_max);
  r.read("late_iteration", o.late_iteration);
  r.read("late_fraction", o.late_fraction);
  r.read("pcg_iterations", o.pcg_iterations);
  r.read("pcg_tolerance", o.pcg_tolerance);
  r.finish();
  return o;
}

RhoSchedule::RhoSchedule(const AlpsOptions& options) : o_(options), rho_(options.rho0) {}

RhoSchedule::Action RhoSchedule::check(int64_t iteration, int64_t changed, int64_t kept) {
  const double s = static_cast<double>(changed), k = static_cast<double>(kept);
  Action action = Action::kContinue;
  if (s >= o_.fast_fraction * k && s >= 1) {
    increased_ = true;
    rho_ *= o_.grow_fast;
  } else if (s >= o_.mid_fraction * k && s >= 1) {
    increased_ = true;
    rho_ *= o_.grow_mid;
  } else if (s >= 1) {
    if (increased_) {
      rho_ *= o_.grow_slow;
    } else {
      // Reference: rho0 was too large for this layer (the support froze early): restart with a smaller rho.
      rho_ /= o_.shrink;
      if (o_.restart) action = Action::kRestart;
    }
  } else {
    if (increased_) return Action::kStop;  // stable support after rho grew: converged (SPEC §3)
    rho_ /= o_.shrink;
  }
  rho_ = std::min(rho_, o_.rho_max);
  if (iteration >= o_.late_iteration && s < o_.late_fraction * k) return Action::kStop;
  return action;
}

Alps::Alps(AlpsOptions options) : options_(options) {
  const auto& o = options_;
  ALPS_CHECK(o.damp >= 0 && o.rho0 > 0 && o.rho_max > 0 && o.shrink > 0, "alps: damp >= 0, rho0 > 0, rho_max > 0 and "
             "shrink > 0 are required, got damp=", o.damp, " rho0=", o.rho0, " rho_max=", o.rho_max, " shrink=", o.shrink);
  ALPS_CHECK(o.max_iterations >= 0 && o.check_every >= 1 && o.pcg_iterations >= 0 && o.pcg_tolerance >= 0,
             "alps: max_iterations >= 0, check_every >= 1, pcg_iterations >= 0, pcg_tolerance >= 0 are required");
}

namespace {
// Projection P onto the pattern in the scaled variable: Z is [in, out], decisions on |Z| = |W_ij| d_j across the
// whole layer (unstructured) or per group of M inputs of each output row (N:M). Returns the kept mask [in, out].
at::Tensor project_keep(const at::Tensor& Z, const Pattern& pattern) {
  if (pattern.is_n_m()) return detail::keep_mask_layer(Z.t().abs(), pattern).t();
  return detail::keep_largest(Z.abs(), pattern.zeros_total(Z.size(1), Z.size(0)));
}
}  // namespace

Solution Alps::solve(const LayerProblem& problem, const Pattern& pattern) const {
  check_problem(problem, "alps");
  pattern.check_shape(problem.rows(), problem.cols());
  const auto& o = options_;
  Solution sol;
  if (pattern.is_dense()) {
    sol.W = problem.W0.to(at::kFloat).clone();
    return sol;
  }
  // Preprocessing (SPEC §3 steps 1-2), fp64 as the reference: lambda = damp * mean(diag G), Hn = D^-1 H D^-1.
  at::Tensor H = problem.G.to(at::kDouble).clone();                          // [in, in]
  H.diagonal().add_(o.damp * H.diagonal().mean().item<double>());
  at::Tensor d64 = H.diagonal().sqrt() + 1e-8;                               // [in]
  at::Tensor Hn64 = H / d64.unsqueeze(1) / d64.unsqueeze(0);
  // The one eigendecomposition per layer: (Hn + rho I)^-1 = Q diag(1 / (L + rho)) Q^T for every rho.
  const auto t0 = std::chrono::steady_clock::now();
  auto [L64, Q64] = at::linalg_eigh(Hn64);
  sol.factorizations = 1;
  const double eigh_seconds = seconds_since(t0);
  at::Tensor Q = Q64.to(at::kFloat), Qt = Q.t().contiguous(), L = L64.to(at::kFloat).unsqueeze(1);  // L: [in, 1]
  at::Tensor Hn = Hn64.to(at::kFloat);
  at::Tensor d = d64.to(at::kFloat).unsqueeze(1);                            // [in, 1]

  at::Tensor B0 = problem.W0.to(at::kFloat).t() * d;                         // [in, out], B0 = D W0^T
  at::Tensor Y = Hn.matmul(B0);                                              // [in, out]
  const int64_t numel = B0.numel();
  const int64_t kept = numel - pattern.zeros_total(problem.rows(), problem.cols());
  at::Tensor keep0 = project_keep(B0, pattern);
  at::Tensor D0 = B0 * keep0;
  at::Tensor B = B0, D = D0, V = at::zeros_like(B0), keep_prev = keep0;

  RhoSchedule schedule(o);
  double rho = schedule.rho();
  int64_t it = 0;
  for (; it < o.max_iterations; ++it) {
    // B-update (paper eq. 4): B = Q diag(1/(L + rho)) Q^T (Y - V + rho D); a new rho only changes the divisor.
    B = Q.matmul(Qt.matmul(Y - V + rho * D).div_(L + rho));
    at::Tensor Z = B + V / rho;
    at::Tensor keep = project_keep(Z, pattern);
    D = Z * keep;
    V = V + rho * (B - D);
    if ((it + 1) % o.check_every != 0) continue;
    const int64_t changed = keep.ne(keep_prev).sum().item<int64_t>();
    keep_prev = keep;
    const auto action = schedule.check(it, changed, kept);
    spdlog::trace("alps: iteration {} support change {} / {} rho {} -> {}", it + 1, changed, kept, rho,
                  schedule.rho());
    rho = schedule.rho();
    if (action == RhoSchedule::Action::kStop) {
      ++it;
      break;
    }
    if (action == RhoSchedule::Action::kRestart) {
      B = B0;
      D = D0;
      V = at::zeros_like(B0);
    }
  }
  sol.iterations = it;
  sol.rho = rho;
  spdlog::debug("alps: eigendecomposition {:.3f} s, {} ADMM iterations {:.3f} s, final rho {}", eigh_seconds, it,
                seconds_since(t0) - eigh_seconds, rho);
  // The support comes from the primal iterate B (reference), then PCG on that support (paper Algorithm 2),
  // warm-started from the projected B.
  at::Tensor keep = project_keep(B, pattern).to(at::kFloat);
  auto refit = detail::pcg_masked(Hn, Y, keep, B * keep, o.pcg_iterations, o.pcg_tolerance);
  sol.refit_iterations = refit.iterations;
  sol.W = (refit.B / d).t().contiguous();
  return sol;
}

std::unique_ptr<Method> make_alps_admm(const nlohmann::json& options) {
  return std::make_unique<Alps>(alps_options_from_json(options));
}

}  // namespace alps::prune
