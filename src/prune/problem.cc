#include "alps/prune/problem.h"
#include "alps/prune/row_split.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "alps/core/error.h"
#include "alps/core/parse.h"
#include "alps/io/safetensors.h"

namespace alps::prune {

namespace {
std::string shape_str(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

bool all_finite(const at::Tensor& t) { return at::isfinite(t).all().item<bool>(); }

// gamma_k = k u / (1 - k u): the relative error bound of a k-term dot product in unit roundoff u, whatever the
// summation order (pairwise, blocked GEMM, syrk). Infinite where k u >= 1/2, i.e. where no bound follows.
double gamma(double k, double u) { return k * u < 0.5 ? k * u / (1 - k * u) : INFINITY; }

double unit_roundoff(c10::ScalarType t) {
  return t == at::kDouble ? std::ldexp(1.0, -53) : t == at::kHalf ? std::ldexp(1.0, -11)
                          : t == at::kBFloat16            ? std::ldexp(1.0, -8)
                                                          : std::ldexp(1.0, -24);
}

std::string label(const LayerProblem& p, const std::string& what) {
  std::string s = p.name.empty() ? std::string("the layer problem") : p.name;
  if (!what.empty() && what != p.name) s += " (" + what + ")";
  return s;
}

std::string dtype_str(c10::ScalarType t) {
  return t == at::kDouble ? "fp64" : t == at::kFloat ? "fp32" : c10::toString(t);
}
}  // namespace

double gram_rounding_gamma(const LayerProblem& p) {
  // G_ij = sum_t x_ti x_tj over T tokens, each entry one T-term dot product, then stored in G's dtype (one more
  // rounding): |fl(G)_ij - G_ij| <= gamma_{T+1} sum_t |x_ti| |x_tj| <= gamma_{T+1} sqrt(G_ii G_jj) (Cauchy-Schwarz).
  // tokens = 0 (unknown) is taken as a single product.
  return gamma(static_cast<double>(std::max<int64_t>(p.tokens, 1) + 1), unit_roundoff(p.G.scalar_type()));
}

void check_weight(const LayerProblem& p, const std::string& what) {
  ALPS_CHECK(p.W0.defined() && p.W0.dim() == 2 && p.W0.size(0) > 0 && p.W0.size(1) > 0, what,
             ": weight must be a non-empty [out, in] matrix, got ", p.W0.defined() ? shape_str(p.W0) : "none");
  ALPS_CHECK(at::isFloatingType(p.W0.scalar_type()), what, ": weight must be floating point");
  ALPS_CHECK(all_finite(p.W0), what, ": weight contains NaN or Inf");
}

void check_problem(const LayerProblem& p, const std::string& what) {
  check_weight(p, what);
  const int64_t in = p.W0.size(1);
  ALPS_CHECK(p.G.defined() && p.G.dim() == 2 && p.G.size(0) == in && p.G.size(1) == in, what, ": gram must be [",
             in, ", ", in, "] for weight ", shape_str(p.W0), ", got ", p.G.defined() ? shape_str(p.G) : "none");
  ALPS_CHECK(at::isFloatingType(p.W0.scalar_type()) && at::isFloatingType(p.G.scalar_type()), what,
             ": weight and gram must be floating point");
  ALPS_CHECK(p.W0.device() == p.G.device(), what, ": weight on ", p.W0.device(), " but gram on ", p.G.device());
  ALPS_CHECK(all_finite(p.W0), what, ": weight contains NaN or Inf");
  ALPS_CHECK(all_finite(p.G), what, ": gram contains NaN or Inf");
  ALPS_CHECK(p.G.diagonal().min().item<double>() >= 0, what, ": gram has a negative diagonal entry (not X^T X)");
  ALPS_CHECK(p.tokens >= 0, what, ": tokens must be >= 0, got ", p.tokens);
  ALPS_CHECK(p.sequences >= 0 && p.sequences <= std::max<int64_t>(p.tokens, 1), what, ": ", p.sequences,
             " sequences for ", p.tokens, " tokens");
  if (p.mean.defined()) {
    ALPS_CHECK(p.mean.dim() == 1 && p.mean.size(0) == in, what, ": mean must be [", in, "], got ", shape_str(p.mean));
    ALPS_CHECK(all_finite(p.mean), what, ": mean contains NaN or Inf");
  }
  if (p.sequence_mean_sq.defined()) {
    ALPS_CHECK(p.sequence_mean_sq.dim() == 1 && p.sequence_mean_sq.size(0) == in, what, ": sequence_mean_sq must be [",
               in, "], got ", shape_str(p.sequence_mean_sq));
    ALPS_CHECK(all_finite(p.sequence_mean_sq) && p.sequence_mean_sq.min().item<double>() >= 0, what,
               ": sequence_mean_sq must be finite and >= 0 (a mean of squares)");
  }
}

void check_gram(const LayerProblem& p, const std::string& what) {
  const std::string prefix = "gram of " + label(p, what);
  ALPS_CHECK(all_finite(p.G), prefix, " contains NaN or Inf");
  const double g = gram_rounding_gamma(p);
  if (!std::isfinite(g)) return;  // so many tokens that rounding alone could explain anything
  const int64_t n = p.G.size(0);
  at::Tensor diag = p.G.diagonal().to(at::kDouble);
  ALPS_CHECK(diag.min().item<double>() >= 0, prefix, " has a negative diagonal entry (not a sum of x x^T)");
  // Symmetry: G_ij and G_ji both lie within g d_i d_j (d = sqrt(diag G)) of the same exact value; the diagonal
  // behind d is itself rounded (relative error g), hence the (1 + g). Row blocks keep the temporaries small.
  const at::Tensor d = diag.sqrt();
  const double allowed = 2 * g * (1 + g);
  const int64_t block = std::max<int64_t>(1, (int64_t{1} << 22) / n);
  for (int64_t r0 = 0; r0 < n; r0 += block) {
    const int64_t len = std::min(block, n - r0);
    at::Tensor excess = (p.G.narrow(0, r0, len).to(at::kDouble) - p.G.narrow(1, r0, len).t().to(at::kDouble)).abs() -
                        allowed * at::outer(d.narrow(0, r0, len), d);
    if (excess.max().item<double>() <= 0) continue;
    const int64_t k = excess.argmax().item<int64_t>(), i = r0 + k / n, j = k % n;
    ALPS_FAIL(prefix, " is not symmetric: G[", i, ", ", j, "] = ", p.G[i][j].item<double>(), " but G[", j, ", ", i,
              "] = ", p.G[j][i].item<double>(), ", beyond the rounding of ", p.tokens, " ",
              dtype_str(p.G.scalar_type()), " products");
  }
  // Positive semi-definiteness: the rounding error E = fl(G) - G has |E_ij| <= g d_i d_j, so
  // ||E||_2 <= g ||d d^T||_2 = g tr(G), and every eigenvalue of a rounded Gram matrix is >= -g tr(G). An fp64
  // Cholesky of A succeeds when lambda_min(A) exceeds its own backward error, at most gamma_{n+1}(2^-53) tr(A).
  // tau = 2 (g + gamma_{n+1}(2^-53)) tr(G) covers both with a margin, so the factorization of G + tau I fails only
  // for a G that no rounding of a true Gram matrix explains. Cholesky reads the lower triangle only.
  const double trace = diag.sum().item<double>();
  const double tau = 2 * (g + gamma(static_cast<double>(n + 1), std::ldexp(1.0, -53))) * trace;
  at::Tensor shifted = p.G.to(at::kDouble, /*non_blocking=*/false, /*copy=*/true);
  shifted.diagonal().add_(tau);
  const bool factored = std::get<1>(at::linalg_cholesky_ex(shifted)).item<int64_t>() == 0;
  if (!factored) {
    shifted.diagonal().sub_(tau);
    at::Tensor eig = at::linalg_eigvalsh((shifted + shifted.t()) * 0.5);
    ALPS_FAIL(prefix, " is not positive semi-definite: smallest eigenvalue ", eig.min().item<double>(), " vs largest ",
              eig.max().item<double>(), " (rounding of ", p.tokens, " ", dtype_str(p.G.scalar_type()),
              " products explains down to -", g * trace, ")");
  }
}

int64_t LayerProblem::total_rows() const { return split ? split->total_rows : rows(); }

double relative_error(const LayerProblem& p, const at::Tensor& W) {
  ALPS_CHECK(W.sizes() == p.W0.sizes(), "relative_error: W is ", shape_str(W), " but the problem's weight is ",
             shape_str(p.W0));
  at::Tensor W0 = p.W0.to(at::kDouble);
  at::Tensor G = p.G.to(at::kDouble);
  at::Tensor delta = W.to(W0.device(), at::kDouble) - W0;  // [out, in]
  // Both traces, and the terms of the rounding bound below, are sums over rows: a split problem adds its parts'.
  // (Every part sees the same sums, so all take the same branch below and make the same calls.)
  const at::Tensor traces =
      sum_over_parts(p.split.get(), at::stack({(delta.matmul(G) * delta).sum(), (W0.matmul(G) * W0).sum()}).cpu());
  double num = traces[0].item<double>();
  const double den = traces[1].item<double>();
  const std::string prefix = "relative error of " + label(p, "");
  ALPS_CHECK(std::isfinite(num) && std::isfinite(den), prefix, " is not finite: tr(dW G dW^T) = ", num,
             ", tr(W0 G W0^T) = ", den, " (non-finite or overflowing weights)");
  ALPS_CHECK(den > 0, prefix, ": tr(W0 G W0^T) = ", den, " (zero weights or zero gram), the error is undefined");
  if (num < 0) {
    // A negative numerator is rounding only within this bound: G is a rounded Gram matrix with eigenvalues
    // >= -g tr(G) (check_gram), so the exact tr(dW G dW^T) >= -g tr(G) ||dW||_F^2; its fp64 evaluation, a sum of
    // out * in products of in-term dot products, adds at most gamma_{out*in+in+1}(2^-53) sum |dW| |G| |dW|.
    const double g = gram_rounding_gamma(p);
    const double numel = static_cast<double>(p.total_rows()) * static_cast<double>(delta.size(1));
    const at::Tensor terms = sum_over_parts(
        p.split.get(),
        at::stack({delta.pow(2).sum(), (delta.abs().matmul(G.abs()) * delta.abs()).sum()}).cpu());
    const double slack = g * G.diagonal().sum().item<double>() * terms[0].item<double>() +
                         gamma(numel + static_cast<double>(delta.size(1)) + 1, std::ldexp(1.0, -53)) *
                             terms[1].item<double>();
    ALPS_CHECK(-num <= slack, prefix, " is negative (", num / den, "): tr(dW G dW^T) = ", num,
               " is below the rounding bound -", slack, "; the gram is not positive semi-definite");
    num = 0;
  }
  const double err = num / den;
  ALPS_CHECK(std::isfinite(err), prefix, " is not finite (", num, " / ", den, ")");
  return err;
}

LayerProblem load_problem(const std::filesystem::path& path) {
  io::SafetensorsFile file(path);
  auto floating = [&](const std::string& name) {
    at::Tensor t = file.tensor(name);
    ALPS_CHECK(at::isFloatingType(t.scalar_type()), "tensor '", name, "' in ", path.string(),
               ": expected a floating dtype, got ", t.scalar_type());
    return t;
  };
  ALPS_CHECK(file.contains("weight") && file.contains("gram"), path.string(),
             ": a layer problem needs tensors 'weight' [out, in] and 'gram' [in, in]");
  LayerProblem p;
  p.W0 = floating("weight").to(at::kFloat).clone();
  at::Tensor G = floating("gram");
  p.G = (G.scalar_type() == at::kDouble ? G : G.to(at::kFloat)).clone();
  if (file.contains("mean")) p.mean = floating("mean").to(at::kFloat).clone();
  if (file.contains("sequence_mean_sq")) p.sequence_mean_sq = floating("sequence_mean_sq").to(at::kDouble).clone();
  const auto& meta = file.metadata();
  auto count = [&](const std::string& key) {
    const std::string& text = meta.at(key);
    const auto value = parse_integer(text);
    ALPS_CHECK(value && *value >= 0, path.string(), ": metadata '", key, "' must be a non-negative integer, got '",
               text, "'");
    return *value;
  };
  ALPS_CHECK(meta.count("tokens") > 0, path.string(), ": metadata 'tokens' (the T behind gram) is missing");
  p.tokens = count("tokens");
  if (meta.count("sequences") > 0) p.sequences = count("sequences");
  if (const auto name = meta.find("name"); name != meta.end()) p.name = name->second;
  check_problem(p, path.string());
  return p;
}

void save_problem(const std::filesystem::path& path, const LayerProblem& p, io::ExistingFile existing) {
  check_problem(p, "save_problem " + path.string());
  std::vector<std::pair<std::string, at::Tensor>> tensors = {{"weight", p.W0.cpu().contiguous()},
                                                             {"gram", p.G.cpu().contiguous()}};
  if (p.mean.defined()) tensors.emplace_back("mean", p.mean.cpu().contiguous());
  if (p.sequence_mean_sq.defined()) tensors.emplace_back("sequence_mean_sq", p.sequence_mean_sq.cpu().contiguous());
  std::map<std::string, std::string> meta = {{"tokens", std::to_string(p.tokens)}};
  if (p.sequences > 0) meta["sequences"] = std::to_string(p.sequences);
  if (!p.name.empty()) meta["name"] = p.name;
  io::save_safetensors(path, tensors, meta, existing);
}

}  // namespace alps::prune
