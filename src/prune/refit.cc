#include "alps/prune/refit.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "alps/core/error.h"
#include "alps/prune/problem.h"
#include "prune/pcg.h"
#include "prune/scaled_problem.h"

namespace alps::prune {

Refine parse_refine(std::string_view name) {
  if (name == "none") return Refine::kNone;
  if (name == "pcg") return Refine::kPcg;
  if (name == "exact") return Refine::kExact;
  ALPS_USAGE_FAIL("unknown refine '", name, "' (expected none, pcg or exact)");
}

std::string_view refine_name(Refine r) {
  switch (r) {
    case Refine::kNone: return "none";
    case Refine::kPcg: return "pcg";
    case Refine::kExact: return "exact";
  }
  return "none";
}

std::vector<std::string> refine_names() {
  std::vector<std::string> names;
  for (Refine r : {Refine::kNone, Refine::kPcg, Refine::kExact}) names.emplace_back(refine_name(r));
  return names;
}

namespace {
using detail::damped_gram;

at::Tensor refit_pcg(const LayerProblem& p, const at::Tensor& W, const PcgOptions& o) {
  const detail::ScaledProblem s = detail::scale_problem(p, o.damp);
  at::Tensor keep = W.ne(0).t().to(at::kFloat).contiguous();                  // [in, out]
  return s.unscaled(detail::pcg_masked(s.Hn, s.Y, keep, s.scaled(W), o.iterations, o.tolerance, /*fused=*/true,
                                       Fp32Products::kNative, p.split.get())
                        .B);
}

// One normal-equation solve per row on its own support S: H[S,S] w_S = (W0 H)[S] (the gradient of
// (w - w0)^T H (w - w0) vanishes on S). Cholesky when H[S,S] is positive definite, else the pseudo-inverse,
// which still gives a minimiser when G is rank deficient (T < in, dead inputs).
at::Tensor refit_exact(const LayerProblem& p, const at::Tensor& W, const PcgOptions& o) {
  at::Tensor H = damped_gram(p, o.damp);                       // [in, in] fp64
  at::Tensor W0H = p.W0.to(at::kDouble).matmul(H);              // [out, in]
  at::Tensor keep = W.ne(0);
  at::Tensor result = at::zeros({W.size(0), W.size(1)}, H.options());
  for (int64_t i = 0; i < W.size(0); ++i) {
    at::Tensor S = keep[i].nonzero().squeeze(1);
    if (S.numel() == 0) continue;
    at::Tensor A = H.index_select(0, S).index_select(1, S);
    at::Tensor b = W0H[i].index_select(0, S).unsqueeze(1);
    auto [L, info] = at::linalg_cholesky_ex(A);
    at::Tensor w;
    if (info.item<int64_t>() == 0) {
      w = at::cholesky_solve(b, L);
    } else {
      auto [ev, Q] = at::linalg_eigh(A);
      const double cutoff = 1e-12 * std::max(ev.max().item<double>(), 0.0);
      at::Tensor inv = at::where(ev > cutoff, 1.0 / ev, at::zeros_like(ev));
      w = Q.matmul(Q.t().matmul(b) * inv.unsqueeze(1));
    }
    result[i].index_put_({S}, w.squeeze(1));
  }
  return result.to(at::kFloat);
}
}  // namespace

at::Tensor refit(const LayerProblem& p, const at::Tensor& W, Refine refine, const PcgOptions& o) {
  check_problem(p, "refit");
  ALPS_CHECK(W.sizes() == p.W0.sizes(), "refit: W must have the problem's weight shape [", p.rows(), ", ", p.cols(),
             "], got [", W.size(0), ", ", W.dim() > 1 ? W.size(1) : 0, "]");
  ALPS_CHECK(o.iterations >= 0 && o.tolerance >= 0 && o.damp >= 0,
             "refit: PCG iterations, tolerance and damp must be >= 0");
  at::Tensor Wd = W.to(p.W0.device());
  switch (refine) {
    case Refine::kNone: return Wd.to(at::kFloat).clone();
    case Refine::kPcg: return refit_pcg(p, Wd, o);
    case Refine::kExact: return refit_exact(p, Wd, o);
  }
  ALPS_FAIL("refit: unknown refine");
}

}  // namespace alps::prune
