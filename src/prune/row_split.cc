#include "alps/prune/row_split.h"

#include <ATen/ATen.h>

namespace alps::prune {

at::Tensor sum_over_parts(const RowSplit* split, const at::Tensor& t) {
  if (split == nullptr || split->parts == 1) return t;
  at::Tensor s = t.clone();
  split->sum(s);
  return s;
}

namespace {
template <typename T>
T sum_number(const RowSplit* split, T v, at::ScalarType dtype) {
  if (split == nullptr || split->parts == 1) return v;
  at::Tensor t = at::full({1}, v, dtype);
  split->sum(t);
  return t.item<T>();
}
}  // namespace

int64_t sum_over_parts(const RowSplit* split, int64_t v) { return sum_number(split, v, at::kLong); }

double sum_over_parts(const RowSplit* split, double v) { return sum_number(split, v, at::kDouble); }

}  // namespace alps::prune
