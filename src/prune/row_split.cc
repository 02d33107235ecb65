#include "alps/prune/row_split.h"

#include <ATen/ATen.h>

namespace alps::prune {

at::Tensor sum_over_parts(const RowSplit* split, const at::Tensor& t) {
  if (split == nullptr || split->parts == 1) return t;
  at::Tensor s = t.clone();
  split->sum(s);
  return s;
}

int64_t sum_over_parts(const RowSplit* split, int64_t v) {
  if (split == nullptr || split->parts == 1) return v;
  at::Tensor t = at::full({1}, v, at::kLong);
  split->sum(t);
  return t.item<int64_t>();
}

double sum_over_parts(const RowSplit* split, double v) {
  if (split == nullptr || split->parts == 1) return v;
  at::Tensor t = at::full({1}, v, at::kDouble);
  split->sum(t);
  return t.item<double>();
}

}  // namespace alps::prune
