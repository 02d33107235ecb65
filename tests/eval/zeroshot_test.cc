// lm-eval's request encoding rules, the scorer (left truncation, batching) and the metric aggregation.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/eval/loglikelihood.h"
#include "alps/eval/task_metrics.h"
#include "alps/eval/zeroshot.h"
#include "alps/model/causal_lm.h"
#include "alps/tokenizer/tokenizer.h"
#include "scoring_tolerance.h"
#include "support.h"

namespace alps::eval {
namespace {

namespace fs = std::filesystem;

// Bytes are ids, except "ab" which is one token (300): enough to see which side a boundary-spanning token lands
// on. BOS = 256 with add_special.
class MergingTokenizer : public tokenizer::Tokenizer {
 public:
  std::vector<int64_t> encode(std::string_view text, bool add_special) const override {
    std::vector<int64_t> ids;
    if (add_special) ids.push_back(256);
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.compare(i, 2, "ab") == 0) {
        ids.push_back(300);
        ++i;
      } else {
        ids.push_back(static_cast<unsigned char>(text[i]));
      }
    }
    return ids;
  }
  std::string decode(const std::vector<int64_t>&) const override { return {}; }
  int64_t vocab_size() const override { return 301; }
  std::optional<int64_t> bos_id() const override { return 256; }
  std::optional<int64_t> eos_id() const override { return 257; }
  std::string kind() const override { return "test"; }
};

std::vector<int64_t> ids(const std::string& s) { return MergingTokenizer().encode(s, false); }

TEST(EncodeRequest, ContinuationIsWhatFollowsTheContextTokens) {
  const MergingTokenizer tok;
  EncodedRequest e = encode_request(tok, {"Q: x", " y"}, false);
  EXPECT_EQ(e.context, ids("Q: x"));
  EXPECT_EQ(e.continuation, ids(" y"));
  // "a" + "bc": the whole string merges "ab", so the continuation is what follows len(encode("xa")) = 2 tokens.
  e = encode_request(tok, {"xa", "bc"}, false);
  EXPECT_EQ(e.context, (std::vector<int64_t>{'x', 'a'}));
  EXPECT_EQ(e.continuation, (std::vector<int64_t>{'c'}));
}

TEST(EncodeRequest, TrailingWhitespaceMovesToTheContinuation) {
  const MergingTokenizer tok;
  const EncodedRequest e = encode_request(tok, {"Answer: \n", "yes"}, false);
  EXPECT_EQ(e.context, ids("Answer:"));
  EXPECT_EQ(e.continuation, ids(" \nyes"));
  // U+00A0 is whitespace to Python's rstrip.
  const EncodedRequest nbsp = encode_request(tok, {"a\xc2\xa0", "b"}, false);
  EXPECT_EQ(nbsp.context, ids("a"));
  EXPECT_EQ(nbsp.continuation, ids("\xc2\xa0" "b"));
}

TEST(EncodeRequest, BosOnlyWhenAskedAndForEmptyContexts) {
  const MergingTokenizer tok;
  const EncodedRequest with = encode_request(tok, {"q", " r"}, true);
  EXPECT_EQ(with.context, (std::vector<int64_t>{256, 'q'}));
  EXPECT_EQ(with.continuation, ids(" r"));
  const EncodedRequest empty = encode_request(tok, {"", " word"}, false);
  EXPECT_EQ(empty.context, std::vector<int64_t>{256});
  EXPECT_EQ(empty.continuation, ids(" word"));
}

// `got` scores `requests` as their whole inputs score (`whole`): log-likelihoods within the rounding of a logit's
// chain of products, the same is-greedy flags.
void expect_scores_as_whole(const model::CausalLM& m, const std::vector<EncodedRequest>& requests,
                            const std::vector<RequestScore>& got, const std::vector<RequestScore>& whole) {
  const test_tolerance::Scale scale = test_tolerance::scale_of(m, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_NEAR(got[i].loglikelihood, whole[i].loglikelihood,
                test_tolerance::tolerance(whole[i].loglikelihood, requests[i].continuation.size(), scale.chain,
                                          scale.max_logit))
        << i;
    EXPECT_EQ(got[i].is_greedy, whole[i].is_greedy) << i;
  }
}

class Scoring : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new model::CausalLM(model::CausalLM::load(test::committed_data_dir() / "models" / "stories260K-hf"));
  }
  static void TearDownTestSuite() { delete model_; }
  // Sum of log-softmax of `cont` after `input` (the tokens the model sees), by one plain forward pass.
  static double reference(const std::vector<int64_t>& input, const std::vector<int64_t>& cont) {
    at::NoGradGuard g;
    at::Tensor logits = model_->forward(at::tensor(input, at::kLong).unsqueeze(0))[0].to(at::kDouble);
    at::Tensor logp = at::log_softmax(logits, -1);
    double s = 0;
    const int64_t n = static_cast<int64_t>(input.size()), c = static_cast<int64_t>(cont.size());
    for (int64_t t = 0; t < c; ++t) s += logp[n - c + t][cont[t]].item<double>();
    return s;
  }
  static model::CausalLM* model_;
};
model::CausalLM* Scoring::model_ = nullptr;

TEST_F(Scoring, LeftTruncationKeepsTheLastMaxLengthTokens) {
  std::vector<int64_t> ctx;
  for (int i = 0; i < 30; ++i) ctx.push_back(300 + (i * 7) % 100);
  const std::vector<int64_t> cont = {261, 262, 263};
  LoglikelihoodOptions opt;
  opt.max_length = 8;
  const RequestScore s = score_requests(*model_, {{ctx, cont}}, opt).at(0);
  // The model sees (ctx + cont)[-9:][:-1]: the last 6 context tokens and the first 2 continuation tokens.
  std::vector<int64_t> input(ctx.end() - 6, ctx.end());
  input.push_back(261);
  input.push_back(262);
  EXPECT_NEAR(s.loglikelihood, reference(input, cont), 1e-4);
  // Without truncation the score differs (the test above could not pass by accident).
  std::vector<int64_t> full = ctx;
  full.insert(full.end(), cont.begin(), cont.end() - 1);
  EXPECT_GT(std::abs(reference(full, cont) - s.loglikelihood), 1e-3);
}

TEST_F(Scoring, BatchingAndOrderDoNotChangeScores) {
  std::vector<EncodedRequest> reqs;
  for (int r = 0; r < 9; ++r) {
    EncodedRequest e;
    for (int i = 0; i < 3 + 5 * r; ++i) e.context.push_back(270 + (i * 13 + r) % 200);
    for (int i = 0; i < 1 + r % 4; ++i) e.continuation.push_back(280 + (i * 31 + r) % 150);
    reqs.push_back(e);
  }
  LoglikelihoodOptions one, many;
  many.batch_size = 4;
  const auto a = score_requests(*model_, reqs, one), b = score_requests(*model_, reqs, many);
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::vector<int64_t> input = reqs[i].context;
    input.insert(input.end(), reqs[i].continuation.begin(), reqs[i].continuation.end() - 1);
    EXPECT_NEAR(a[i].loglikelihood, reference(input, reqs[i].continuation), 1e-4) << i;
    EXPECT_NEAR(b[i].loglikelihood, a[i].loglikelihood, 1e-4) << i;
    EXPECT_EQ(b[i].is_greedy, a[i].is_greedy) << i;
  }
}

// The choices of a question share their context: packed as a token tree, the context is computed once. The scores
// equal those of each request's whole input (one-token continuations, contexts of several lengths in one packed
// sequence, a request cut on the left, which runs whole), and fewer positions are computed.
TEST_F(Scoring, SharedContextsScoreAsWholeInputs) {
  std::vector<EncodedRequest> reqs;
  for (int q = 0; q < 6; ++q) {
    std::vector<int64_t> ctx;
    for (int i = 0; i < 4 + 3 * (q % 2); ++i) ctx.push_back(270 + (i * 11 + q * 5) % 200);
    for (int c = 0; c < 1 + q % 4; ++c) {
      std::vector<int64_t> cont;
      for (int i = 0; i < 1 + (c + q) % 3; ++i) cont.push_back(300 + (i * 17 + c * 3 + q) % 150);
      reqs.push_back({ctx, cont});
    }
  }
  std::vector<int64_t> long_ctx;
  for (int i = 0; i < 15; ++i) long_ctx.push_back(280 + i);
  reqs.push_back({long_ctx, {290, 291}});  // 16 input tokens > max_length
  reqs.push_back({long_ctx, {292}});       // 15 input tokens: shares nothing with the one above, which is cut
  LoglikelihoodOptions shared, whole;
  shared.max_length = whole.max_length = 15;
  shared.batch_size = 3;
  whole.reuse_context = false;
  ScoringStats shared_cost, whole_cost;
  const auto a = score_requests(*model_, reqs, shared, {}, &shared_cost);
  const auto b = score_requests(*model_, reqs, whole, {}, &whole_cost);
  const test_tolerance::Scale scale = test_tolerance::scale_of(*model_, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const double tol =
        test_tolerance::tolerance(b[i].loglikelihood, reqs[i].continuation.size(), scale.chain, scale.max_logit);
    EXPECT_NEAR(a[i].loglikelihood, b[i].loglikelihood, tol) << i;
    EXPECT_EQ(a[i].is_greedy, b[i].is_greedy) << i;
    std::vector<int64_t> input = reqs[i].context;
    input.insert(input.end(), reqs[i].continuation.begin(), reqs[i].continuation.end() - 1);
    if (input.size() <= 15) EXPECT_NEAR(a[i].loglikelihood, reference(input, reqs[i].continuation), tol) << i;
  }
  EXPECT_EQ(whole_cost.positions, whole_cost.whole_positions);
  EXPECT_EQ(shared_cost.whole_positions, whole_cost.positions);
  EXPECT_LT(shared_cost.positions, whole_cost.positions * 3 / 4);
}

// A sliding window counts slots, not depths in a packed tree: on a windowed model (Mistral fixture, window 8) the
// inputs that reach the window run whole, the others are packed, and all score as whole inputs.
TEST(ScoringWindowed, SharedContextsOfDifferentLengthsScoreAsWholeInputs) {
  const model::CausalLM m =
      model::CausalLM::load(test::source_dir() / "tests" / "data" / "model" / "mistral_swa");
  std::vector<EncodedRequest> reqs;
  for (int q = 0; q < 6; ++q) {
    std::vector<int64_t> ctx;
    for (int i = 0; i < 3 + 4 * (q % 3); ++i) ctx.push_back(1 + (i * 11 + q * 5) % 500);
    for (int c = 0; c < 2; ++c) {
      std::vector<int64_t> cont;
      for (int i = 0; i < 1 + (c + q) % 5; ++i) cont.push_back(1 + (i * 17 + c * 3 + q) % 500);
      reqs.push_back({ctx, cont});
    }
  }
  LoglikelihoodOptions shared, whole;
  shared.batch_size = 4;
  whole.reuse_context = false;
  ScoringStats cost;
  const auto a = score_requests(m, reqs, shared, {}, &cost);
  const auto b = score_requests(m, reqs, whole);
  EXPECT_LT(cost.positions, cost.whole_positions);  // the contexts were shared
  expect_scores_as_whole(m, reqs, a, b);
}

// Different contexts that share a long prefix (WinoGrande's options: the sentence up to the blank) compute it once;
// a short shared prefix (a common first word) is not shared. Counted by hand: the positions are the tree's nodes.
TEST_F(Scoring, InputsSharingALongPrefixComputeItOnce) {
  std::vector<int64_t> sentence;
  for (int i = 0; i < 12; ++i) sentence.push_back(300 + (i * 7) % 90);
  const std::vector<int64_t> rest = {410, 411, 412};
  std::vector<EncodedRequest> reqs;
  for (int64_t option : {280, 281}) {
    std::vector<int64_t> ctx = sentence;
    ctx.push_back(option);
    reqs.push_back({ctx, rest});
  }
  // Shares only its first token with the others: a tree of its own.
  std::vector<int64_t> other = {sentence[0]};
  for (int i = 0; i < 10; ++i) other.push_back(350 + i);
  reqs.push_back({other, {290, 291}});
  LoglikelihoodOptions packed, whole;
  whole.reuse_context = false;
  ScoringStats cost;
  const auto a = score_requests(*model_, reqs, packed, {}, &cost);
  const auto b = score_requests(*model_, reqs, whole);
  // 12 shared + (1 option + 2 continuation inputs) per option + 11 + 1 for the other request.
  EXPECT_EQ(cost.positions, 12 + 2 * 3 + 12);
  EXPECT_EQ(cost.whole_positions, 2 * 15 + 12);
  expect_scores_as_whole(*model_, reqs, a, b);
}

// More trees than one packed sequence holds (about 2,000 positions in sequences of 512): they fill several
// sequences, the smaller trees placed into the room the larger ones left, and every request still scores as its
// whole input, one sequence per forward or three.
TEST_F(Scoring, TreesFillSeveralSequencesAndScoreAsWholeInputs) {
  std::vector<EncodedRequest> reqs;
  for (int q = 0; q < 40; ++q) {
    std::vector<int64_t> ctx;
    for (int i = 0; i < 10 + (q * 17) % 50; ++i) ctx.push_back(270 + (i * 11 + q * 29) % 200);
    for (int c = 0; c < 1 + q % 3; ++c) {
      std::vector<int64_t> cont;
      for (int i = 0; i < 1 + (c * 5 + q) % 7; ++i) cont.push_back(300 + (i * 13 + c * 7 + q) % 150);
      reqs.push_back({ctx, cont});
    }
  }
  LoglikelihoodOptions one, three, whole;
  three.batch_size = 3;
  whole.reuse_context = false;
  ScoringStats cost;
  const auto a = score_requests(*model_, reqs, one, {}, &cost);
  const auto b = score_requests(*model_, reqs, three);
  const auto c = score_requests(*model_, reqs, whole);
  EXPECT_GT(cost.positions, 1024);  // more than two sequences' worth
  EXPECT_LT(cost.positions, cost.whole_positions);
  expect_scores_as_whole(*model_, reqs, a, c);
  expect_scores_as_whole(*model_, reqs, b, c);
}

// On a GPU the packed forward runs batched attention steps with per-query masks (uploaded once per forward) and
// first keys read on the host: every request still scores as its whole input does on the same device.
TEST(ScoringOnTheGpu, PackedTreesScoreAsWholeInputs_CUDA) {
  model::CausalLM m = model::CausalLM::load(test::committed_data_dir() / "models" / "stories260K-hf");
  m.set_compute(c10::Device(c10::kCUDA, 0), at::kFloat);
  m.load_all();
  std::vector<EncodedRequest> reqs;
  for (int q = 0; q < 30; ++q) {
    std::vector<int64_t> ctx;
    for (int i = 0; i < 10 + (q * 17) % 50; ++i) ctx.push_back(270 + (i * 11 + q * 29) % 200);
    for (int c = 0; c < 1 + q % 4; ++c) reqs.push_back({ctx, {300 + (c * 7 + q) % 150, 301 + q % 100}});
  }
  LoglikelihoodOptions packed, whole;
  packed.batch_size = 2;
  whole.reuse_context = false;
  ScoringStats cost;
  const auto a = score_requests(m, reqs, packed, {}, &cost);
  EXPECT_LT(cost.positions, cost.whole_positions);
  expect_scores_as_whole(m, reqs, a, score_requests(m, reqs, whole));
}

TEST_F(Scoring, GreedyMeansEveryTokenIsTheArgmax) {
  // Greedy-decode 4 tokens after a prompt, then score them: is_greedy holds; change the last one and it does not.
  std::vector<int64_t> seq = {1, 403, 407};
  at::NoGradGuard g;
  for (int i = 0; i < 4; ++i)
    seq.push_back(model_->forward(at::tensor(seq, at::kLong).unsqueeze(0))[0][-1].argmax().item<int64_t>());
  EncodedRequest e{{seq.begin(), seq.end() - 4}, {seq.end() - 4, seq.end()}};
  EXPECT_TRUE(score_requests(*model_, {e}, {}).at(0).is_greedy);
  e.continuation.back() = e.continuation.back() == 300 ? 301 : 300;
  EXPECT_FALSE(score_requests(*model_, {e}, {}).at(0).is_greedy);
}

TEST(IsArgmax, PicksTheFirstOfTiedLargestValuesAsAtArgmaxDoes) {
  // Rows of few distinct values, so that the largest is often tied, against ATen's own argmax at every index.
  at::manual_seed(3);
  for (int trial = 0; trial < 200; ++trial) {
    const at::Tensor row = at::randint(0, 1 + trial % 4, {1 + trial % 37}).to(at::kFloat);
    const float largest = row.max().item<float>();
    const int64_t pick = row.argmax().item<int64_t>();
    for (int64_t i = 0; i < row.numel(); ++i)
      ASSERT_EQ(is_argmax(row.data_ptr<float>(), largest, i), i == pick) << "trial " << trial << " index " << i;
  }
}

TEST(TaskMetrics, StderrsAsLmEvalComputesThem) {
  // Values from lm_eval.api.metrics 0.4.9 (mean_stderr, perplexity, bootstrap_stderr) on the same inputs.
  EXPECT_NEAR(mean_stderr({1, 0, 1, 1, 0, 1}), 0.210818510677892, 1e-15);
  const std::vector<double> lls = {-1.0, -2.5, -0.3, -4.0, -1.7, -0.05, -3.3};
  EXPECT_NEAR(perplexity_of(lls), 6.2696108398829935, 1e-13);
  EXPECT_NEAR(bootstrap_perplexity_stderr(lls, 2000), 4.183109063430025, 1e-12);
  EXPECT_NEAR(bootstrap_perplexity_stderr(lls, 500), 3.91839986364798, 1e-12);
  EXPECT_NEAR(bootstrap_perplexity_stderr(lls, 100000), 4.090131516887686, 1e-11);
}

TEST(ResolveTasks, NamesFilesAndOverrides) {
  ALPS_REQUIRE_DATA("eval");
  test::TempDir tmp;
  const fs::path data = test::data_dir() / "eval";
  auto tasks = resolve_tasks({"rte", "piqa", "rte"}, data);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].file, data / "rte" / "rte_validation.jsonl.gz");
  EXPECT_EQ(resolve_tasks({"all"}, data).size(), task_registry().size());
  std::ofstream(tmp / "mine.jsonl") << R"({"sentence1":"a","sentence2":"b","label":0})" << "\n";
  tasks = resolve_tasks({"rte"}, data, {"rte=" + (tmp / "mine.jsonl").string()});
  EXPECT_EQ(tasks[0].file, tmp / "mine.jsonl");
  auto error = [&](const std::vector<std::string>& names, const std::vector<std::string>& overrides,
                   const fs::path& dir) { return test::error_message([&] { resolve_tasks(names, dir, overrides); }); };
  EXPECT_NE(error({"piqaa"}, {}, data).find("unknown task 'piqaa'"), std::string::npos);
  EXPECT_NE(error({"rte"}, {"piqa=x"}, data).find("task piqa is not among the tasks"), std::string::npos);
  EXPECT_NE(error({"rte"}, {"rte"}, data).find("expected TASK=FILE"), std::string::npos);
  EXPECT_NE(error({"rte"}, {}, tmp.path()).find("rte_validation.jsonl.gz does not exist"), std::string::npos);
}

}  // namespace
}  // namespace alps::eval
