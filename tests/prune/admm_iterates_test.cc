// The fused CPU ADMM iterates and PCG (src/prune/admm_iterates.h, pcg.h) against the ATen implementations that
// write the ADMM updates of docs/algorithms.md term by term: both are driven with the same B-updates, so any slip in
// the compact (Z, keep, rho_v) form of D and V shows up as a different right-hand side, support or change count.
#include "prune/admm_iterates.h"
#include "prune/pcg.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "alps/prune/pattern.h"

namespace alps::prune::detail {
namespace {

// The two forms reach R = Y - V + rho D through different sequences of fp32 operations: per ADMM step at most four
// roundings (the Z, D and dual updates, the right-hand side), each relative to the largest term (at least the
// O(1) entries of Y and B). After `steps` steps they differ by at most twice gamma_{4 steps} of that scale.
void expect_close(const at::Tensor& a, const at::Tensor& b, int steps) {
  const double scale = 1.0 + b.abs().max().item<double>();
  EXPECT_LE((a - b).abs().max().item<double>(), 2 * 4.0 * steps * std::ldexp(1.0, -24) * scale);
}

TEST(AdmmIterates, FusedCpuMatchesTheSpecForm) {
  at::manual_seed(0);
  const int64_t in = 96, out = 40;
  at::Tensor B0 = at::randn({in, out});
  at::Tensor Y = at::randn({in, out});
  for (const auto& pattern : {Pattern::unstructured(0.7), Pattern::unstructured(0.5), Pattern::n_m(2, 4),
                              Pattern::n_m(3, 8)}) {
    SCOPED_TRACE(pattern.str());
    auto spec = make_admm_iterates(Y, B0, pattern, /*fused=*/false);
    auto fused = make_admm_iterates(Y, B0, pattern, /*fused=*/true);
    // A rho schedule with growth, a shrink and a restart, and B-updates that drift away from B0.
    const double rhos[] = {0.1, 0.1, 0.13, 0.13, 0.156, 0.0312, 0.0312, 0.5, 0.55};
    for (int step = 0; step < 9; ++step) {
      SCOPED_TRACE(step);
      const double rho = rhos[step];
      const at::Tensor R_spec = spec->rhs(rho).clone();
      expect_close(fused->rhs(rho), R_spec, step + 1);
      // Stand-in for (Hn + rho I)^-1 R: anything that depends on R and moves the support.
      at::Tensor B = 0.5 * R_spec / (1.0 + rho) + 0.3 * at::randn({in, out});
      spec->project_and_update_dual(B, rho);
      fused->project_and_update_dual(B, rho);
      if (step % 2 == 1) {
        const int64_t changed = spec->support_changes();
        EXPECT_EQ(fused->support_changes(), changed);
        EXPECT_GT(changed, 0);
      }
      if (step == 5) {
        spec->restart();
        fused->restart();
      }
    }
    expect_close(fused->rhs(0.6), spec->rhs(0.6), 10);
  }
}

// Ties at the cut (a constant block): both forms prune the first tied entries in memory order.
TEST(AdmmIterates, TiesAtTheCutFollowMemoryOrder) {
  at::Tensor B0 = at::ones({16, 8});
  B0.slice(0, 0, 4).fill_(3.0);  // 32 large entries, 96 tied ones
  at::Tensor Y = at::zeros({16, 8});
  const Pattern pattern = Pattern::unstructured(0.5);  // 64 zeros: 64 of the tied ones
  auto spec = make_admm_iterates(Y, B0, pattern, false);
  auto fused = make_admm_iterates(Y, B0, pattern, true);
  spec->project_and_update_dual(B0, 1.0);
  fused->project_and_update_dual(B0, 1.0);
  EXPECT_TRUE(fused->rhs(1.0).equal(spec->rhs(1.0)));
  // D = B0 on the kept entries (rows 0-3 and the last 32 tied entries, rows 12-15), V = B0 - D: R = 2 D - B0.
  at::Tensor expected = at::zeros({16, 8});
  expected.slice(0, 0, 4).fill_(3.0);
  expected.slice(0, 12, 16).fill_(1.0);
  EXPECT_TRUE(spec->rhs(1.0).equal(expected * 2.0 - B0)) << spec->rhs(1.0);
}

TEST(Pcg, FusedCpuMatchesAten) {
  at::manual_seed(3);
  const int64_t in = 80, out = 33;
  at::Tensor X = at::randn({200, in});
  at::Tensor G = X.t().mm(X) / 200;
  at::Tensor d = G.diagonal().sqrt();
  at::Tensor Hn = G / d.unsqueeze(1) / d.unsqueeze(0);
  at::Tensor Y = Hn.mm(at::randn({in, out}));
  at::Tensor keep = at::rand({in, out}).gt(0.6).to(at::kFloat);
  keep.select(1, 5).zero_();  // an empty column: converged from the start
  at::Tensor start = at::randn({in, out}) * keep;
  const at::Tensor eig = at::linalg_eigvalsh(Hn.to(at::kDouble));
  const double kappa = (eig.max() / eig.min()).item<double>();
  for (int64_t iterations : {1, 4, 12}) {
    auto aten = pcg_masked(Hn, Y, keep, start, iterations, 0.0, /*fused=*/false);
    auto fused = pcg_masked(Hn, Y, keep, start, iterations, 0.0, /*fused=*/true);
    EXPECT_EQ(fused.iterations, aten.iterations);
    // Two fp32 orders of the same CG steps: each step's matrix products and dot products are in-term sums
    // (relative gamma_in), and a step passes its predecessors' errors on amplified by at most the condition number
    // of Hn, so after k steps they differ by at most twice gamma_{k in} kappa of the iterates' scale.
    const double scale = 1.0 + aten.B.abs().max().item<double>();
    EXPECT_LE((fused.B - aten.B).abs().max().item<double>(),
              2 * static_cast<double>(iterations * in) * std::ldexp(1.0, -24) * kappa * scale);
    EXPECT_TRUE((fused.B * (1 - keep)).eq(0).all().item<bool>());
    EXPECT_TRUE(fused.B.isfinite().all().item<bool>());
  }
}

}  // namespace
}  // namespace alps::prune::detail
