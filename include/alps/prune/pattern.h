#pragma once
// Sparsity patterns (docs/algorithms.md): unstructured (a fraction s of zeros) or N:M (at most N non-zeros in every
// group of M consecutive input columns of a row).
#include <cstdint>
#include <string>
#include <string_view>

#include "alps/core/tensor_fwd.h"

namespace alps::prune {

class Pattern {
 public:
  /// Sparsity s in [0, 1); anything else is an error.
  static Pattern unstructured(double sparsity);
  /// Exactly `zeros` zeros in an [out, in] weight, whatever a method's granularity: per-layer rules zero that many,
  /// per-row rules spread them over the rows (zeros_in_row). A sparsity profile's share of a model-wide count.
  static Pattern unstructured_count(int64_t zeros, int64_t out, int64_t in);
  /// Keep at most n of every m consecutive inputs (NVIDIA's 2:4 keeps 2 of 4); needs 0 <= n <= m, m >= 1.
  static Pattern n_m(int64_t n, int64_t m);
  /// "0.7" -> unstructured 70%, "2:4" -> N:M; anything else is an error naming the text.
  static Pattern parse(std::string_view text);

  bool is_n_m() const { return m_ > 0; }
  /// Target fraction of zeros: s, or 1 - n/m.
  double sparsity() const;
  int64_t n() const { return n_; }
  int64_t m() const { return m_; }
  /// "0.7" style for unstructured (shortest round-trip form), "2:4" for N:M.
  std::string str() const;
  /// True when the pattern prunes nothing (s = 0 or n = m).
  bool is_dense() const;

  /// Throws unless the pattern applies to a [out, in] weight, e.g. "2:4 needs in % 4 == 0, got in = 170".
  void check_shape(int64_t out, int64_t in) const;
  /// Zeros of the whole-layer rule (magnitude, ALPS, SparseGPT): floor(s * out * in), or out * in * (m-n)/m.
  int64_t zeros_total(int64_t out, int64_t in) const;
  /// Zeros per row of the per-row rule (Wanda, DSnoT): floor(s * in), or in * (m-n)/m.
  int64_t zeros_per_row(int64_t in) const;
  /// Zeros of row `row` under the per-row rule: zeros_per_row(in), except for an unstructured_count pattern, whose
  /// rows take floor(s in (row + 1)) - floor(s in row) (floor(s in) or one more), summing to zeros_total.
  int64_t zeros_in_row(int64_t row, int64_t in) const;
  /// True for unstructured_count patterns: rows of one layer may differ by one zero.
  bool spreads_rows() const { return spread_; }

 private:
  Pattern() = default;
  double sparsity_ = 0;
  int64_t n_ = 0;
  int64_t m_ = 0;
  bool spread_ = false;
};

/// N:M: at most n non-zeros in every group. Unstructured: at least out * floor(s * in) zeros, the smallest count
/// any method's granularity produces (per-layer methods zero floor(s * out * in) >= that); unstructured_count: at
/// least its count.
bool satisfies(const at::Tensor& W, const Pattern& pattern);
/// The unstructured part of that rule: the fewest zeros an [out, in] weight may have (0 for N:M).
int64_t least_zeros(const Pattern& pattern, int64_t out, int64_t in);

}  // namespace alps::prune
