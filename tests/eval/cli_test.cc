// `alps eval`, `alps inspect`, `alps generate` end to end (the built executable), including bad input.
#include <ATen/ATen.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "alps/eval/datasets.h"
#include "alps/eval/perplexity.h"
#include "alps/model/causal_lm.h"
#include "alps/tokenizer/tokenizer.h"
#include "support.h"

namespace alps::eval {
namespace {

namespace fs = std::filesystem;

fs::path stories() { return test::data_dir() / "models" / "stories260K-hf"; }
fs::path fixture(const std::string& name) { return test::source_dir() / "tests" / "data" / "model" / name; }

nlohmann::json json_of(const test::CliResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);  // exactly one document on stdout
}

TEST(EvalCli, GenerateFromBosMatchesStoriesReadme) {
  const auto doc = json_of(test::run_cli({"generate", "--model", stories().string(), "--max-tokens", "60", "--json"}));
  const std::vector<int64_t> readme = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
                                       338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433,
                                       426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338,
                                       391, 266, 267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415};
  EXPECT_EQ(doc["prompt_ids"].get<std::vector<int64_t>>(), std::vector<int64_t>{1});
  EXPECT_EQ(doc["ids"].get<std::vector<int64_t>>(), readme);
  EXPECT_EQ(doc["text"].get<std::string>(),
            "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
            "she saw a big, red ball. She wanted to play with it, but it was too high");
}

TEST(EvalCli, EvalJsonMatchesLibraryPerplexity) {
  const fs::path sample = test::data_dir() / "text" / "tinystories" / "tinystories_sample.txt";
  const auto doc = json_of(test::run_cli({"eval", "--model", stories().string(), "--ppl", sample.string(), "--seqlen",
                                          "128", "--batch-size", "3", "--device", "cpu", "--json"}));
  ASSERT_EQ(doc["results"].size(), 1u);
  const auto& r = doc["results"][0];
  EXPECT_EQ(doc["seqlen"], 128);

  model::CausalLM m = model::CausalLM::load(stories());
  const auto tok = tokenizer::load_tokenizer(stories());
  const std::vector<int64_t> ids = dataset_tokens(resolve_dataset(sample.string(), test::data_dir()), *tok, 128);
  PerplexityOptions opt;
  opt.seqlen = 128;
  const PerplexityResult lib = perplexity(m, ids, opt);
  EXPECT_EQ(r["windows"].get<int64_t>(), static_cast<int64_t>(ids.size()) / 128);
  EXPECT_EQ(r["tokens"].get<int64_t>(), lib.tokens);
  EXPECT_NEAR(r["perplexity"].get<double>(), lib.ppl, 1e-5 * lib.ppl);
  // In-domain text on a model trained on it: low but not trivial perplexity.
  EXPECT_GT(lib.ppl, 2.0);
  EXPECT_LT(lib.ppl, 10.0);
}

TEST(EvalCli, DefaultSeqlenIsModelPositionsAndTableIsPrinted) {
  const auto r = test::run_cli({"eval", "--model", stories().string(), "--ppl", "wikitext2", "--max-windows", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("dataset"), std::string::npos);
  EXPECT_NE(r.out.find("wikitext2"), std::string::npos);
  const auto doc = json_of(
      test::run_cli({"eval", "--model", stories().string(), "--ppl", "wikitext2", "--max-windows", "2", "--json"}));
  EXPECT_EQ(doc["seqlen"], 512);  // min(2048, max_position_embeddings 512)
  EXPECT_EQ(doc["results"][0]["windows"], 2);
}

TEST(EvalCli, InspectReportsParametersAndSparsity) {
  test::TempDir tmp;
  model::CausalLM m = model::CausalLM::load(fixture("opt_pre"));
  const std::string name = m.weight_name(1, "fc1");
  at::Tensor w = m.tensor(name).clone();
  w.narrow(0, 0, 16).zero_();  // 16 of 64 rows -> 25% zeros
  m.set_tensor(name, w);
  m.save(tmp / "pruned");
  const auto doc = json_of(test::run_cli({"inspect", "--model", (tmp / "pruned").string(), "--json"}));
  EXPECT_EQ(doc["architecture"], "OPTForCausalLM");
  EXPECT_EQ(doc["parameters"], 22336);  // transformers' sum(p.numel()) for this fixture (make_model_fixtures.py)
  ASSERT_EQ(doc["linears"].size(), 12u);
  for (const auto& l : doc["linears"])
    EXPECT_DOUBLE_EQ(l["sparsity"].get<double>(), l["name"] == name ? 0.25 : 0.0) << l["name"];
}

TEST(EvalCli, BadInputFailsWithClearErrors) {
  test::TempDir tmp;
  auto expect_error = [](const std::vector<std::string>& args, const std::string& message) {
    const auto r = test::run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  };
  expect_error({"eval", "--model", fixture("opt_pre").string(), "--ppl", "wikitext2"}, "no tokenizer");
  expect_error({"eval", "--model", stories().string(), "--seqlen", "513"}, "exceeds the model's 512 positions");
  std::ofstream(tmp / "empty.txt") << "";
  expect_error({"eval", "--model", stories().string(), "--ppl", (tmp / "empty.txt").string()}, "is empty");
  expect_error({"eval", "--model", stories().string(), "--ppl", "c4"}, "c4-validation.00000-of-00008.json");
  expect_error({"eval", "--model", stories().string(), "--ppl", "nosuchset"}, "unknown dataset 'nosuchset'");
  expect_error({"inspect", "--model", (tmp / "nothing").string()}, "does not exist");
  fs::copy(fixture("opt_pre"), tmp / "bad");
  std::ofstream(tmp / "bad" / "config.json", std::ios::trunc) << R"({"architectures": ["BloomForCausalLM"]})";
  expect_error({"inspect", "--model", (tmp / "bad").string()}, "unknown architecture 'BloomForCausalLM'");
  fs::resize_file(tmp / "bad" / "model.safetensors", 1000);
  fs::copy_file(fixture("opt_pre") / "config.json", tmp / "bad" / "config.json", fs::copy_options::overwrite_existing);
  expect_error({"generate", "--model", (tmp / "bad").string()}, "model.safetensors");
}

}  // namespace
}  // namespace alps::eval
