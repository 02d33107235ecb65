#include "prune_cli_support.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support.h"

namespace alps::test_prune {

namespace fs = std::filesystem;

fs::path model_dir() { return test::committed_data_dir() / "models/stories260K-hf"; }
std::string calib() {
  return (test::committed_data_dir() / "text/tinystories/tinystories.train.first200.txt").string();
}

fs::path fixture_with_tokenizer(const std::string& fixture, const fs::path& dir) {
  const fs::path out = dir / fixture;
  fs::copy(test::source_dir() / "tests/data/model" / fixture, out);
  for (const char* f : {"tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"})
    fs::copy_file(model_dir() / f, out / f);
  return out;
}

std::vector<std::string> prune_args(const fs::path& out, std::vector<std::string> extra) {
  std::vector<std::string> a = {"prune",      "--model", model_dir().string(), "--out", out.string(), "--calib",
                                calib(),      "--nsamples", "8",   "--seqlen", "128",      "--device", "cpu",
                                "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

nlohmann::json stopped_and_resumed(const fs::path& dir, const std::vector<std::string>& args) {
  std::vector<std::string> stop = args;
  stop.insert(stop.end(), {"--stop-after", "2"});
  EXPECT_EQ(test::run_cli(prune_args(dir / "resumed", stop)).exit_code, 0);
  std::vector<std::string> resume = args;
  resume.push_back("--resume");
  const auto resumed = test::run_cli(prune_args(dir / "resumed", resume));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(test::slurp(dir / "whole/model.safetensors") == test::slurp(dir / "resumed/model.safetensors"));
  return resumed.exit_code == 0 ? nlohmann::json::parse(resumed.out) : nlohmann::json::object();
}

double mean_relative_difference(const nlohmann::json& report, const nlohmann::json& ref) {
  double sum = 0;
  const nlohmann::json& layers = ref.at("layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    const double e = report.at("layers")[i].at("rel_error"), r = layers[i].at("rel_error");
    sum += std::abs(e - r) / r;
  }
  return sum / static_cast<double>(layers.size());
}

}  // namespace alps::test_prune
