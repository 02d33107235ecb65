// `alps eval`, `alps inspect`, `alps generate` end to end (the built executable), including bad input.
#include <ATen/ATen.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "alps/eval/datasets.h"
#include "alps/eval/perplexity.h"
#include "alps/io/safetensors.h"
#include "alps/model/causal_lm.h"
#include "alps/tokenizer/tokenizer.h"
#include "support.h"

namespace alps::eval {
namespace {

namespace fs = std::filesystem;

fs::path stories() { return test::committed_data_dir() / "models" / "stories260K-hf"; }
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
  const fs::path sample = test::committed_data_dir() / "text" / "tinystories" / "tinystories_sample.txt";
  const auto doc = json_of(test::run_cli({"eval", "--model", stories().string(), "--ppl", sample.string(), "--seqlen",
                                          "128", "--batch-size", "3", "--device", "cpu", "--json"}));
  ASSERT_EQ(doc["results"].size(), 1u);
  const auto& r = doc["results"][0];
  EXPECT_EQ(doc["seqlen"], 128);

  model::CausalLM m = model::CausalLM::load(stories());
  const auto tok = tokenizer::load_tokenizer(stories());
  const std::vector<int64_t> ids =
      dataset_tokens(resolve_dataset(sample.string(), test::committed_data_dir()), *tok, 128);
  PerplexityOptions opt;
  opt.seqlen = 128;
  opt.batch_size = 3;  // the same shapes, hence the same arithmetic, as the CLI run
  const PerplexityResult lib = perplexity(m, ids, opt);
  EXPECT_EQ(r["windows"].get<int64_t>(), static_cast<int64_t>(ids.size()) / 128);
  EXPECT_EQ(r["tokens"].get<int64_t>(), lib.tokens);
  EXPECT_DOUBLE_EQ(r["perplexity"].get<double>(), lib.ppl);  // JSON prints doubles round-trip
  // In-domain text on a model trained on it: low but not trivial perplexity.
  EXPECT_GT(lib.ppl, 2.0);
  EXPECT_LT(lib.ppl, 10.0);

  // A dataset named twice is evaluated once.
  const auto twice = json_of(test::run_cli({"eval", "--model", stories().string(), "--ppl",
                                            sample.string() + "," + sample.string(), "--seqlen", "128", "--json"}));
  EXPECT_EQ(twice["results"].size(), 1u);
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
  const auto unknown = test::run_cli({"eval", "--model", stories().string(), "--ppl", "wikitext"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  EXPECT_NE(unknown.err.find("unknown dataset 'wikitext'"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("did you mean 'wikitext2'?"), std::string::npos) << unknown.err;
  expect_error({"inspect", "--model", (tmp / "nothing").string()}, "does not exist");
  fs::copy(fixture("opt_pre"), tmp / "bad");
  std::ofstream(tmp / "bad" / "config.json", std::ios::trunc) << R"({"architectures": ["BloomForCausalLM"]})";
  expect_error({"inspect", "--model", (tmp / "bad").string()}, "unknown architecture 'BloomForCausalLM'");
  fs::resize_file(tmp / "bad" / "model.safetensors", 1000);
  fs::copy_file(fixture("opt_pre") / "config.json", tmp / "bad" / "config.json", fs::copy_options::overwrite_existing);
  expect_error({"generate", "--model", (tmp / "bad").string()}, "model.safetensors");
  // A prompt that fills the model's positions leaves nothing to generate: said, not an empty success.
  std::string words;
  for (int i = 0; i < 600; ++i) words += "word ";
  expect_error({"generate", "--model", stories().string(), "--prompt", words}, "no room for a new token");
  // An output file is written after the work: a directory that cannot take it (/proc takes no files, not even
  // root's) is found before.
  expect_error({"eval", "--model", stories().string(), "--tasks", "rte", "--log-samples", "/proc/alps-samples.jsonl"},
               "cannot write in /proc");
}

// A copy of stories260K (in `tmp`) with `edit` applied to its tensors, written with the project's own writer.
fs::path edited_stories(const test::TempDir& tmp, const std::string& name,
                        const std::function<void(const std::string&, at::Tensor&)>& edit) {
  const fs::path dir = tmp / name;
  fs::copy(stories(), dir);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  {
    io::SafetensorsFile f(stories() / "model.safetensors");
    for (const auto& e : f.entries()) {
      at::Tensor t = f.tensor(e.name).clone();
      edit(e.name, t);
      tensors.emplace_back(e.name, t);
    }
  }
  fs::remove(dir / "model.safetensors");
  io::save_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

// Non-finite weights give an error naming the tensor, never a perplexity of nan or made-up text with exit 0.
TEST(EvalCli, NonFiniteWeightsOrResultsAreErrors) {
  test::TempDir tmp;
  const std::string poisoned = "model.layers.2.mlp.down_proj.weight";
  const fs::path nan_model = edited_stories(tmp, "nan", [&](const std::string& name, at::Tensor& t) {
    if (name == poisoned) t[3][5] = NAN;
  });
  const std::string sample = (test::committed_data_dir() / "text" / "tinystories" / "tinystories_sample.txt").string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"eval", "--model", nan_model.string(), "--ppl", sample, "--seqlen", "64", "--max-windows", "2", "--json"},
           {"generate", "--model", nan_model.string(), "--prompt", "Once upon a", "--max-tokens", "4", "--json"}}) {
    const auto r = test::run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.out;
    EXPECT_NE(r.err.find("tensor " + poisoned + " in " + (nan_model / "model.safetensors").string() +
                         " holds NaN or Inf"),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // Finite weights whose forward pass overflows fp32: the final norm's gain at 3e38 sends every normalised
  // component of magnitude >= 1 (there is always one) to infinity.
  const fs::path huge = edited_stories(tmp, "huge", [](const std::string& name, at::Tensor& t) {
    if (name == "model.norm.weight") t.fill_(3e38);
  });
  const auto r = test::run_cli({"eval", "--model", huge.string(), "--ppl", sample, "--seqlen", "64", "--max-windows",
                                "1"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("although every weight in " + huge.string() + " is finite"), std::string::npos) << r.err;
}

// The continuation printed after the prompt is exactly the decode of all ids (SentencePiece's leading-space
// piece at the boundary used to lose its space: "Once upon atime").
TEST(EvalCli, GenerateKeepsTheSpaceBetweenPromptAndContinuation) {
  const auto doc = json_of(test::run_cli(
      {"generate", "--model", stories().string(), "--prompt", "Once upon a", "--max-tokens", "12", "--json"}));
  std::vector<int64_t> all = doc["prompt_ids"].get<std::vector<int64_t>>();
  const auto generated = doc["ids"].get<std::vector<int64_t>>();
  all.insert(all.end(), generated.begin(), generated.end());
  const auto tok = tokenizer::load_tokenizer(stories());
  const std::string expected = tok->decode(all);
  ASSERT_EQ(expected.rfind("Once upon a ", 0), 0u) << expected;
  EXPECT_EQ(doc["text"].get<std::string>(), expected.substr(std::string("Once upon a").size()));
  const auto plain =
      test::run_cli({"generate", "--model", stories().string(), "--prompt", "Once upon a", "--max-tokens", "12"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, expected + "\n");
}

// --max-tokens 0 only tokenizes: a prompt longer than the model's positions is fine then, and nothing runs.
TEST(EvalCli, GenerateWithNoNewTokensOnlyTokenizes) {
  std::string prompt;
  for (int i = 0; i < 300; ++i) prompt += "Once upon a time ";
  const auto doc = json_of(
      test::run_cli({"generate", "--model", stories().string(), "--prompt", prompt, "--max-tokens", "0", "--json"}));
  EXPECT_EQ(doc["prompt_ids"].get<std::vector<int64_t>>(), tokenizer::load_tokenizer(stories())->encode(prompt, true));
  EXPECT_GT(doc["prompt_ids"].size(), 512u);
  EXPECT_TRUE(doc["ids"].empty());
}

// An embedding padded past the tokenizer's vocabulary (as OPT's and Qwen2's are) whose padding wins the argmax: the
// ids without text are reported and left out of the text, and the rest of the output survives.
TEST(EvalCli, GenerateLeavesIdsBeyondTheTokenizerOutOfTheText) {
  test::TempDir tmp;
  const fs::path padded = edited_stories(tmp, "padded", [](const std::string& name, at::Tensor& t) {
    if (name != "model.embed_tokens.weight") return;
    at::Tensor pad = at::zeros({8, t.size(1)}, t.options());
    pad[3] = t[403] * 10;  // id 515 scores ten times "Once", the model's first word after BOS
    t = at::cat({t, pad});
  });
  nlohmann::json config;
  std::ifstream(padded / "config.json") >> config;
  config["vocab_size"] = 520;
  std::ofstream(padded / "config.json") << config.dump(2);
  const auto r = test::run_cli({"generate", "--model", padded.string(), "--max-tokens", "6", "--json"});
  const auto doc = json_of(r);
  const auto ids = doc["ids"].get<std::vector<int64_t>>();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 515);
  std::vector<int64_t> textual = {1};
  for (int64_t id : ids)
    if (id < 512) textual.push_back(id);
  EXPECT_EQ(doc["text"].get<std::string>(), tokenizer::load_tokenizer(stories())->decode(textual));
  EXPECT_NE(r.err.find("beyond the tokenizer's vocabulary of 512 ids"), std::string::npos) << r.err;
}

// A text that is not UTF-8 stops a SentencePiece model too, with an error naming the file.
TEST(EvalCli, InvalidUtf8NamesTheFile) { test::expect_invalid_utf8_names_the_file(stories()); }

// Flag values outside their range are usage errors (exit 2, the flag named); data problems are exit 1.
TEST(EvalCli, FlagValuesOutOfRangeAreUsageErrors) {
  const std::string model = stories().string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"eval", "--model", model, "--seqlen", "-5"}, "--seqlen"},
      {{"eval", "--model", model, "--seqlen", "1"}, "--seqlen"},
      {{"eval", "--model", model, "--max-windows", "-1"}, "--max-windows"},
      {{"eval", "--model", model, "--batch-size", "0"}, "--batch-size"},
      {{"eval", "--model", model, "--batch-size", "-2"}, "--batch-size"},
      {{"eval", "--model", model, "--ppl", ","}, "--ppl"},
      {{"generate", "--model", model, "--max-tokens", "-1"}, "--max-tokens"},
      {{"--threads", "100000", "generate", "--model", model, "--max-tokens", "1"}, "--threads"},
      {{"generate", "--model", model, "--max-tokens", "1", "--threads", "100000"}, "--threads"},
  };
  for (const auto& [args, flag] : cases) {
    const auto r = test::run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// With --json, stdout holds exactly one JSON document for every subcommand (progress, summaries and warnings go to
// stderr), and nothing at all when the command fails.
TEST(EvalCli, JsonStdoutIsOneDocumentForEverySubcommand) {
  test::TempDir tmp;
  const std::string model = stories().string(), problem = (tmp / "p.safetensors").string();
  const std::string calib = (test::committed_data_dir() / "text" / "tinystories" / "tinystories_sample.txt").string();
  const std::vector<std::vector<std::string>> commands = {
      {"make-problem", "--out", problem, "--rows", "8", "--cols", "16", "--tokens", "100", "--json"},
      {"solve-layer", "--problem", problem, "--method", "alps", "--sparsity", "0.5", "--refine", "pcg", "--json"},
      {"inspect", "--model", model, "--json"},
      {"generate", "--model", model, "--prompt", "Once", "--max-tokens", "4", "--json"},
      {"eval", "--model", model, "--ppl", calib, "--seqlen", "64", "--max-windows", "2", "--json"},
      {"prune", "--model", model, "--out", (tmp / "pruned").string(), "--sparsity", "0.5", "--method", "wanda",
       "--calib", calib, "--nsamples", "2", "--seqlen", "32", "--eval", calib, "--eval-seqlen", "64", "--json"},
  };
  for (const auto& args : commands) {
    const auto r = test::run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_NO_THROW((void)nlohmann::json::parse(r.out)) << args[0] << " stdout: " << r.out;
  }
  const auto failed = test::run_cli({"eval", "--model", (tmp / "none").string(), "--json"});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_TRUE(failed.out.empty()) << failed.out;
}

// A config value no model can have is a data error naming the file and the field.
TEST(EvalCli, ConfigValueOutOfRangeIsADataError) {
  test::TempDir tmp;
  fs::copy(fixture("llama_gqa"), tmp / "m");
  nlohmann::json j;
  std::ifstream(tmp / "m" / "config.json") >> j;
  j["rope_parameters"]["rope_theta"] = -1.0;
  std::ofstream(tmp / "m" / "config.json", std::ios::trunc) << j.dump();
  const auto r = test::run_cli({"inspect", "--model", (tmp / "m").string(), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find((tmp / "m" / "config.json").string() +
                             ": rope_parameters.rope_theta must be positive, got -1"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace
}  // namespace alps::eval
