#include "prune/assignment.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "alps/core/error.h"

namespace alps::prune::detail {

std::vector<int64_t> max_weight_assignment(const std::vector<double>& value, int64_t size) {
  ALPS_CHECK(size >= 0 && static_cast<int64_t>(value.size()) == size * size, "assignment: a ", size, " x ", size,
             " matrix expected, got ", value.size(), " entries");
  ALPS_CHECK(std::all_of(value.begin(), value.end(), [](double x) { return std::isfinite(x); }),
             "assignment: the value matrix holds a NaN or an infinity");
  // Minimises the cost -value. Rows join one at a time; for row i a Dijkstra-like search over the columns, with
  // reduced costs cost - u[row] - v[col] >= 0, finds the cheapest augmenting path, and the potentials move by the
  // distances so that every reduced cost stays non-negative. Column 0 is virtual: each search starts there.
  const auto n = static_cast<size_t>(size);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(n + 1, 0), v(n + 1, 0), dist(n + 1);
  std::vector<size_t> row_of(n + 1, 0), way(n + 1, 0);
  std::vector<char> done(n + 1);
  for (size_t i = 1; i <= n; ++i) {
    row_of[0] = i;
    size_t j0 = 0;
    std::fill(dist.begin(), dist.end(), inf);
    std::fill(done.begin(), done.end(), 0);
    do {
      done[j0] = 1;
      const size_t i0 = row_of[j0];
      const double* row = value.data() + (i0 - 1) * n;
      double delta = inf;
      size_t j1 = 0;
      for (size_t j = 1; j <= n; ++j) {
        if (done[j]) continue;
        const double reduced = -row[j - 1] - u[i0] - v[j];
        if (reduced < dist[j]) {
          dist[j] = reduced;
          way[j] = j0;
        }
        if (dist[j] < delta) {
          delta = dist[j];
          j1 = j;
        }
      }
      for (size_t j = 0; j <= n; ++j) {
        if (done[j]) {
          u[row_of[j]] += delta;
          v[j] -= delta;
        } else {
          dist[j] -= delta;
        }
      }
      j0 = j1;
    } while (row_of[j0] != 0);
    do {  // the path's edges flip back to the virtual column
      const size_t j1 = way[j0];
      row_of[j0] = row_of[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  std::vector<int64_t> col(n);
  for (size_t j = 1; j <= n; ++j) col[row_of[j] - 1] = static_cast<int64_t>(j - 1);
  return col;
}

}  // namespace alps::prune::detail
