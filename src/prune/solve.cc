#include "alps/prune/solve.h"

#include <ATen/ATen.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "alps/core/device.h"
#include "alps/core/device_streams.h"
#include "alps/core/error.h"
#include "alps/core/log.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"
#include "alps/prune/row_split.h"

namespace alps::prune {

namespace {
// Waits for queued device work so that wall-clock timings mean something on CUDA too.
double finish_and_time(const at::Tensor& t, std::chrono::steady_clock::time_point start) {
  synchronize(t.device());
  return seconds_since(start);
}

// The method's own solve, timed; W is its output until a refit replaces it.
void solve_timed(const Method& method, const LayerProblem& problem, const Pattern& pattern, LayerResult& r) {
  const auto start = std::chrono::steady_clock::now();
  r.solution = method.solve(problem, pattern);
  r.seconds = finish_and_time(r.solution.W, start);
  r.W = r.solution.W;
}

// The final W against the pattern, its N:M groups formed in the method's input order (alps::Error if violated), and
// its fraction of zeros: the whole layer's when the problem is a part of it (N:M groups lie within a row; the
// unstructured count is the layer's).
void check_and_measure(const Method& method, const LayerProblem& problem, const Pattern& pattern, LayerResult& r) {
  const RowSplit* split = problem.split.get();
  const int64_t in = r.W.size(1), total = problem.total_rows() * in;
  const int64_t zeros = sum_over_parts(split, r.W.eq(0).sum().item<int64_t>());
  const at::Tensor& order = r.solution.input_order;
  const at::Tensor grouped = order.defined() ? r.W.index_select(1, order) : r.W;
  const bool ok = pattern.is_n_m() ? sum_over_parts(split, int64_t{satisfies(grouped, pattern) ? 0 : 1}) == 0
                                   : zeros >= least_zeros(pattern, problem.total_rows(), in);
  ALPS_CHECK(ok, method.name(), " output violates the pattern ", pattern.str());
  r.sparsity = static_cast<double>(zeros) / static_cast<double>(total);
}
}  // namespace

std::string stats_text(const nlohmann::json& stats) {
  std::string text;
  for (const auto& [key, value] : stats.items()) {
    const std::string v = value.is_number_float() ? fmt::format("{:.3g}", value.get<double>()) : value.dump();
    text += (text.empty() ? "" : ", ") + key + " " + v;
  }
  return text;
}

LayerResult solve_layer(const Method& method, const LayerProblem& problem, const Pattern& pattern, Refine refine,
                        const PcgOptions& pcg, const std::string& source) {
  // The O(in^3) gram check runs once here, before the clock starts: every entry point (solve-layer, the pipeline,
  // the benchmark) comes through this function, and a gram that is not a Gram matrix makes every method's output
  // meaningless (ALPS's inverses blow up to huge weights and negative errors).
  const auto t0 = std::chrono::steady_clock::now();
  warm_up(problem.W0.device());
  check_problem(problem, source.empty() ? std::string(method.name()) : source);
  if (!problem.gram_checked) check_gram(problem, source);
  const double check_seconds = finish_and_time(problem.W0, t0);
  ALPS_CHECK(problem.split == nullptr || method.splits_rows(), method.name(),
             " cannot solve a part of a layer's rows (only methods whose rows couple through sums can)");
  LayerResult r;
  solve_timed(method, problem, pattern, r);
  const auto e0 = std::chrono::steady_clock::now();
  r.rel_error = relative_error(problem, r.solution.W);
  spdlog::debug("{}: checks {:.3f} s, solve {:.3f} s, error {:.3f} s", problem.name, check_seconds, r.seconds,
                seconds_since(e0));
  if (refine != Refine::kNone) {
    const auto start = std::chrono::steady_clock::now();
    r.W = refit(problem, r.solution.W, refine, pcg);
    r.refine_seconds = finish_and_time(r.W, start);
    r.rel_error_refined = relative_error(problem, r.W);
  }
  check_and_measure(method, problem, pattern, r);
  return r;
}

LayerResult solve_layer_without_statistics(const Method& method, const LayerProblem& problem, const Pattern& pattern) {
  ALPS_CHECK(!method.needs_statistics(), method.name(), " needs calibration statistics");
  check_weight(problem, std::string(method.name()));
  LayerResult r;
  solve_timed(method, problem, pattern, r);
  check_and_measure(method, problem, pattern, r);
  return r;
}

}  // namespace alps::prune
