#include "alps/prune/methods/alps_admm.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>

#include "alps/core/device.h"
#include "alps/core/device_streams.h"
#include "alps/core/error.h"
#include "alps/core/linalg.h"
#include "alps/core/log.h"
#include "alps/core/products.h"
#include "alps/io/option_table.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"
#include "alps/prune/row_split.h"
#include "alps/prune/shared_factors.h"
#include "prune/admm_iterates.h"
#include "prune/b_update.h"
#include "prune/pcg.h"
#include "prune/scaled_problem.h"

namespace alps::prune {

namespace {
// "The reference" in this file (help texts included) is the authors' code, github.com/mazumder-lab/ALPS at commit
// 8af9e6b5c8b1b06a028bde6065e5c38829df3a19 (docs/benchmarks.md).
const io::OptionTable<AlpsOptions>& alps_options() {
  using O = AlpsOptions;
  static const auto table =
      io::OptionTable<O>()
          .add("damp", &O::damp, "lambda = damp * mean(diag G), added to G's diagonal")
          .add("rho0", &O::rho0, "initial ADMM penalty rho")
          .add("max_iterations", &O::max_iterations, "ADMM iterations at most")
          .add("check_every", &O::check_every, "iterations between support-change checks of the rho schedule")
          .add("grow_fast", &O::grow_fast, "rho factor when s_t >= fast_fraction * k supports changed")
          .add("grow_mid", &O::grow_mid, "rho factor when s_t >= mid_fraction * k")
          .add("grow_slow", &O::grow_slow, "rho factor when s_t >= 1")
          .add("fast_fraction", &O::fast_fraction, "threshold of grow_fast, as a fraction of the kept weights k")
          .add("mid_fraction", &O::mid_fraction, "threshold of grow_mid, as a fraction of k")
          .add("shrink", &O::shrink, "before rho first grows, a support that barely changes divides rho by this")
          .add("restart", &O::restart, "... and, when some entries still change, restarts from B0, D0, V = 0")
          .add("rho_max", &O::rho_max, "cap on rho")
          .add("late_iteration", &O::late_iteration,
               "from this (0-based) iteration on, s_t < late_fraction * k also stops the ADMM")
          .add("late_fraction", &O::late_fraction, "threshold of late_iteration, as a fraction of k")
          .add("pcg_iterations", &O::pcg_iterations,
               "iterations of ALPS's own masked PCG refit after the ADMM (0: none); --refine pcg adds another")
          .add("pcg_tolerance", &O::pcg_tolerance, "relative masked-residual tolerance of that refit")
          .add("eigh_double", &O::eigh_double,
               "eigendecomposition of Hn in fp64 (the reference's precision) instead of fp32; the ADMM uses it only "
               "inside (Hn + rho I)^-1 and the refit works with Hn itself")
          .add("b_update", &O::b_update,
               "eigenbasis: B = Q (Q^T R / (L + rho)), two products per iteration; explicit: (Hn + rho I)^-1 formed "
               "once per rho, one product per iteration; cholesky: Hn + rho I factored once per rho, two triangular "
               "solves per iteration, no eigendecomposition; auto: on the CPU the cheaper of eigenbasis and explicit "
               "for the layer's shape, on a GPU also cholesky where a cost model of the GPU's kernels says so "
               "(wide inputs, unshared factorizations; damp > 0)")
          .add("products", &O::products,
               "how the fp32 matrix products run (the B-update's and PCG's): fp32, the device's own; tf32x3, each "
               "operand split into two TF32 numbers and three tensor-core products (fp32's accuracy to the rounding "
               "of the sums, 2.4x faster on an H100; slower on the CPU, where it only checks the arithmetic); auto: "
               "tf32x3 on a GPU with TF32 tensor cores, else fp32")
          .add("fused", &O::fused,
               "CPU fp32: an iteration's vector work (projection, dual update, right-hand side; PCG's updates) in "
               "fused passes; false runs the same arithmetic as ATen operations, as on other devices");
  return table;
}
}  // namespace

AlpsOptions alps_options_from_json(const nlohmann::json& j) { return alps_options().read(j, "method 'alps' options"); }

nlohmann::json alps_option_list() { return alps_options().describe(); }

// On a GPU (cuBLAS and cuSOLVER, measured on an H100: docs/benchmarks.md, GPU), in units of n^3 / the fp32 product
// rate: an eigendecomposition of Hn [n, n] costs about 40 (cuSOLVER's syevd: 35 at n = 8192 and 11008, 88 at 4096),
// shared by the `users` linears that read one input, and nothing once made; then, over I ADMM iterations with rho
// changing every third, the explicit inverse costs I products of 2 n^2 out flops plus I / 3 inverses of 2 n^3, and
// Cholesky I pairs of triangular solves (r(n) times a product, 2 r n^2 out) plus I / 3 factorizations of n^3 / 3.
// r(n) is CholeskySolver's blocked substitution against one product of the same size: 1.33 at n = 4096, 1.10 at
// 8192, 1.08 at 11008, 1.0 at 28672 (gpu_checks.sh trsm), straight lines in log n between, constant outside. With
// I = 30 (the schedule ends most layers after 30-33 iterations), on LLaMA-7B's shapes Cholesky is cheaper for q_proj
// (the first of q/k/v, which would make the shared eigendecomposition: k/v then find none and factor too), o_proj and
// down_proj, not for gate/up (out / n = 2.7 makes the triangular solves cost more than the shared inverse saves); on
// LLaMA-70B's for every linear.
static double triangular_solves_over_product(int64_t n) {
  static constexpr std::array<std::pair<double, double>, 4> kMeasured{
      {{4096, 1.33}, {8192, 1.10}, {11008, 1.08}, {28672, 1.0}}};
  const double x = static_cast<double>(n);
  if (x <= kMeasured.front().first) return kMeasured.front().second;
  for (size_t i = 1; i < kMeasured.size(); ++i) {
    const auto [n1, r1] = kMeasured[i];
    if (x <= n1) {
      const auto [n0, r0] = kMeasured[i - 1];
      return r0 + (r1 - r0) * std::log(x / n0) / std::log(n1 / n0);
    }
  }
  return kMeasured.back().second;
}

bool cholesky_is_cheaper(int64_t in, int64_t out, int64_t users, bool eigh_cached) {
  constexpr double kEigh = 40, kIterations = 30;
  const double rho_changes = kIterations / 3;
  const double n = static_cast<double>(in), m = static_cast<double>(out);
  const double eigh = eigh_cached ? 0.0 : kEigh / static_cast<double>(std::max<int64_t>(1, users));
  const double explicit_cost = eigh * n * n * n + kIterations * 2 * n * n * m + rho_changes * 2 * n * n * n;
  const double cholesky_cost =
      kIterations * 2 * triangular_solves_over_product(in) * n * n * m + rho_changes * n * n * n / 3;
  return cholesky_cost < explicit_cost;
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
    if (increased_) return Action::kStop;  // stable support after rho grew: converged
    rho_ /= o_.shrink;
  }
  rho_ = std::min(rho_, o_.rho_max);
  if (iteration >= o_.late_iteration && s < o_.late_fraction * k) return Action::kStop;
  return action;
}

Alps::Alps(AlpsOptions options) : options_(options) {
  const auto& o = options_;
  ALPS_CHECK(o.damp >= 0 && o.rho0 > 0 && o.rho_max > 0 && o.shrink > 0,
             "alps: damp >= 0, rho0 > 0, rho_max > 0 and shrink > 0 are required, got damp=", o.damp, " rho0=", o.rho0,
             " rho_max=", o.rho_max, " shrink=", o.shrink);
  ALPS_CHECK(o.max_iterations >= 0 && o.check_every >= 1 && o.pcg_iterations >= 0 && o.pcg_tolerance >= 0,
             "alps: max_iterations >= 0, check_every >= 1, pcg_iterations >= 0, pcg_tolerance >= 0 are required");
  ALPS_CHECK(o.b_update == "auto" || o.b_update == "eigenbasis" || o.b_update == "explicit" || o.b_update == "cholesky",
             "alps: b_update must be auto, eigenbasis, explicit or cholesky, got '", o.b_update, "'");
  fp32_products_for(o.products, at::Device(at::kCPU), "alps: products");  // the name's check
}

namespace {

// How B = (Hn + rho I)^-1 R is computed (prune/b_update.h). auto: on the CPU the cheaper of eigenbasis and explicit
// over a check period (explicit forms the inverse once per rho, in^3 flops as a syrk, 2 in^3 as a product, where the
// eigenbasis form pays 2 in^2 out more per iteration); on a GPU cholesky where cholesky_is_cheaper says so (damp > 0
// keeps Hn + rho I positive definite), else the same choice as on the CPU.
detail::BForm b_form(const AlpsOptions& o, const LayerProblem& problem, bool eigh_cached) {
  const int64_t in = problem.cols(), out = problem.rows();
  if (o.b_update == "cholesky" ||
      (o.b_update == "auto" && !problem.W0.device().is_cpu() && o.damp > 0 &&
       cholesky_is_cheaper(in, out, problem.shared ? problem.shared->users : 1, eigh_cached)))
    return detail::BForm::cholesky;
  if (o.b_update == "explicit") return detail::BForm::explicit_inverse;
  if (o.b_update == "eigenbasis") return detail::BForm::eigenbasis;
  const bool syrk = syrk_is_native(problem.W0.device());
  return in < (syrk ? 2 : 1) * o.check_every * out ? detail::BForm::explicit_inverse : detail::BForm::eigenbasis;
}

// The scaled problem (docs/algorithms.md) and, but for cholesky, Hn's eigendecomposition Hn = Q diag(L) Q^T (L as
// [1, in]). Hn, D and the eigendecomposition depend on G, damp and the precision alone: linears that read one input
// (q/k/v, gate/up) share them through problem.shared, and only the first of a group computes them (Cholesky factors
// depend on rho: only Hn and D are shared then, and an entry with the eigendecomposition serves too).
struct Factored {
  detail::ScaledProblem s;
  at::Tensor L, Q;
  const char* eigh;            // where the eigendecomposition came from, for the debug log
  int64_t factorizations = 0;  // 1 where it was computed here
  double seconds = 0;          // of the eigendecomposition (and storing it)
};

Factored factor_scaled(const LayerProblem& problem, const AlpsOptions& o, bool cholesky, const std::string& eigh_key) {
  const std::string key = cholesky ? fmt::format("alps damp={} scaled", o.damp) : eigh_key;
  const std::vector<at::Tensor>* shared = problem.shared ? problem.shared->find(key) : nullptr;
  if (shared == nullptr && cholesky && problem.shared) shared = problem.shared->find(eigh_key);
  Factored f{shared != nullptr ? detail::scale_problem(problem, (*shared)[0], (*shared)[1])
                               : detail::scale_problem(problem, o.damp, /*keep_fp64=*/o.eigh_double && !cholesky),
             {},
             {},
             cholesky            ? "none"
             : shared != nullptr ? "shared"
             : o.eigh_double     ? "fp64"
                                 : "fp32"};
  const auto t0 = std::chrono::steady_clock::now();
  if (!cholesky) {
    if (shared != nullptr) {
      f.L = (*shared)[2];
      f.Q = (*shared)[3];
    } else {
      auto [L, Q] = symmetric_eigh(o.eigh_double ? f.s.Hn64 : f.s.Hn);
      f.s.Hn64.reset();
      f.Q = Q.to(at::kFloat);
      f.L = L.to(at::kFloat).unsqueeze(0);
      f.factorizations = 1;
    }
  }
  if (problem.shared && shared == nullptr)
    problem.shared->store(
        key, cholesky ? std::vector<at::Tensor>{f.s.Hn, f.s.d} : std::vector<at::Tensor>{f.s.Hn, f.s.d, f.L, f.Q});
  f.seconds = seconds_since(t0);
  return f;
}

// The ADMM of paper Algorithm 1 under the rho schedule, from B = B0 (the caller's B), D0 = P(B0), V0 = 0 until the
// support settles or max_iterations pass; B holds the last primal iterate. `kept`: the weights the pattern keeps in the
// whole layer (s_t is compared with it; with a row split, changes are summed over the parts).
struct Admm {
  int64_t iterations = 0;
  double rho = 0;
  double update_seconds = 0, project_seconds = 0;  // for the debug log
};

Admm run_admm(const AlpsOptions& o, const at::Tensor& Y, const at::Tensor& B0, const Pattern& pattern,
              const RowSplit* split, int64_t kept, detail::BUpdate& b_update, at::Tensor& B) {
  auto iterates = detail::make_admm_iterates(Y, B0, pattern, o.fused, split);
  RhoSchedule schedule(o);
  Admm run;
  double rho = schedule.rho();
  int64_t it = 0;
  // The split of the loop's time is for the debug log; on a GPU it needs the queued work done at each mark, which
  // costs a wait per step, so only when that log is on.
  const bool timed = spdlog::should_log(spdlog::level::debug);
  auto mark = [&] {
    if (timed) synchronize(B.device());
    return std::chrono::steady_clock::now();
  };
  for (; it < o.max_iterations; ++it) {
    auto ta = mark();
    // B-update (paper eq. 4): B = (Hn + rho I)^-1 (Y - V + rho D).
    b_update.solve(iterates->rhs(rho), rho, B);
    auto tb = mark();
    run.update_seconds += std::chrono::duration<double>(tb - ta).count();
    iterates->project_and_update_dual(B, rho);  // D = P(B + V / rho), V = V + rho (B - D)
    run.project_seconds += std::chrono::duration<double>(mark() - tb).count();
    if ((it + 1) % o.check_every != 0) continue;
    const int64_t changed = sum_over_parts(split, iterates->support_changes());
    const auto action = schedule.check(it, changed, kept);
    spdlog::trace("alps: iteration {} support change {} / {} rho {} -> {}", it + 1, changed, kept, rho, schedule.rho());
    rho = schedule.rho();
    if (action == RhoSchedule::Action::kStop) {
      ++it;
      break;
    }
    if (action == RhoSchedule::Action::kRestart) iterates->restart();
  }
  run.iterations = it;
  run.rho = rho;
  return run;
}

}  // namespace

Solution Alps::solve(const LayerProblem& problem, const Pattern& pattern) const {
  check_problem(problem, "alps");
  pattern.check_shape(problem.total_rows(), problem.cols());
  // A part of a split layer (row_split.h): its columns of B are iterated here, the layer-wide decisions (the
  // unstructured projection's cut, s_t, PCG's stopping test) are taken on sums over the parts.
  const RowSplit* split = problem.split.get();
  const auto& o = options_;
  Solution sol;
  if (pattern.is_dense()) {
    sol.W = problem.W0.to(at::kFloat).clone();
    return sol;
  }
  const std::string eigh_key = fmt::format("alps damp={} eigh {}", o.damp, o.eigh_double ? "fp64" : "fp32");
  const bool eigh_cached = problem.shared && problem.shared->find(eigh_key) != nullptr;
  const detail::BForm form = b_form(o, problem, eigh_cached);
  const Fp32Products products = fp32_products_for(o.products, problem.W0.device(), "alps: products");

  // Hn = D^-1 H D^-1, B0 = D W0^T, Y = Hn B0, all [in, *] contiguous.
  Factored f = factor_scaled(problem, o, form == detail::BForm::cholesky, eigh_key);
  const at::Tensor &Hn = f.s.Hn, &B0 = f.s.B0, &Y = f.s.Y;
  detail::BUpdate b_update(form, Hn, f.L, f.Q, B0, products, o.damp);
  const auto t0 = std::chrono::steady_clock::now();
  at::Tensor B = B0.clone();
  const int64_t kept =
      problem.total_rows() * problem.cols() - pattern.zeros_total(problem.total_rows(), problem.cols());
  const Admm admm = run_admm(o, Y, B0, pattern, split, kept, b_update, B);
  const double admm_seconds = seconds_since(t0);
  // The support comes from the primal iterate B (reference), then PCG on that support (paper Algorithm 2),
  // warm-started from the projected B.
  at::Tensor keep = detail::project_keep(B, pattern, split).to(at::kFloat).contiguous();
  b_update.release();  // the B-update's operands leave room for PCG's (a split Hn on a GPU)
  auto refit = detail::pcg_masked(Hn, Y, keep, B, o.pcg_iterations, o.pcg_tolerance, o.fused, products, split);
  sol.stats = {
      {"iterations", admm.iterations},        {"rho", admm.rho},
      {"refit_iterations", refit.iterations}, {"factorizations", f.factorizations + b_update.factorizations()},
      {"b_update", b_update.name()},          {"products", products == Fp32Products::kSplitTf32 ? "tf32x3" : "fp32"},
  };
  spdlog::debug(
      "alps: eigh ({}) {:.3f} s; {} ADMM iterations {:.3f} s ({} B-update {:.3f} s, projection and "
      "dual {:.3f} s); final rho {}; PCG {} iterations {:.3f} s",
      f.eigh, f.seconds, admm.iterations, admm_seconds, b_update.name(), admm.update_seconds, admm.project_seconds,
      admm.rho, refit.iterations, seconds_since(t0) - admm_seconds);
  sol.W = f.s.unscaled(refit.B);
  return sol;
}

std::unique_ptr<Method> make_alps_admm(const nlohmann::json& options) {
  return std::make_unique<Alps>(alps_options_from_json(options));
}

}  // namespace alps::prune
