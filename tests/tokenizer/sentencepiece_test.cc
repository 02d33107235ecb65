// SentencePiece tokenizers against Python `sentencepiece` (golden ids from scripts/make_tokenizer_golden.py).
#include "alps/tokenizer/sentencepiece.h"

#include <gtest/gtest.h>

#include "alps/core/error.h"
#include "golden.h"

namespace alps::tokenizer {
namespace {

using test::expect_summary;

std::filesystem::path stories_dir() { return alps::test::committed_data_dir() / "models" / "stories260K-hf"; }
// Meta's licence asks whoever redistributes the file to ship its agreement too: it stays in the optional data
// directory, and the tests that read it skip without it.
std::filesystem::path llama2_model() {
  return alps::test::data_dir() / "tokenizers" / "llama2" / "tokenizer.model";
}

void expect_matches_golden(const Tokenizer& tok, const nlohmann::json& golden) {
  EXPECT_EQ(tok.vocab_size(), golden.at("vocab_size").get<int64_t>());
  EXPECT_EQ(tok.bos_id(), golden.at("bos_id").get<int64_t>());
  EXPECT_EQ(tok.eos_id(), golden.at("eos_id").get<int64_t>());
  const std::string wiki = test::wikitext2_test();
  const auto wiki_ids = tok.encode(wiki, false);
  expect_summary(wiki_ids, golden.at("wikitext2_test"), "WikiText-2 test");
  EXPECT_EQ(tok.decode(wiki_ids), wiki) << "decode(encode(WikiText-2)) != WikiText-2";
  const std::string stories =
      test::read_text(alps::test::committed_data_dir() / "text" / "tinystories" / "tinystories.valid.txt");
  const auto story_ids = tok.encode(stories, false);
  expect_summary(story_ids, golden.at("tinystories_valid"), "TinyStories valid");
  EXPECT_EQ(tok.decode(story_ids), stories);
  const std::string sample =
      test::read_text(alps::test::committed_data_dir() / "text" / "tinystories" / "tinystories_sample.txt");
  EXPECT_EQ(tok.encode(sample, false), golden.at("tinystories_sample").at("ids").get<std::vector<int64_t>>());
  const auto rows = test::wikitext2_rows();
  for (const auto& row : golden.at("rows"))
    EXPECT_EQ(tok.encode(rows.at(row.at("row").get<size_t>()), false), row.at("ids").get<std::vector<int64_t>>())
        << "row " << row.at("row");
  for (const auto& c : golden.at("cases")) {
    const auto text = c.at("text").get<std::string>();
    EXPECT_EQ(tok.encode(text, false), c.at("ids").get<std::vector<int64_t>>()) << "text '" << text << "'";
  }
}

TEST(SentencePiece, Stories260KMatchesPythonSentencepiece) {
  const auto tok = load_tokenizer(stories_dir());
  EXPECT_EQ(tok->kind(), "sentencepiece");
  expect_matches_golden(*tok, test::read_golden("sp_stories260k_golden.json"));
}

TEST(SentencePiece, Llama2MatchesPythonSentencepiece) {
  ALPS_REQUIRE_DATA("tokenizers/llama2/tokenizer.model");
  const auto tok = load_sentencepiece(llama2_model(), {});
  expect_matches_golden(*tok, test::read_golden("sp_llama2_golden.json"));
}

// stories260K's tokenizer_config.json says add_bos_token true, add_eos_token false (LlamaTokenizer's defaults too).
TEST(SentencePiece, BosFromTokenizerConfig) {
  const auto tok = load_tokenizer(stories_dir());
  const auto plain = tok->encode("Once upon a time", false);
  auto expected = plain;
  expected.insert(expected.begin(), 1);
  EXPECT_EQ(tok->encode("Once upon a time", true), expected);
  EXPECT_EQ(tok->decode(expected), "Once upon a time");
  EXPECT_EQ(tok->decode({1, 0, 2}), "");  // <s>, <unk>, </s> are all skipped

  alps::test::TempDir dir;
  std::filesystem::copy_file(stories_dir() / "tokenizer.model", dir / "tokenizer.model");
  std::ofstream(dir / "tokenizer_config.json") << R"({"add_bos_token": false, "add_eos_token": true,
      "bos_token": "<s>", "eos_token": "</s>"})";
  const auto flipped = load_tokenizer(dir.path());
  expected = plain;
  expected.push_back(2);
  EXPECT_EQ(flipped->encode("Once upon a time", true), expected);
}

TEST(SentencePiece, Llama2DefaultsToBosOnly) {
  ALPS_REQUIRE_DATA("tokenizers/llama2/tokenizer.model");
  const auto tok = load_sentencepiece(llama2_model(), {});
  const auto ids = tok->encode("Hello", true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);
  EXPECT_NE(ids.back(), 2);
  EXPECT_THROW(tok->decode({32000}), alps::Error);
}

TEST(SentencePiece, CorruptModelFails) {
  alps::test::TempDir dir;
  std::ofstream(dir / "tokenizer.model") << "this is not a protobuf";
  try {
    load_tokenizer(dir.path());
    FAIL() << "a corrupt tokenizer.model loaded";
  } catch (const alps::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace alps::tokenizer
