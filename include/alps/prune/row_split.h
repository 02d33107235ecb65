#pragma once
// One part of a linear whose output rows several processes solve at once (docs/distributed.md). A row of W is a
// column of ALPS's B [in, out], and the iterations treat B's columns one by one except where the method looks at the
// whole layer: the top-k of an unstructured projection, the rho schedule's count of support changes, PCG's stopping
// test, the layer's error and sparsity. Those go through `sum`, which adds a tensor over the parts and leaves the
// same bits on every part: every part then takes the same decisions and the same number of iterations.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

namespace alps::prune {

struct RowSplit {
  int part = 0;            ///< this part, 0 .. parts - 1 (the parts hold consecutive rows in part order)
  int parts = 1;
  int64_t total_rows = 0;  ///< the whole weight's rows
  /// Replaces `t` (int64 or fp64, any device) by its sum over the parts, the same bits on every part.
  std::function<void(at::Tensor&)> sum;
};

/// The sum over the parts of `t` (a copy; `t` itself is left as it is); `t` when `split` is null.
at::Tensor sum_over_parts(const RowSplit* split, const at::Tensor& t);
/// The same for a number (as int64 or fp64).
int64_t sum_over_parts(const RowSplit* split, int64_t v);
double sum_over_parts(const RowSplit* split, double v);

}  // namespace alps::prune
