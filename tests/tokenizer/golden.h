#pragma once
// Reading the golden files written by scripts/make_tokenizer_golden.py (tests/data/tokenizer/).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support.h"

namespace alps::tokenizer::test {

inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << file;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline nlohmann::json read_golden(const std::string& name) {
  return nlohmann::json::parse(read_text(alps::test::source_dir() / "tests" / "data" / "tokenizer" / name));
}

inline std::string wikitext2_test() {
  return read_text(alps::test::committed_data_dir() / "text" / "wikitext2" / "wikitext-2-raw-v1.test.hf_joined.txt");
}

/// The 4358 HF rows of the WikiText-2 test split, in order.
inline std::vector<std::string> wikitext2_rows() {
  std::ifstream in(alps::test::committed_data_dir() / "text" / "wikitext2" / "wikitext-2-raw-v1.test.rows.jsonl");
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line).get<std::string>());
  return rows;
}

/// FNV-1a 64 over each id's 8 little-endian bytes: the hash the golden script stores for long texts.
inline std::string fnv1a64(const std::vector<int64_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int64_t id : ids) {
    auto u = static_cast<uint64_t>(id);
    for (int b = 0; b < 8; ++b) {
      h ^= (u >> (8 * b)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

/// FNV-1a 64 over the UTF-8 of each string followed by a 0xFF byte: the golden script's hash of texts.
inline std::string fnv1a64_text(const std::vector<std::string>& strings) {
  uint64_t h = 0xCBF29CE484222325ull;
  auto feed = [&](unsigned char byte) {
    h ^= byte;
    h *= 0x100000001B3ull;
  };
  for (const auto& s : strings) {
    for (unsigned char c : s) feed(c);
    feed(0xFF);
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

/// Index of the first differing id (or the shorter length), for readable failures on long sequences.
inline size_t first_difference(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

/// Count, hash and leading ids of `ids` against a golden {"count", "fnv1a64", "head"} summary.
inline void expect_summary(const std::vector<int64_t>& ids, const nlohmann::json& golden, const std::string& what) {
  const auto head = golden.at("head").get<std::vector<int64_t>>();
  std::vector<int64_t> ours_head(ids.begin(), ids.begin() + std::min(ids.size(), head.size()));
  EXPECT_EQ(ours_head, head) << what << ": first difference at id " << first_difference(ours_head, head);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), golden.at("count").get<int64_t>()) << what;
  EXPECT_EQ(fnv1a64(ids), golden.at("fnv1a64").get<std::string>()) << what << ": ids differ from the reference";
}

/// A model directory for one variant of scripts/make_sentencepiece_golden.py: its tokenizer.model (from the committed
/// data, else the optional data directory) and the tokenizer_config.json it was made with. Empty when the model is
/// not there (the caller skips).
inline std::filesystem::path sentencepiece_variant_dir(const nlohmann::json& golden, const alps::test::TempDir& dir) {
  namespace fs = std::filesystem;
  const auto model = golden.at("model").get<std::string>();
  fs::path source = alps::test::committed_data_dir() / model;
  if (!fs::exists(source)) source = alps::test::data_dir() / model;
  if (!fs::exists(source)) return {};
  fs::copy_file(source, dir / "tokenizer.model");
  if (!golden.at("tokenizer_config").is_null())
    std::ofstream(dir / "tokenizer_config.json") << golden.at("tokenizer_config").dump();
  return dir.path();
}

}  // namespace alps::tokenizer::test
