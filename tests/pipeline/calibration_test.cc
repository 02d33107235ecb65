#include "alps/pipeline/calibration.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/core/py_random.h"
#include "alps/tokenizer/tokenizer.h"
#include "support.h"

namespace alps::pipeline {
namespace {

nlohmann::json golden() {
  std::ifstream in(test::source_dir() / "tests/data/pipeline/golden.json");
  return nlohmann::json::parse(in);
}

// The toy tokenizer of scripts/make_pipeline_golden.py: BOS (1), then UTF-8 bytes + 3.
class ByteTokenizer : public tokenizer::Tokenizer {
 public:
  std::vector<int64_t> encode(std::string_view text, bool add_special) const override {
    std::vector<int64_t> ids;
    if (add_special) ids.push_back(1);
    for (unsigned char c : text) ids.push_back(static_cast<int64_t>(c) + 3);
    return ids;
  }
  std::string decode(const std::vector<int64_t>&) const override { return ""; }
  int64_t vocab_size() const override { return 259; }
  std::optional<int64_t> bos_id() const override { return 1; }
  std::optional<int64_t> eos_id() const override { return 2; }
  std::string kind() const override { return "bytes"; }
};

TEST(PyRandom, MatchesCPython) {
  const auto g = golden();
  {
    PyRandom r(0);
    for (int64_t v : g["seed0_randint_0_999"]) EXPECT_EQ(r.randint(0, 999), v);
  }
  {
    PyRandom r(0);
    for (int64_t v : g["seed0_randint_0_356316"]) EXPECT_EQ(r.randint(0, 356316), v);
  }
  {
    PyRandom r(12345678901ull);  // a seed wider than 32 bits, and draws wider than 32 bits
    for (int64_t v : g["seed12345678901_randint_5_2_pow_40"]) EXPECT_EQ(r.randint(5, int64_t{1} << 40), v);
  }
  {
    PyRandom r(7);
    for (uint64_t v : g["seed7_getrandbits_1"]) EXPECT_EQ(r.getrandbits(1), v);
  }
}

void expect_windows(const at::Tensor& w, const nlohmann::json& expected) {
  ASSERT_EQ(w.size(0), static_cast<int64_t>(expected["first16"].size()));
  ASSERT_EQ(w.size(1), expected["seqlen"].get<int64_t>());
  for (int64_t s = 0; s < w.size(0); ++s) {
    std::vector<int64_t> first(w[s].data_ptr<int64_t>(), w[s].data_ptr<int64_t>() + 16);
    EXPECT_EQ(first, expected["first16"][s].get<std::vector<int64_t>>()) << "window " << s;
  }
}

TEST(Calibration, DrawsTheSameWindowsAsSparseGptGetC4) {
  const auto g = golden()["c4_byte_windows"];
  const auto docs = read_documents(resolve_calibration_source("c4", test::committed_data_dir()));
  ASSERT_EQ(docs.size(), 1000u);
  CalibrationOptions opt{"c4", g["nsamples"], g["seqlen"], g["seed"]};
  expect_windows(sample_windows(docs, ByteTokenizer(), opt), g);
}

TEST(Calibration, SingleTextDocumentDrawsOnlyWindowStarts) {
  const auto g = golden()["single_doc_byte_windows"];
  const auto docs = read_documents(test::committed_data_dir() / "text/tinystories/tinystories_sample.txt");
  ASSERT_EQ(docs.size(), 1u);
  CalibrationOptions opt{"file", g["nsamples"], g["seqlen"], g["seed"]};
  expect_windows(sample_windows(docs, ByteTokenizer(), opt), g);
}

TEST(Calibration, ReadsJsonArrayGzipAndRejectsBadFiles) {
  test::TempDir dir;
  std::ofstream(dir / "a.json") << R"([{"text": "one"}, {"text": "two"}])";
  EXPECT_EQ(read_documents(dir / "a.json"), (std::vector<std::string>{"one", "two"}));
  std::ofstream(dir / "b.jsonl") << "{\"text\": \"x\"}\n\n{\"text\": \"y\"}\n";
  EXPECT_EQ(read_documents(dir / "b.jsonl").size(), 2u);
  ASSERT_EQ(std::system(("gzip -k " + (dir / "b.jsonl").string()).c_str()), 0);
  EXPECT_EQ(read_documents(dir / "b.jsonl.gz"), read_documents(dir / "b.jsonl"));

  std::ofstream(dir / "bad.jsonl") << "{\"text\": \"x\"}\n{\"txt\": \"y\"}\n";
  const std::string bad = test::error_message([&] { read_documents(dir / "bad.jsonl"); });
  EXPECT_NE(bad.find("record 2 has no string field \"text\""), std::string::npos) << bad;
  std::ofstream(dir / "empty.txt") << "";
  EXPECT_THROW(read_documents(dir / "empty.txt"), Error);
  EXPECT_THROW(read_documents(dir / "missing.txt"), Error);
  EXPECT_THROW(resolve_calibration_source("c4", dir.path()), Error);
  // A directory is named as one, not as a missing file.
  std::filesystem::create_directory(dir / "calib.txt");
  const std::function<void()> read = [&] { read_documents(dir / "calib.txt"); };
  const std::function<void()> resolve = [&] { resolve_calibration_source((dir / "calib.txt").string(), dir.path()); };
  for (const auto& f : {read, resolve}) {
    const std::string message = test::error_message(f);
    EXPECT_NE(message.find("calib.txt is a directory, expected a file"), std::string::npos) << message;
  }
}

TEST(Calibration, FailsClearlyWhenNoDocumentIsLongEnough) {
  CalibrationOptions opt{"x", 2, 100, 0};
  const std::string message = test::error_message([&] { sample_windows({"short", "texts"}, ByteTokenizer(), opt); });
  EXPECT_NE(message.find("longer than seqlen = 100"), std::string::npos) << message;
}

}  // namespace
}  // namespace alps::pipeline
