#include "alps/prune/synthetic.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "alps/core/error.h"

namespace alps::prune {

namespace {
struct Generated {
  at::Tensor X;         // [T, in]
  at::Tensor outliers;  // [n_outliers] int64
  at::Tensor W0;        // [out, in]
};

Generated generate(const SyntheticOptions& o) {
  ALPS_CHECK(o.out >= 1 && o.in >= 1 && o.tokens >= 1 && o.factors >= 1,
             "synthetic problem: out, in, tokens and factors must be >= 1, got out=", o.out, " in=", o.in,
             " tokens=", o.tokens, " factors=", o.factors);
  ALPS_CHECK(o.correlation >= 0 && o.correlation <= 1, "synthetic problem: correlation must be in [0, 1], got ",
             o.correlation);
  ALPS_CHECK(o.outlier_fraction >= 0 && o.outlier_fraction <= 1 && o.outlier_scale > 0,
             "synthetic problem: outlier_fraction must be in [0, 1] and outlier_scale > 0");
  ALPS_CHECK(o.weight_dof >= 1, "synthetic problem: weight_dof must be >= 1, got ", o.weight_dof);
  at::Generator gen = at::detail::createCPUGenerator(o.seed);
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  // Shared low-rank factors make the features correlated, as in real hidden states.
  at::Tensor Z = at::randn({o.tokens, o.factors}, gen, f32);
  at::Tensor C = at::randn({o.factors, o.in}, gen, f32) / std::sqrt(static_cast<double>(o.factors));
  at::Tensor E = at::randn({o.tokens, o.in}, gen, f32);
  at::Tensor mu = at::randn({o.in}, gen, f32) * o.mean_scale;
  Generated g;
  g.X = Z.matmul(C) * std::sqrt(o.correlation) + E * std::sqrt(1 - o.correlation) + mu;
  int64_t n_outliers = 0;
  if (o.outlier_fraction > 0)
    n_outliers = std::max<int64_t>(1, std::llround(o.outlier_fraction * static_cast<double>(o.in)));
  at::Tensor perm = at::randperm(o.in, gen, at::TensorOptions().dtype(at::kLong));
  g.outliers = std::get<0>(perm.narrow(0, 0, n_outliers).sort());
  at::Tensor scale = at::ones({o.in}, f32);
  if (n_outliers > 0) scale.index_fill_(0, g.outliers, o.outlier_scale);
  g.X.mul_(scale);
  // Student-t weights (heavy tails): normal / sqrt(chi^2_nu / nu), nu = round(weight_dof).
  const int64_t nu = std::llround(o.weight_dof);
  at::Tensor chi2 = at::randn({nu, o.out, o.in}, gen, f32).pow(2).sum(0);
  g.W0 = at::randn({o.out, o.in}, gen, f32) / (chi2 / static_cast<double>(nu)).sqrt() /
         std::sqrt(static_cast<double>(o.in));
  return g;
}
}  // namespace

at::Tensor make_synthetic_inputs(const SyntheticOptions& o) { return generate(o).X; }


LayerProblem make_synthetic_problem(const SyntheticOptions& o) {
  Generated g = generate(o);
  LayerProblem p;
  p.W0 = g.W0;
  at::Tensor X = g.X.to(at::kDouble);
  p.G = X.t().matmul(X).to(at::kFloat);
  p.mean = X.mean(0).to(at::kFloat);
  p.tokens = o.tokens;
  p.name = "synthetic";
  return p;
}

}  // namespace alps::prune
