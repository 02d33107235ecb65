#include "alps/eval/task_metrics.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "alps/core/error.h"
#include "alps/core/py_random.h"

namespace alps::eval {

double py_mean(const std::vector<double>& xs) {
  ALPS_CHECK(!xs.empty(), "mean of no values");
  double sum = 0;
  for (double x : xs) sum += x;
  return sum / static_cast<double>(xs.size());
}

double sample_stddev(const std::vector<double>& xs) {
  ALPS_CHECK(xs.size() >= 2, "a sample standard deviation needs at least 2 values, got ", xs.size());
  const double mu = py_mean(xs);
  double sum = 0;
  for (double x : xs) sum += (x - mu) * (x - mu);
  return std::sqrt(sum / static_cast<double>(xs.size() - 1));
}

double mean_stderr(const std::vector<double>& xs) {
  return sample_stddev(xs) / std::sqrt(static_cast<double>(xs.size()));
}

double perplexity_of(const std::vector<double>& loglikelihoods) { return std::exp(-py_mean(loglikelihoods)); }

double bootstrap_perplexity_stderr(const std::vector<double>& lls, int64_t iters) {
  ALPS_CHECK(iters >= 1, "bootstrap iterations must be at least 1, got ", iters);
  ALPS_CHECK(!lls.empty(), "bootstrap of no values");
  const int64_t chunk = std::min<int64_t>(1000, iters), chunks = iters / chunk;
  const int64_t n = static_cast<int64_t>(lls.size());
  std::vector<double> res(static_cast<size_t>(chunks * chunk));
  // Chunks are independent (each seeds its own generator), so they run in parallel and fill fixed slots.
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      PyRandom rnd(static_cast<uint64_t>(c));
      for (int64_t j = 0; j < chunk; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < n; ++k)  // random.choices: population[floor(random() * n)]
          sum += lls[static_cast<size_t>(std::floor(rnd.random() * static_cast<double>(n)))];
        res[static_cast<size_t>(c * chunk + j)] = std::exp(-(sum / static_cast<double>(n)));
      }
    }
  });
  return sample_stddev(res);
}

}  // namespace alps::eval
