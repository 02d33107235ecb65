// alps's zero-shot scoring against the real lm-evaluation-harness 0.4.9 (Hugging Face backend) on stories260K and
// on the first 20 documents of every task with SmolLM2-135M-Instruct (skipped, saying how to get it, where
// scripts/get_smollm2.sh has not run): golden files written by scripts/make_zeroshot_golden.py. Per request (first
// documents of every task): the same token split and is-greedy, and the log-likelihood within fp32 rounding (see
// scoring_tolerance.h). Per task: the same per-document predictions and so identical accuracies and standard errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "alps/core/py_text.h"
#include "alps/eval/loglikelihood.h"
#include "alps/eval/task.h"
#include "alps/eval/zeroshot.h"
#include "alps/io/text_files.h"
#include "alps/model/causal_lm.h"
#include "alps/tokenizer/tokenizer.h"
#include "scoring_tolerance.h"
#include "support.h"

namespace alps::eval {
namespace {

namespace fs = std::filesystem;

// A golden set: the model's name (its directory under tests/data/eval) and where the model is.
struct GoldenModel {
  std::string name;
  fs::path (*dir)();
};
const GoldenModel kStories{"stories260K", [] { return test::committed_data_dir() / "models" / "stories260K-hf"; }};
const GoldenModel kSmolLM2{"SmolLM2-135M-Instruct", [] { return test::smollm2_dir(); }};

nlohmann::json golden(const GoldenModel& m, const std::string& task) {
  const fs::path p = test::source_dir() / "tests" / "data" / "eval" / m.name / (task + ".json");
  EXPECT_TRUE(fs::is_regular_file(p)) << p;
  return nlohmann::json::parse(io::read_text_file(p));
}

// The golden's document numbers skip its skipped_rows; this maps them back to rows of the task file.
std::vector<int64_t> golden_rows(const nlohmann::json& g, int64_t total_rows) {
  std::set<int64_t> skipped;
  if (g.contains("skipped_rows")) skipped = g["skipped_rows"].get<std::set<int64_t>>();
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < total_rows; ++r)
    if (!skipped.count(r)) rows.push_back(r);
  return rows;
}

class ZeroShotGolden : public ::testing::TestWithParam<std::tuple<const GoldenModel*, std::string>> {
 protected:
  void SetUp() override {
    const GoldenModel& m = *std::get<0>(GetParam());
    if (m.name == kSmolLM2.name) ALPS_REQUIRE_SMOLLM2();
    // One model at a time stays loaded: the parameters run grouped by model.
    if (loaded_ != m.name) {
      model_ = std::make_unique<model::CausalLM>(model::CausalLM::load(m.dir()));
      tok_ = tokenizer::load_tokenizer(m.dir());
      loaded_ = m.name;
    }
  }
  static void TearDownTestSuite() {
    model_.reset();
    tok_.reset();
    loaded_.clear();
  }
  const GoldenModel& golden_model() const { return *std::get<0>(GetParam()); }
  static std::unique_ptr<model::CausalLM> model_;
  static std::unique_ptr<tokenizer::Tokenizer> tok_;
  static std::string loaded_;
};
std::unique_ptr<model::CausalLM> ZeroShotGolden::model_;
std::unique_ptr<tokenizer::Tokenizer> ZeroShotGolden::tok_;
std::string ZeroShotGolden::loaded_;

TEST_P(ZeroShotGolden, RequestsMatchLmEval) {
  const std::string task = std::get<1>(GetParam());
  const nlohmann::json g = golden(golden_model(), task);
  const TaskSpec* spec = find_task(task);
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(g["file"].get<std::string>(), spec->file);
  ALPS_REQUIRE_DATA(fs::path("eval") / spec->file);
  const std::vector<TaskDoc> docs = load_task_docs(*spec, test::data_dir() / "eval" / spec->file);
  const std::vector<int64_t> rows = golden_rows(g, static_cast<int64_t>(docs.size()));
  ASSERT_GE(g["docs"].size(), 20u);

  std::vector<EncodedRequest> encoded;
  std::vector<const nlohmann::json*> expected;
  for (const auto& gd : g["docs"]) {
    const TaskDoc& d = docs[static_cast<size_t>(rows[gd["doc"].get<size_t>()])];
    ASSERT_EQ(d.requests.size(), gd["requests"].size()) << task << " doc " << gd["doc"];
    for (size_t k = 0; k < d.requests.size(); ++k) {
      const auto& gr = gd["requests"][k];
      EXPECT_EQ(d.requests[k].continuation, gr["continuation"].get<std::string>()) << task << " row " << d.row;
      encoded.push_back(encode_request(*tok_, d.requests[k], false));
      EXPECT_EQ(encoded.back().context.size(), gr["context_tokens"].get<size_t>()) << task << " row " << d.row;
      EXPECT_EQ(encoded.back().continuation, gr["continuation_ids"].get<std::vector<int64_t>>())
          << task << " row " << d.row << " request " << k;
      expected.push_back(&gr);
    }
  }
  LoglikelihoodOptions opt;
  opt.batch_size = 16;
  const std::vector<RequestScore> scores = score_requests(*model_, encoded, opt);
  const test_tolerance::Scale scale = test_tolerance::scale_of(*model_, encoded);
  double worst = 0, worst_rel = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double want = (*expected[i])["loglikelihood"].get<double>();
    EXPECT_NEAR(scores[i].loglikelihood, want,
                test_tolerance::tolerance(want, encoded[i].continuation.size(), scale.chain, scale.max_logit))
        << task << " request " << i;
    EXPECT_EQ(scores[i].is_greedy, (*expected[i])["is_greedy"].get<bool>()) << task << " request " << i;
    worst = std::max(worst, std::abs(scores[i].loglikelihood - want));
    worst_rel = std::max(worst_rel, std::abs(scores[i].loglikelihood - want) / std::abs(want));
  }
  std::cout << task << ": " << scores.size() << " requests, largest |alps - lm-eval| log-likelihood " << worst
            << " (relative " << worst_rel << ")\n";
}

// Whole tasks (or the golden's --limit rows) cost seconds to minutes on two cores; the larger ones run with
// ALPS_SLOW_TESTS=1.
bool quick_task(const std::string& task) { return task == "rte" || task == "winogrande" || task == "openbookqa"; }

TEST_P(ZeroShotGolden, WholeTaskMetricsEqualLmEval) {
  const std::string task = std::get<1>(GetParam());
  const nlohmann::json g = golden(golden_model(), task);
  // A golden of the first rows is quick; whole tasks of stories260K take minutes except the smallest.
  if (g["limit"].is_null() && !quick_task(task) && std::getenv("ALPS_SLOW_TESTS") == nullptr)
    GTEST_SKIP() << task << ": set ALPS_SLOW_TESTS=1 to score the whole task";
  const TaskSpec* spec = find_task(task);
  ASSERT_NE(spec, nullptr);
  ALPS_REQUIRE_DATA(fs::path("eval") / spec->file);
  fs::path file = test::data_dir() / "eval" / spec->file;
  test::TempDir tmp;
  if (g.contains("skipped_rows")) {  // the rows lm-eval could not score: left out of the file, as the golden did
    const std::set<int64_t> skipped = g["skipped_rows"].get<std::set<int64_t>>();
    std::istringstream in(io::read_text_file(file));
    file = tmp / "rows.jsonl";
    std::ofstream out(file);
    int64_t row = 0;
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && !skipped.count(row++)) out << line << "\n";
  }
  ZeroShotOptions opt;
  opt.scoring.batch_size = 32;
  if (!g["limit"].is_null()) opt.limit = g["limit"].get<int64_t>();  // a golden of the first rows only
  opt.keep_samples = true;
  const TaskResult r = evaluate_tasks(*model_, *tok_, {{spec, file}}, opt).at(0);
  ASSERT_EQ(r.docs, g["n"].get<int64_t>());

  // Per-document predictions as the golden writes them.
  std::string preds, preds_norm;
  size_t pos = 0;
  for (const TaskDoc& d : r.samples) {
    if (spec->output == TaskOutput::kLoglikelihood) {
      preds += r.scores[pos++].is_greedy ? '1' : '0';
      continue;
    }
    size_t best = 0, best_norm = 0;
    auto normed = [&](size_t k) {
      return r.scores[pos + k].loglikelihood / static_cast<double>(py_len(d.choices[k]));
    };
    for (size_t k = 0; k < d.requests.size(); ++k) {
      if (r.scores[pos + k].loglikelihood > r.scores[pos + best].loglikelihood) best = k;
      if (normed(k) > normed(best_norm)) best_norm = k;
    }
    pos += d.requests.size();
    preds += static_cast<char>('0' + best);
    preds_norm += static_cast<char>('0' + best_norm);
  }
  auto differences = [](const std::string& a, const std::string& b) {
    int64_t n = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
    return n;
  };
  EXPECT_EQ(differences(preds, g["preds"].get<std::string>()), 0) << task;
  if (g.contains("preds_norm")) EXPECT_EQ(differences(preds_norm, g["preds_norm"].get<std::string>()), 0) << task;

  for (const MetricValue& m : r.metrics) {
    const double want = g["metrics"][m.name].get<double>(), want_err = g["metrics"][m.name + "_stderr"].get<double>();
    ASSERT_TRUE(m.stderr_value.has_value()) << m.name;
    if (m.name == "perplexity") {  // from summed log-likelihoods: fp32 rounding, relative
      EXPECT_NEAR(m.value, want, 1e-5 * want) << task;
      EXPECT_NEAR(*m.stderr_value, want_err, 1e-4 * want_err) << task;
    } else {  // the same predictions give the same fractions
      EXPECT_NEAR(m.value, want, 1e-12) << task << " " << m.name;
      EXPECT_NEAR(*m.stderr_value, want_err, 1e-12) << task << " " << m.name;
    }
  }
}

const auto kTasks = ::testing::Values("lambada_openai", "piqa", "arc_easy", "arc_challenge", "hellaswag",
                                      "winogrande", "boolq", "rte", "openbookqa");
auto task_name = [](const auto& info) { return std::get<1>(info.param); };
INSTANTIATE_TEST_SUITE_P(Stories260K, ZeroShotGolden, ::testing::Combine(::testing::Values(&kStories), kTasks),
                         task_name);
INSTANTIATE_TEST_SUITE_P(SmolLM2, ZeroShotGolden, ::testing::Combine(::testing::Values(&kSmolLM2), kTasks),
                         task_name);

}  // namespace
}  // namespace alps::eval
