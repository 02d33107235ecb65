// Dataset resolution and the perplexity text protocols of docs/pipeline.md (real files under the data directory).
#include "alps/eval/datasets.h"

#include <zlib.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/tokenizer/tokenizer.h"
#include "support.h"
#include "tokenizer/golden.h"

namespace alps::eval {
namespace {

namespace fs = std::filesystem;

// One id per byte, BOS = 256 prepended: makes token counts equal byte counts, independent of the real tokenizers.
class ByteTokenizer : public tokenizer::Tokenizer {
 public:
  std::vector<int64_t> encode(std::string_view text, bool add_special) const override {
    std::vector<int64_t> ids;
    if (add_special) ids.push_back(256);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids) const override { return {}; }
  int64_t vocab_size() const override { return 257; }
  std::optional<int64_t> bos_id() const override { return 256; }
  std::optional<int64_t> eos_id() const override { return std::nullopt; }
  std::string kind() const override { return "bytes"; }
};

fs::path data() { return test::committed_data_dir(); }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Datasets, Wikitext2IsTheJoinedFileAsIs) {
  Dataset d = resolve_dataset("wikitext2", data());
  EXPECT_EQ(d.kind, DatasetKind::kText);
  const std::string text = load_dataset_text(d);
  // Bytes of wikitext-2-raw-v1.test.hf_joined.txt, whose content tests/data/real/SHA256SUMS pins.
  EXPECT_EQ(text.size(), 1'296'370u);
  // The same string as the HF rows joined with "\n\n" (the rows file is an independent form of the data).
  std::ifstream rows(data() / "text" / "wikitext2" / "wikitext-2-raw-v1.test.rows.jsonl");
  std::string line, joined;
  for (bool first = true; std::getline(rows, line); first = false)
    joined += (first ? "" : "\n\n") + nlohmann::json::parse(line).get<std::string>();  // one JSON string per row
  EXPECT_EQ(text, joined);
}

TEST(Datasets, PtbLinesStrippedAndJoinedWithSpaces) {
  const std::string text = load_dataset_text(resolve_dataset("ptb", data()));
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_NE(text.front(), ' ');
  // PTB test has 3761 lines of 78669 words: 78669 words separated by single spaces.
  int64_t words = 0;
  for (size_t i = 0; i < text.size(); ++i) words += text[i] != ' ' && (i == 0 || text[i - 1] == ' ');
  EXPECT_EQ(words, 78669);
  EXPECT_EQ(text.find("  "), std::string::npos);
}

// PTB's literal "<unk>" must reach a LLaMA model as the unknown token's id, as transformers' LlamaTokenizer reads it
// (the perplexity scripts of github.com/IST-DASLab/sparsegpt at commit 147d2159dc4f3e9f73e47b32c04d7b3708f44436, the
// reference protocol, load it); the golden ids are scripts/make_sentencepiece_golden.py's.
TEST(Datasets, PtbReadsAsTransformersLlamaTokenizerReadsIt) {
  const std::string text = load_dataset_text(resolve_dataset("ptb", data()));
  for (const std::string name : {"sp_stories260k", "sp_stories260k_legacy", "sp_llama2", "sp_llama2_nonlegacy"}) {
    SCOPED_TRACE(name);
    const auto golden = tokenizer::test::read_golden(name + "_golden.json");
    test::TempDir dir;
    const auto model_dir = tokenizer::test::sentencepiece_variant_dir(golden, dir);
    if (model_dir.empty()) {
      std::cout << test::note_missing_data(golden.at("model").get<std::string>(), "see ../shared/data/SOURCES.md")
                << "\n";
      continue;
    }
    tokenizer::test::expect_summary(tokenizer::load_tokenizer(model_dir)->encode(text, false), golden.at("ptb_test"),
                                    "PTB test");
  }
}

TEST(Datasets, C4MissingShardIsNamedAndExplicitPathWorks) {
  const std::string missing = test::error_message([] { resolve_dataset("c4", data()); });
  EXPECT_NE(missing.find("c4-validation.00000-of-00008.json"), std::string::npos) << missing;
  const fs::path train = data() / "text" / "c4" / "c4-train.00000-of-01024.first1000.jsonl";
  Dataset d = resolve_dataset("c4=" + train.string(), data());
  EXPECT_EQ(d.kind, DatasetKind::kC4);
  const std::string text = load_dataset_text(d);
  EXPECT_EQ(text.rfind("Beginners BBQ Class Taking Place in Missoula!", 0), 0u);
  // C4: cut to 256 * seqlen tokens after tokenising (BOS included at the front).
  ByteTokenizer tok;
  const std::vector<int64_t> ids = dataset_tokens(d, tok, 16);
  ASSERT_EQ(ids.size(), 256u * 16u);
  EXPECT_EQ(ids[0], 256);
  EXPECT_EQ(ids[1], 'B');
}

TEST(Datasets, JsonlGzAndTextPaths) {
  test::TempDir tmp;
  const std::string docs = "{\"text\": \"alpha beta\"}\n\n{\"text\": \"gamma\", \"url\": \"x\"}\n";
  std::ofstream(tmp / "d.jsonl") << docs;
  gzFile gz = gzopen((tmp / "d.jsonl.gz").c_str(), "wb");
  gzwrite(gz, docs.data(), static_cast<unsigned>(docs.size()));
  gzclose(gz);
  for (const char* name : {"d.jsonl", "d.jsonl.gz"}) {
    Dataset d = resolve_dataset((tmp / name).string(), data());
    EXPECT_EQ(d.kind, DatasetKind::kJsonl);
    EXPECT_EQ(load_dataset_text(d), "alpha beta gamma") << name;
  }
  std::ofstream(tmp / "t.txt") << "line one\n\nline two\n";
  EXPECT_EQ(load_dataset_text(resolve_dataset((tmp / "t.txt").string(), data())), "line one\n\nline two\n");
  ByteTokenizer tok;
  EXPECT_EQ(dataset_tokens(resolve_dataset((tmp / "t.txt").string(), data()), tok, 4).size(), 20u);
}

TEST(Datasets, Errors) {
  test::TempDir tmp;
  std::ofstream(tmp / "empty.txt") << "\n  \n";
  EXPECT_THROW(load_dataset_text(resolve_dataset((tmp / "empty.txt").string(), data())), Error);
  std::ofstream(tmp / "bad.jsonl") << "{\"content\": \"no text field\"}\n";
  EXPECT_THROW(load_dataset_text(resolve_dataset((tmp / "bad.jsonl").string(), data())), Error);
  std::ofstream(tmp / "broken.jsonl") << "{\"text\": \n";
  EXPECT_THROW(load_dataset_text(resolve_dataset((tmp / "broken.jsonl").string(), data())), Error);
  EXPECT_THROW(resolve_dataset("wikitext3", data()), Error);
  EXPECT_THROW(resolve_dataset("wikitext2", tmp.path()), Error);  // data dir without the file
}

// A directory where the text file should be is named as such, for paths and for the named datasets.
TEST(Datasets, DirectoryWhereAFileIsExpected) {
  test::TempDir tmp;
  fs::create_directories(tmp / "text.txt");
  std::string m = test::error_message([&] { resolve_dataset((tmp / "text.txt").string(), data()); });
  EXPECT_NE(m.find("text.txt is a directory, expected a file"), std::string::npos) << m;
  m = test::error_message([&] { resolve_dataset("c4=" + (tmp / "text.txt").string(), data()); });
  EXPECT_NE(m.find("text.txt is a directory, expected a file"), std::string::npos) << m;
  fs::create_directories(tmp / "text" / "ptb" / "ptb.test.txt");
  m = test::error_message([&] { resolve_dataset("ptb", tmp.path()); });
  EXPECT_NE(m.find("ptb.test.txt is a directory, expected a file"), std::string::npos) << m;
}

}  // namespace
}  // namespace alps::eval
