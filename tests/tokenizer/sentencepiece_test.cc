// SentencePiece tokenizers against transformers' LlamaTokenizer (golden ids from scripts/make_sentencepiece_golden.py).
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

// Everything a variant's golden file holds (PTB is checked where the evaluation builds its text, datasets_test.cc).
void expect_matches_golden(const std::string& name) {
  const auto golden = test::read_golden(name + "_golden.json");
  alps::test::TempDir dir;
  const auto model_dir = test::sentencepiece_variant_dir(golden, dir);
  if (model_dir.empty())
    GTEST_SKIP() << alps::test::note_missing_data(golden.at("model").get<std::string>(),
                                                  "see ../shared/data/SOURCES.md");
  const auto tok = load_tokenizer(model_dir);
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->vocab_size(), golden.at("vocab_size").get<int64_t>());
  EXPECT_EQ(tok->bos_id(), golden.at("bos_id").get<int64_t>());
  EXPECT_EQ(tok->eos_id(), golden.at("eos_id").get<int64_t>());
  const auto& with_special = golden.at("with_special");
  EXPECT_EQ(tok->encode(with_special.at("text").get<std::string>(), true),
            with_special.at("ids").get<std::vector<int64_t>>());
  expect_summary(tok->encode(test::wikitext2_test(), false), golden.at("wikitext2_test"), "WikiText-2 test");
  const std::string stories =
      test::read_text(alps::test::committed_data_dir() / "text" / "tinystories" / "tinystories.valid.txt");
  const auto story_ids = tok->encode(stories, false);
  expect_summary(story_ids, golden.at("tinystories_valid"), "TinyStories valid");
  EXPECT_EQ(test::fnv1a64_text({tok->decode(story_ids)}), golden.at("tinystories_valid_decoded_fnv1a64"))
      << "decoded TinyStories valid";
  const std::string sample =
      test::read_text(alps::test::committed_data_dir() / "text" / "tinystories" / "tinystories_sample.txt");
  EXPECT_EQ(tok->encode(sample, false), golden.at("tinystories_sample").at("ids").get<std::vector<int64_t>>());
  const auto rows = test::wikitext2_rows();
  for (const auto& row : golden.at("rows"))
    EXPECT_EQ(tok->encode(rows.at(row.at("row").get<size_t>()), false), row.at("ids").get<std::vector<int64_t>>())
        << "row " << row.at("row");
  const auto& random = golden.at("random");
  const auto texts =
      test::read_golden(random.at("texts").get<std::string>()).at("texts").get<std::vector<std::string>>();
  const size_t chunk = random.at("chunk").get<size_t>();
  for (size_t first = 0, c = 0; first < texts.size(); first += chunk, ++c) {
    std::vector<int64_t> flat;
    std::vector<std::string> decoded;
    for (size_t i = first; i < std::min(texts.size(), first + chunk); ++i) {
      const auto ids = tok->encode(texts[i], false);
      flat.insert(flat.end(), ids.begin(), ids.end());
      flat.push_back(-1);
      decoded.push_back(tok->decode(ids));
    }
    EXPECT_EQ(test::fnv1a64(flat), random.at("ids_fnv1a64").at(c)) << "random texts " << first << "..";
    EXPECT_EQ(test::fnv1a64_text(decoded), random.at("decoded_fnv1a64").at(c))
        << "decoded random texts " << first << "..";
  }
  for (const auto& c : golden.at("cases")) {
    const auto text = c.at("text").get<std::string>();
    const auto ids = c.at("ids").get<std::vector<int64_t>>();
    EXPECT_EQ(tok->encode(text, false), ids) << "text '" << text << "'";
    EXPECT_EQ(tok->decode(ids), c.at("decoded").get<std::string>()) << "decoding the ids of '" << text << "'";
  }
}

// transformers' LlamaTokenizer as each checkpoint configures it: stories260K says legacy: false, the bare LLaMA-2
// tokenizer.model gets the legacy default; each is also checked the other way, and with added tokens whose flags
// change where text is cut.
TEST(SentencePiece, Stories260KMatchesTransformers) { expect_matches_golden("sp_stories260k"); }
TEST(SentencePiece, Stories260KLegacyMatchesTransformers) { expect_matches_golden("sp_stories260k_legacy"); }
TEST(SentencePiece, NoPrefixSpaceMatchesTransformers) { expect_matches_golden("sp_stories260k_no_prefix_space"); }
TEST(SentencePiece, AddedTokensMatchTransformers) { expect_matches_golden("sp_stories260k_added"); }
TEST(SentencePiece, AddedTokensLegacyMatchTransformers) { expect_matches_golden("sp_stories260k_added_legacy"); }
TEST(SentencePiece, Llama2MatchesTransformers) { expect_matches_golden("sp_llama2"); }
TEST(SentencePiece, Llama2NonLegacyMatchesTransformers) { expect_matches_golden("sp_llama2_nonlegacy"); }

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
