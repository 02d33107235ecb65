#pragma once
// Small synthetic problems shared by the prune tests.
#include "alps/prune/pattern.h"
#include "alps/prune/synthetic.h"

namespace alps::prune::test {

/// Outlier-feature problem of modest size (the suite must stay fast).
inline SyntheticOptions small_options(uint64_t seed = 0, int64_t out = 96, int64_t in = 128, int64_t tokens = 1024) {
  SyntheticOptions o;
  o.out = out;
  o.in = in;
  o.tokens = tokens;
  o.seed = seed;
  return o;
}

inline std::vector<Pattern> all_patterns() {
  return {Pattern::unstructured(0.5), Pattern::unstructured(0.7), Pattern::unstructured(0.9), Pattern::n_m(2, 4),
          Pattern::n_m(4, 8)};
}

}  // namespace alps::prune::test
