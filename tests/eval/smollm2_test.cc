// `alps generate` and `alps eval` on SmolLM2-135M-Instruct, a real 135M-parameter model (30 blocks, GQA 9/3, tied
// embeddings, a Digits + ByteLevel tokenizer), against transformers (tests/data/eval/smollm2_golden.json from
// scripts/make_smollm2_golden.py). Skipped, saying how to get it, where scripts/get_smollm2.sh has not run; the
// script's refusals are tested here too.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support.h"

namespace alps {
namespace {

nlohmann::json golden() {
  return nlohmann::json::parse(test::slurp(test::source_dir() / "tests" / "data" / "eval" / "smollm2_golden.json"));
}

nlohmann::json model_config() {
  return nlohmann::json::parse(test::slurp(test::smollm2_dir() / "config.json"));
}

// The longest chain of fp32 roundings behind a logit of a T-token forward pass (as in tests/model/causal_lm_test.cc):
// per block the attention scores (head_dim terms), softmax and weighted values (T terms each), the four attention
// projections (hidden terms), the MLP's second matrix (intermediate terms); then the final norm and the head.
double logit_chain(const nlohmann::json& c, int64_t T) {
  const int64_t hidden = c.at("hidden_size"), heads = c.at("num_attention_heads");
  const int64_t layers = c.at("num_hidden_layers"), inter = c.at("intermediate_size");
  return static_cast<double>(layers * (hidden / heads + 2 * T + 4 * hidden + inter) + 2 * hidden);
}

// Greedy ids equal transformers' while the best logit leads the second by more than two fp32 evaluations of the
// logits can disagree; from the first closer step on, either token is a correct greedy choice, so the comparison
// stops there (and the golden prompts were chosen so that it reaches most of the continuation).
TEST(SmolLM2, GreedyGenerationMatchesTransformers) {
  ALPS_REQUIRE_SMOLLM2();
  const auto g = golden();
  const auto config = model_config();
  for (const auto& gen : g.at("generations")) {
    const auto prompt = gen.at("prompt").get<std::string>();
    const auto steps = gen.at("steps");
    const auto r = test::run_cli({"generate", "--model", test::smollm2_dir().string(), "--prompt", prompt,
                                  "--max-tokens", std::to_string(steps.size()), "--json", "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto out = nlohmann::json::parse(r.out);
    EXPECT_EQ(out.at("prompt_ids"), gen.at("prompt_ids")) << prompt;
    const auto ids = out.at("ids").get<std::vector<int64_t>>();
    const auto prompt_len = static_cast<int64_t>(gen.at("prompt_ids").size());
    size_t compared = 0;
    for (size_t t = 0; t < steps.size(); ++t) {
      const auto& step = steps[t];
      const double bound = test::probabilistic_rounding_bound(logit_chain(config, prompt_len + static_cast<int64_t>(t)),
                                                              step.at("max_abs_logit").get<double>());
      if (step.at("margin").get<double>() <= bound) break;
      ASSERT_LT(t, ids.size()) << prompt << ": alps stopped after " << ids.size() << " tokens";
      EXPECT_EQ(ids[t], step.at("id").get<int64_t>()) << prompt << ": step " << t;
      ++compared;
    }
    EXPECT_GE(compared, steps.size() / 2) << prompt << ": too few steps outside the rounding bound to test";
    if (compared == steps.size()) EXPECT_EQ(out.at("text"), gen.at("text")) << prompt;
  }
}

// A text that is not UTF-8 stops a tokenizer.json model with an error naming the file, not only the byte.
TEST(SmolLM2, InvalidUtf8NamesTheFile) {
  ALPS_REQUIRE_SMOLLM2();
  test::expect_invalid_utf8_names_the_file(test::smollm2_dir());
}

// Per-window NLL of the first windows of 512 tokens of WikiText-2 test, and their perplexity (30.96).
TEST(SmolLM2, WikiText2WindowsMatchTransformers) {
  ALPS_REQUIRE_SMOLLM2();
  const auto g = golden().at("wikitext2");
  const auto config = model_config();
  const auto seqlen = g.at("seqlen").get<int64_t>();
  const auto& windows = g.at("windows");
  const auto r = test::run_cli({"eval", "--model", test::smollm2_dir().string(), "--ppl", "wikitext2", "--seqlen",
                                std::to_string(seqlen), "--max-windows", std::to_string(windows.size()), "--json",
                                "--quiet", "--data-dir", test::committed_data_dir().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto result = nlohmann::json::parse(r.out).at("results").at(0);
  EXPECT_EQ(result.at("dataset_tokens"), g.at("dataset_tokens"));
  EXPECT_EQ(result.at("windows").get<size_t>(), windows.size());
  const auto nll = result.at("window_nll").get<std::vector<double>>();
  ASSERT_EQ(nll.size(), windows.size());
  // A window's loss adds to the logits' chain the logsumexp over the vocabulary and the mean over its positions;
  // what it rounds is of the size of log V + 2 max |logit| (tests/eval/perplexity_test.cc).
  const double chain =
      logit_chain(config, seqlen) + config.at("vocab_size").get<double>() + static_cast<double>(seqlen);
  double mean = 0, mean_bound = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    const double scale =
        std::log(config.at("vocab_size").get<double>()) + 2 * windows[w].at("max_abs_logit").get<double>();
    const double bound = test::probabilistic_rounding_bound(chain, scale);
    EXPECT_NEAR(nll[w], windows[w].at("nll").get<double>(), bound) << "window " << w;
    std::printf("[ window %zu ] nll %.6f, transformers %.6f, bound %.4f\n", w, nll[w],
                windows[w].at("nll").get<double>(), bound);
    mean += windows[w].at("nll").get<double>() / static_cast<double>(windows.size());
    mean_bound = std::max(mean_bound, bound);
  }
  const double ppl = g.at("perplexity").get<double>();
  EXPECT_NEAR(result.at("perplexity").get<double>(), ppl, ppl * std::expm1(mean_bound));
  EXPECT_NEAR(ppl, std::exp(mean), 1e-9 * ppl);
}

// scripts/get_smollm2.sh never touches a destination it did not write, and checks its flags before any download.
TEST(SmolLM2, FetchScriptRefusesForeignDestinationAndBadFlags) {
  test::TempDir dir;
  { std::ofstream(dir / "notes.txt") << "mine"; }
  const std::string script = (test::source_dir() / "scripts" / "get_smollm2.sh").string();
  const std::string run = script + " " + dir.path().string() + " 2>" + (dir / "err").string();
  EXPECT_EQ(WEXITSTATUS(std::system(run.c_str())), 1);
  EXPECT_NE(test::slurp(dir / "err").find("was not written by this script; refusing to touch it"), std::string::npos)
      << test::slurp(dir / "err");
  EXPECT_EQ(test::slurp(dir / "notes.txt"), "mine");
  const std::string bad = script + " --dtype fp8 " + (dir / "new").string() + " 2>" + (dir / "err").string();
  EXPECT_EQ(WEXITSTATUS(std::system(bad.c_str())), 2);
  EXPECT_FALSE(std::filesystem::exists(dir / "new"));
}

}  // namespace
}  // namespace alps
