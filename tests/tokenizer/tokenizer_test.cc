// load_tokenizer: which implementation a checkpoint directory resolves to, and errors naming the directory.
#include "alps/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>

#include "alps/core/error.h"
#include "alps/tokenizer/special_tokens.h"
#include "support.h"

namespace alps::tokenizer {
namespace {

std::string load_error(const std::filesystem::path& dir) {
  return alps::test::error_message([&] { load_tokenizer(dir); });
}

TEST(LoadTokenizer, MissingDirectoryOrFilesNameTheDirectory) {
  alps::test::TempDir dir;
  auto message = load_error(dir / "nope");
  EXPECT_NE(message.find((dir / "nope").string()), std::string::npos) << message;
  std::ofstream(dir / "config.json") << R"({"model_type": "llama"})";
  std::ofstream(dir / "vocab.json") << "{}";  // vocab.json without merges.txt is not a tokenizer
  message = load_error(dir.path());
  EXPECT_NE(message.find("no tokenizer in " + dir.path().string()), std::string::npos) << message;
}

TEST(LoadTokenizer, CorruptConfigNamesTheFile) {
  alps::test::TempDir dir;
  std::ofstream(dir / "tokenizer_config.json") << "{\"add_bos_token\": tru";
  const auto message = load_error(dir.path());
  EXPECT_NE(message.find("tokenizer_config.json: not valid JSON"), std::string::npos) << message;
}

// Each tokenizer file replaced by a directory is named as such (a directory read as a stream is just empty: a
// merges.txt directory used to give a tokenizer without merges).
TEST(LoadTokenizer, DirectoryWhereAFileIsExpected) {
  namespace fs = std::filesystem;
  const fs::path gpt2 = alps::test::committed_data_dir() / "tokenizers" / "gpt2";
  for (const char* file : {"tokenizer.model", "tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json"}) {
    alps::test::TempDir dir;
    fs::copy_file(gpt2 / "vocab.json", dir / "vocab.json");
    fs::copy_file(gpt2 / "merges.txt", dir / "merges.txt");
    if (std::string(file) == "tokenizer.model") {  // a SentencePiece-only directory
      fs::remove(dir / "vocab.json");
      fs::remove(dir / "merges.txt");
    }
    fs::remove(dir / file);
    fs::create_directory(dir / file);
    const auto message = load_error(dir.path());
    EXPECT_NE(message.find((dir / file).string() + " is a directory, expected a file"), std::string::npos)
        << file << ": " << message;
  }
}

// tokenizer.json is preferred (as transformers' fast tokenizers do), except when its model is not BPE and the
// SentencePiece model it was converted from lies next to it, or the config names the slow LlamaTokenizer.
TEST(LoadTokenizer, TokenizerJsonUnlessItsModelIsNotBpe) {
  alps::test::TempDir dir;
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})";
  auto message = load_error(dir.path());
  EXPECT_NE(message.find("unsupported model type 'Unigram'"), std::string::npos) << message;
  EXPECT_NE(message.find((dir / "tokenizer.json").string()), std::string::npos) << message;
  std::filesystem::copy_file(alps::test::committed_data_dir() / "models" / "stories260K-hf" / "tokenizer.model",
                             dir / "tokenizer.model");
  EXPECT_EQ(load_tokenizer(dir.path())->kind(), "sentencepiece");

  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "BPE", "byte_fallback": true,
      "vocab": {"<unk>": 0, "a": 1}, "merges": []}, "pre_tokenizer": {"type": "Metaspace"},
      "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]}})";
  EXPECT_EQ(load_tokenizer(dir.path())->kind(), "bpe");
  std::ofstream(dir / "tokenizer_config.json") << R"({"tokenizer_class": "LlamaTokenizer"})";
  EXPECT_EQ(load_tokenizer(dir.path())->kind(), "sentencepiece");
}

TEST(LoadTokenizer, ReadsSpecialTokenConfigFromAllThreeFiles) {
  alps::test::TempDir dir;
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": {"content": "<s>", "__type": "AddedToken"},
      "add_bos_token": false, "tokenizer_class": "LlamaTokenizer",
      "added_tokens_decoder": {"7": {"content": "<x>", "special": true, "lstrip": true}}})";
  std::ofstream(dir / "special_tokens_map.json") << R"({"bos_token": "<ignored>", "eos_token": "</s>"})";
  std::ofstream(dir / "config.json") << R"({"bos_token_id": 1, "eos_token_id": [128001, 128009]})";
  const auto config = read_special_token_config(dir.path());
  EXPECT_EQ(config.bos_token, "<s>");
  EXPECT_EQ(config.eos_token, "</s>");
  EXPECT_EQ(config.add_bos_token, false);
  EXPECT_FALSE(config.add_eos_token.has_value());
  EXPECT_EQ(config.bos_token_id, 1);
  EXPECT_EQ(config.eos_token_id, 128001);
  EXPECT_EQ(config.tokenizer_class, "LlamaTokenizer");
  ASSERT_EQ(config.added_tokens.size(), 1u);
  EXPECT_EQ(config.added_tokens[0].id, 7);
  EXPECT_TRUE(config.added_tokens[0].lstrip);
}

}  // namespace
}  // namespace alps::tokenizer
