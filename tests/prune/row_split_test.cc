// A layer's rows solved in parts that add their sums (alps/prune/row_split.h): the parts run as threads here, summing
// through shared memory in part order, so the test sees the arithmetic of a split and not a transport's.
#include "alps/prune/row_split.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/prune/methods/alps_admm.h"
#include "alps/prune/problem.h"
#include "alps/prune/solve.h"
#include "prune/mask.h"
#include "fixtures.h"

namespace alps::prune {
namespace {

// The parts' sums: every part deposits its tensor; the last to come adds them in part order; all read the total.
class ThreadedParts {
 public:
  explicit ThreadedParts(int parts) : parts_(parts), slots_(static_cast<size_t>(parts)) {}

  std::shared_ptr<const RowSplit> split(int part, int64_t total_rows) {
    auto s = std::make_shared<RowSplit>();
    s->part = part;
    s->parts = parts_;
    s->total_rows = total_rows;
    s->sum = [this, part](at::Tensor& t) { sum(part, t); };
    return s;
  }
  int64_t calls() const { return rounds_; }

 private:
  void sum(int part, at::Tensor& t) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return leaving_ == 0; });  // the previous round read by every part
    slots_[static_cast<size_t>(part)] = t.clone();
    if (++arrived_ == parts_) {
      total_ = slots_[0].clone();
      for (size_t i = 1; i < slots_.size(); ++i) total_ += slots_[i];
      arrived_ = 0;
      leaving_ = parts_;
      ++rounds_;
      cv_.notify_all();
    } else {
      const int64_t round = rounds_;
      cv_.wait(lock, [&] { return rounds_ != round; });
    }
    t.copy_(total_);
    if (--leaving_ == 0) cv_.notify_all();
  }

  int parts_;
  std::vector<at::Tensor> slots_;
  at::Tensor total_;
  int arrived_ = 0, leaving_ = 0;
  int64_t rounds_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
};

// Rows [first, first + n) of part `part` of `parts`: the larger parts first, as the pipeline splits them.
std::pair<int64_t, int64_t> rows_of(int64_t rows, int part, int parts) {
  const int64_t base = rows / parts, extra = rows % parts;
  const int64_t first = part * base + std::min<int64_t>(part, extra);
  return {first, base + (part < extra ? 1 : 0)};
}

// f(part) on one thread per part, all at once.
template <typename F>
void on_parts(int parts, F&& f) {
  std::vector<std::thread> threads;
  for (int p = 0; p < parts; ++p) threads.emplace_back([&f, p] { f(p); });
  for (auto& t : threads) t.join();
}

// The parts' selection is the whole score's: the same set where the scores are distinct, and with ties exactly
// `zeros` pruned, none kept below a pruned one, the ties pruned in part order (the whole's memory order for parts
// that are consecutive slices).
TEST(RowSplit, SelectionAcrossPartsIsTheWholeSelection) {
  at::manual_seed(3);
  for (const at::Tensor& score : {at::randn({5000}).abs(), at::randint(0, 6, {4099}).to(at::kFloat),
                                  1.0f + at::rand({3001}) * 1e-4f}) {
    const int64_t numel = score.numel();
    for (int parts : {1, 2, 3}) {
      for (int64_t zeros : {int64_t{0}, int64_t{1}, numel / 3, numel * 7 / 10, numel - 1}) {
        SCOPED_TRACE(testing::Message() << "numel " << numel << " parts " << parts << " zeros " << zeros);
        ThreadedParts tp(parts);
        std::vector<at::Tensor> keep(static_cast<size_t>(parts));
        on_parts(parts, [&](int p) {
          const auto [first, n] = rows_of(numel, p, parts);
          keep[static_cast<size_t>(p)] =
              detail::keep_largest_parts(score.slice(0, first, first + n), zeros, *tp.split(p, numel));
        });
        const at::Tensor joined = at::cat(keep);
        // Reference: a stable ascending sort; the first `zeros` positions are pruned.
        const at::Tensor order = std::get<1>(score.sort(/*stable=*/true, 0, /*descending=*/false));
        at::Tensor expected = at::ones({numel}, at::kBool);
        expected.index_fill_(0, order.slice(0, 0, zeros), false);
        EXPECT_TRUE(joined.equal(expected));
      }
    }
  }
}

// ALPS on parts of 2 and 3: every part takes the same decisions (the same iterations, rho and refit iterations), the
// same number of zeros as the whole solve (the cut is an exact selection over integer histograms), and rows equal
// to the whole solve's to rounding. Bit for bit they are not: a part's products have fewer columns than the whole's,
// and the stopping tests add the parts' sums in another order. How far rounding alone moves ALPS is measured beside
// it: the whole solve by the fused CPU kernels against the ATen iterates (the same arithmetic in another order;
// measured here 4e-8 to 1e-7 of the error and 2e-6 to 4e-6 of max |W|, or 9e-4 where the support path forks). The
// parts must land within three times that spread, or within 1e-6 of the error and 2e-5 of max |W| (measured:
// 3e-8 to 1e-7 and 1.5e-6 to 4e-6).
TEST(RowSplit, AlpsPartsSolveTheWholeLayer) {
  const LayerProblem whole = make_synthetic_problem(test::small_options(5, 96, 128, 1000));
  for (const Pattern& pattern : {Pattern::unstructured(0.7), Pattern::n_m(2, 4)}) {
    for (const std::string& update : {"eigenbasis", "explicit"}) {
      // fused = false: the ATen iterates, which the parts of an unstructured layer run.
      const auto method = make_alps_admm({{"fused", false}, {"b_update", update}});
      const LayerResult w = solve_layer(*method, whole, pattern, Refine::kNone);
      const LayerResult f = solve_layer(*make_alps_admm({{"fused", true}, {"b_update", update}}), whole, pattern,
                                        Refine::kNone);
      const double max_w = w.W.abs().max().item<double>();
      const double error_spread = std::abs(*f.rel_error - *w.rel_error) / *w.rel_error;
      const double w_spread = (f.W - w.W).abs().max().item<double>() / max_w;
      for (int parts : {2, 3}) {
        SCOPED_TRACE(testing::Message() << pattern.str() << " " << update << " parts " << parts);
        ThreadedParts tp(parts);
        std::vector<LayerResult> r(static_cast<size_t>(parts));
        on_parts(parts, [&](int p) {
          const auto [first, n] = rows_of(whole.rows(), p, parts);
          LayerProblem part = whole;
          part.W0 = whole.W0.slice(0, first, first + n);
          part.split = tp.split(p, whole.rows());
          r[static_cast<size_t>(p)] = solve_layer(*method, part, pattern, Refine::kNone);
        });
        std::vector<at::Tensor> rows;
        for (const auto& part : r) {
          EXPECT_EQ(part.solution.stats, r[0].solution.stats) << "the parts took different decisions";
          EXPECT_EQ(part.rel_error, r[0].rel_error);
          EXPECT_EQ(part.sparsity, w.sparsity);
          rows.push_back(part.W);
        }
        EXPECT_LE(std::abs(*r[0].rel_error - *w.rel_error), std::max(1e-6, 3 * error_spread) * *w.rel_error);
        EXPECT_LE((at::cat(rows) - w.W).abs().max().item<double>(), std::max(2e-5, 3 * w_spread) * max_w);
      }
    }
  }
}

// A method whose rows couple in ways the parts cannot sum refuses a part.
TEST(RowSplit, MethodsThatCannotSplitRefuseAPart) {
  const LayerProblem whole = make_synthetic_problem(test::small_options(1, 32, 64, 256));
  LayerProblem part = whole;
  part.W0 = whole.W0.slice(0, 0, 16);
  ThreadedParts tp(1);
  part.split = tp.split(0, 32);
  EXPECT_THROW(solve_layer(*make_method("sparsegpt", nlohmann::json::object()), part, Pattern::unstructured(0.5),
                           Refine::kNone),
               Error);
}

}  // namespace
}  // namespace alps::prune
