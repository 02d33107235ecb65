#include "alps/prune/pattern.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "alps/core/error.h"
#include "alps/core/parse.h"

namespace alps::prune {

namespace {
// floor(s * n) robust to s * n landing a hair below an integer in binary (0.29 * 100 = 28.999999999999996).
int64_t floor_fraction(double s, int64_t n) {
  return static_cast<int64_t>(std::floor(s * static_cast<double>(n) + 1e-6));
}
}  // namespace

Pattern Pattern::unstructured(double sparsity) {
  ALPS_USAGE_CHECK(std::isfinite(sparsity) && sparsity >= 0 && sparsity < 1, "sparsity must be in [0, 1), got ",
                   sparsity);
  Pattern p;
  p.sparsity_ = sparsity;
  return p;
}

Pattern Pattern::unstructured_count(int64_t zeros, int64_t out, int64_t in) {
  ALPS_CHECK(out >= 1 && in >= 1 && zeros >= 0 && zeros < out * in, "unstructured_count: ", zeros,
             " zeros in [", out, ", ", in, "]");
  // floor_fraction(s, out in) is `zeros` again: s out in lands within 1e-7 of it for any weight below 2^30 entries.
  Pattern p = unstructured(static_cast<double>(zeros) / static_cast<double>(out * in));
  p.spread_ = true;
  return p;
}

Pattern Pattern::n_m(int64_t n, int64_t m) {
  // 0:M keeps nothing: like sparsity 1, an all-zero layer is not a pruning result.
  ALPS_USAGE_CHECK(m >= 1 && n >= 1 && n <= m, "N:M pattern needs 1 <= N <= M, got ", n, ":", m,
                   n == 0 ? " (0:M would prune every weight)" : "");
  Pattern p;
  p.n_ = n;
  p.m_ = m;
  p.sparsity_ = 1.0 - static_cast<double>(n) / static_cast<double>(m);
  return p;
}

Pattern Pattern::parse(std::string_view text) {
  if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    const auto n = parse_integer(text.substr(0, colon)), m = parse_integer(text.substr(colon + 1));
    ALPS_USAGE_CHECK(n && m, "pattern '", text, "': expected N:M with integers (e.g. 2:4)");
    return n_m(*n, *m);
  }
  const auto value = parse_real(text);
  ALPS_USAGE_CHECK(value, "pattern '", text, "': expected a sparsity in [0, 1) or N:M");
  return unstructured(*value);
}

double Pattern::sparsity() const { return sparsity_; }

bool Pattern::is_dense() const { return is_n_m() ? n_ == m_ : sparsity_ == 0; }

std::string Pattern::str() const {
  if (is_n_m()) return std::to_string(n_) + ":" + std::to_string(m_);
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, sparsity_);
    if (std::stod(buf) == sparsity_) break;
  }
  return buf;
}

void Pattern::check_shape(int64_t out, int64_t in) const {
  ALPS_CHECK(out >= 1 && in >= 1, "pattern ", str(), ": weight must be non-empty, got [", out, ", ", in, "]");
  if (is_n_m()) ALPS_CHECK(in % m_ == 0, str(), " needs in % ", m_, " == 0, got in = ", in);
}

int64_t Pattern::zeros_total(int64_t out, int64_t in) const {
  if (is_n_m()) return out * (in / m_) * (m_ - n_);
  return floor_fraction(sparsity_, out * in);
}

int64_t Pattern::zeros_per_row(int64_t in) const {
  if (is_n_m()) return (in / m_) * (m_ - n_);
  return floor_fraction(sparsity_, in);
}

int64_t Pattern::zeros_in_row(int64_t row, int64_t in) const {
  if (!spread_) return zeros_per_row(in);
  return floor_fraction(sparsity_, in * (row + 1)) - floor_fraction(sparsity_, in * row);
}

bool satisfies(const at::Tensor& W, const Pattern& pattern) {
  if (W.dim() != 2) return false;
  const int64_t out = W.size(0), in = W.size(1);
  if (pattern.is_n_m()) {
    if (in % pattern.m() != 0) return false;
    at::Tensor nonzeros = W.ne(0).reshape({out, in / pattern.m(), pattern.m()}).sum(2);
    return nonzeros.le(pattern.n()).all().item<bool>();
  }
  return W.eq(0).sum().item<int64_t>() >= least_zeros(pattern, out, in);
}

int64_t least_zeros(const Pattern& pattern, int64_t out, int64_t in) {
  if (pattern.is_n_m()) return 0;
  return pattern.spreads_rows() ? pattern.zeros_total(out, in) : out * pattern.zeros_per_row(in);
}

}  // namespace alps::prune
