// Byte-level BPE against Hugging Face `tokenizers` (golden ids from scripts/make_tokenizer_golden.py) and against a
// second formulation of BPE (GPT-2's original "merge every occurrence of the best pair" loop).
#include "alps/tokenizer/bpe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <random>

#include "alps/core/error.h"
#include "golden.h"

namespace alps::tokenizer {
namespace {

using test::expect_summary;
using test::read_golden;

std::filesystem::path gpt2_dir() { return alps::test::committed_data_dir() / "tokenizers" / "gpt2"; }
std::filesystem::path llama3_style_dir() {
  return alps::test::source_dir() / "tests" / "data" / "tokenizer" / "llama3_style";
}

void write_file(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
}

// Every row and edge case of a golden file, id for id.
void expect_rows_and_cases(const Tokenizer& tok, const nlohmann::json& golden) {
  const bool add_special = golden.at("add_special").get<bool>();
  const auto rows = test::wikitext2_rows();
  for (const auto& row : golden.at("rows")) {
    const auto& text = rows.at(row.at("row").get<size_t>());
    EXPECT_EQ(tok.encode(text, add_special), row.at("ids").get<std::vector<int64_t>>()) << "row " << row.at("row");
  }
  for (const auto& c : golden.at("cases")) {
    const auto text = c.at("text").get<std::string>();
    const auto ids = tok.encode(text, add_special);
    EXPECT_EQ(ids, c.at("ids").get<std::vector<int64_t>>()) << "text '" << text << "'";
  }
}

void expect_wikitext(const Tokenizer& tok, const nlohmann::json& golden, const std::string& what) {
  const std::string text = test::wikitext2_test();
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok.encode(text, golden.at("add_special").get<bool>());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ timing   ] %s: %zu bytes -> %zu ids in %.3f s\n", what.c_str(), text.size(), ids.size(), seconds);
  expect_summary(ids, golden.at("wikitext2_test"), what + " WikiText-2 test");
  EXPECT_EQ(tok.decode(ids), text) << what << ": decode(encode(x)) != x";
}

TEST(ByteBpe, Gpt2MatchesTokenizersOnWikiText2) {
  const auto tok = load_tokenizer(gpt2_dir());
  EXPECT_EQ(tok->kind(), "byte-bpe");
  EXPECT_EQ(tok->vocab_size(), 50257);
  expect_wikitext(*tok, read_golden("gpt2_golden.json"), "gpt2 vocab.json+merges.txt");
}

TEST(ByteBpe, Gpt2MatchesTokenizersOnRowsAndEdgeCases) {
  const auto tok = load_tokenizer(gpt2_dir());
  expect_rows_and_cases(*tok, read_golden("gpt2_golden.json"));
}

TEST(ByteBpe, Gpt2AddsNothingAndTreatsEndOfTextAsSpecial) {
  const auto tok = load_tokenizer(gpt2_dir());
  EXPECT_EQ(tok->bos_id(), 50256);
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_EQ(tok->encode("Hello world", true), tok->encode("Hello world", false));
  const auto ids = tok->encode("a<|endoftext|>b", false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 50256);
  EXPECT_EQ(tok->decode(ids), "ab");
}

// tokenizer.json written from GPT-2's tables with merges in the "a b" string form (the committed LLaMA-3-style file
// uses the ["a", "b"] pair form); must give exactly the vocab.json + merges.txt ids.
TEST(ByteBpe, Gpt2TokenizerJsonWithStringMerges) {
  nlohmann::json model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                          {"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""}, {"fuse_unk", false},
                          {"byte_fallback", false}};
  model["vocab"] = nlohmann::json::parse(test::read_text(gpt2_dir() / "vocab.json"));
  std::istringstream merges(test::read_text(gpt2_dir() / "merges.txt"));
  model["merges"] = nlohmann::json::array();
  for (std::string line; std::getline(merges, line);)
    if (!line.empty() && line.rfind("#version", 0) != 0) model["merges"].push_back(line);
  const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                                     {"use_regex", true}};
  const nlohmann::json doc = {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"normalizer", nullptr},
      {"added_tokens", {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}, {"lstrip", false},
                         {"rstrip", false}, {"normalized", false}, {"single_word", false}}}},
      {"pre_tokenizer", byte_level}, {"post_processor", byte_level}, {"decoder", byte_level}, {"model", model}};
  alps::test::TempDir dir;
  write_file(dir / "tokenizer.json", doc.dump());
  const auto tok = load_tokenizer(dir.path());
  const auto golden = read_golden("gpt2_golden.json");
  expect_wikitext(*tok, golden, "gpt2 tokenizer.json");
  expect_rows_and_cases(*tok, golden);
}

TEST(ByteBpe, Llama3StyleTokenizerJsonMatchesTokenizers) {
  const auto tok = load_tokenizer(llama3_style_dir());
  EXPECT_EQ(tok->kind(), "byte-bpe");
  const auto golden = read_golden("llama3_style_golden.json");
  expect_wikitext(*tok, golden, "llama3-style tokenizer.json");
  expect_rows_and_cases(*tok, golden);
}

TEST(ByteBpe, Llama3StylePrependsBeginOfTextViaTemplate) {
  const auto tok = load_tokenizer(llama3_style_dir());
  const auto json = nlohmann::json::parse(test::read_text(llama3_style_dir() / "tokenizer.json"));
  int64_t begin_of_text = -1, end_of_text = -1;
  for (const auto& a : json.at("added_tokens")) {
    if (a.at("content") == "<|begin_of_text|>") begin_of_text = a.at("id");
    if (a.at("content") == "<|end_of_text|>") end_of_text = a.at("id");
  }
  EXPECT_EQ(tok->bos_id(), begin_of_text);
  EXPECT_EQ(tok->eos_id(), end_of_text);
  const auto plain = tok->encode("Once upon a time", false);
  auto expected = plain;
  expected.insert(expected.begin(), begin_of_text);
  EXPECT_EQ(tok->encode("Once upon a time", true), expected);
  EXPECT_EQ(tok->decode(tok->encode("Once upon a time<|end_of_text|>", true)), "Once upon a time");
}

// ignore_merges on a vocabulary where the merges cannot build the token "abc": both settings against tokenizers.
TEST(ByteBpe, IgnoreMergesMatchesTokenizers) {
  const auto golden = read_golden("ignore_merges_golden.json");
  const auto texts = golden.at("texts").get<std::vector<std::string>>();
  for (const auto& [json_key, ids_key] : {std::pair<std::string, std::string>{"tokenizer_json", "ids"},
                                          {"tokenizer_json_ignore_merges", "ids_ignore_merges"}}) {
    alps::test::TempDir dir;
    write_file(dir / "tokenizer.json", golden.at(json_key).dump());
    const auto tok = load_tokenizer(dir.path());
    const auto expected = golden.at(ids_key).get<std::vector<std::vector<int64_t>>>();
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_EQ(tok->encode(texts[i], true), expected[i]) << json_key << ", text '" << texts[i] << "'";
      EXPECT_EQ(tok->decode(expected[i]), texts[i]);
    }
  }
}

// lstrip / rstrip / single_word around Unicode white space and word characters, and a rejected single_word match
// (which hides the shorter token inside it), against tokenizers.
TEST(ByteBpe, AddedTokenFlagsMatchTokenizers) {
  const auto golden = read_golden("added_token_flags_golden.json");
  alps::test::TempDir dir;
  write_file(dir / "tokenizer.json", golden.at("tokenizer_json").dump());
  const auto tok = load_tokenizer(dir.path());
  const auto texts = golden.at("texts").get<std::vector<std::string>>();
  const auto expected = golden.at("ids").get<std::vector<std::vector<int64_t>>>();
  for (size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(tok->encode(texts[i], true), expected[i]) << "text '" << texts[i] << "'";
  const auto& random = golden.at("random");
  const auto random_texts = random.at("texts").get<std::vector<std::string>>();
  const size_t chunk = random.at("chunk").get<size_t>();
  for (size_t first = 0, c = 0; first < random_texts.size(); first += chunk, ++c) {
    std::vector<int64_t> flat;
    for (size_t i = first; i < std::min(random_texts.size(), first + chunk); ++i) {
      const auto ids = tok->encode(random_texts[i], true);
      flat.insert(flat.end(), ids.begin(), ids.end());
      flat.push_back(-1);
    }
    EXPECT_EQ(test::fnv1a64(flat), random.at("ids_fnv1a64").at(c)) << "random texts " << first << "..";
  }
}

// OPT's rule (facebook/opt-125m tokenizer_config.json: bos "</s>", add_bos_token true) on a vocabulary laid out
// like OPT's: <s>=0, <pad>=1, </s>=2, <unk>=3, then the 256 byte characters.
TEST(ByteBpe, OptConfigPrependsEndOfSentenceId2) {
  alps::test::TempDir dir;
  nlohmann::json vocab = {{"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}};
  // Byte-level characters: printable Latin-1 bytes stand for themselves, the others are U+0100 + n.
  int next = 256, id = 4;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : next++;
    std::string utf8;
    if (cp < 0x80) {
      utf8 += static_cast<char>(cp);
    } else {
      utf8 += static_cast<char>(0xC0 | (cp >> 6));
      utf8 += static_cast<char>(0x80 | (cp & 0x3F));
    }
    vocab[utf8] = id++;
  }
  vocab["hi"] = id++;
  write_file(dir / "vocab.json", vocab.dump());
  write_file(dir / "merges.txt", "#version: 0.2\nh i\n");
  const nlohmann::json added = {{"__type", "AddedToken"}, {"content", "</s>"}, {"lstrip", false},
                                {"normalized", true}, {"rstrip", false}, {"single_word", false}};
  write_file(dir / "tokenizer_config.json",
             nlohmann::json({{"add_bos_token", true}, {"add_prefix_space", false}, {"bos_token", added},
                             {"eos_token", added}, {"unk_token", added}, {"pad_token", "<pad>"}, {"errors", "replace"}})
                 .dump());
  const auto tok = load_tokenizer(dir.path());
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 2);
  const int64_t h_i = vocab["hi"], space = vocab["\xC4\xA0"], x = vocab["x"];
  EXPECT_EQ(tok->encode("hi x", false), (std::vector<int64_t>{h_i, space, x}));
  EXPECT_EQ(tok->encode("hi x", true), (std::vector<int64_t>{2, h_i, space, x}));
  EXPECT_EQ(tok->decode({2, h_i, space, x, 1}), "hi x");
}

// The same rule on GPT-2's real tables, with </s> registered as an added token beyond the vocabulary.
TEST(ByteBpe, OptRuleOnGpt2Tables) {
  alps::test::TempDir dir;
  std::filesystem::copy_file(gpt2_dir() / "vocab.json", dir / "vocab.json");
  std::filesystem::copy_file(gpt2_dir() / "merges.txt", dir / "merges.txt");
  write_file(dir / "tokenizer_config.json", R"({"add_bos_token": true, "bos_token": "</s>", "eos_token": "</s>",
    "added_tokens_decoder": {"50257": {"content": "</s>", "special": true}}})");
  const auto tok = load_tokenizer(dir.path());
  EXPECT_EQ(tok->bos_id(), 50257);
  const std::string text = test::wikitext2_rows().at(3);
  auto expected = tok->encode(text, false);
  expected.insert(expected.begin(), 50257);
  EXPECT_EQ(tok->encode(text, true), expected);
  EXPECT_EQ(tok->decode(expected), text);
}

// GPT-2's original bpe(): repeatedly take the lowest-rank adjacent pair and merge all its occurrences left to right.
using Ranks = std::map<std::pair<std::string, std::string>, int>;
std::vector<std::string> reference_bpe(const std::string& word, const Ranks& ranks) {
  std::vector<std::string> symbols;
  for (char c : word) symbols.emplace_back(1, c);
  while (symbols.size() > 1) {
    int best = -1;
    std::pair<std::string, std::string> pair;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = ranks.find({symbols[i], symbols[i + 1]});
      if (it != ranks.end() && (best < 0 || it->second < best)) best = it->second, pair = it->first;
    }
    if (best < 0) break;
    std::vector<std::string> merged;
    for (size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == pair.first && symbols[i + 1] == pair.second) {
        merged.push_back(pair.first + pair.second);
        i += 2;
      } else {
        merged.push_back(symbols[i++]);
      }
    }
    symbols = std::move(merged);
  }
  return symbols;
}

TEST(ByteBpe, MergesAgreeWithOriginalGpt2LoopOnRandomTables) {
  std::mt19937 rng(0);
  for (int table = 0; table < 20; ++table) {
    BpeSpec spec;
    spec.source = "random table " + std::to_string(table);
    std::map<std::string, int64_t> vocab;
    std::vector<std::string> tokens;
    for (char c : std::string("abc")) tokens.emplace_back(1, c), vocab[tokens.back()] = vocab.size();
    std::map<std::pair<std::string, std::string>, int> ranks;
    for (int attempt = 0; attempt < 60; ++attempt) {
      const auto& l = tokens[rng() % tokens.size()];
      const auto& r = tokens[rng() % tokens.size()];
      if (ranks.count({l, r}) || l.size() + r.size() > 8) continue;
      ranks[{l, r}] = static_cast<int>(spec.merges.size());
      spec.merges.emplace_back(l, r);
      if (!vocab.count(l + r)) {
        vocab[l + r] = vocab.size();
        tokens.push_back(l + r);
      }
    }
    spec.vocab.assign(vocab.begin(), vocab.end());
    const auto tok = make_bpe(spec);  // no pre-tokenizer: the whole text is one word
    for (int w = 0; w < 200; ++w) {
      std::string word;
      const int len = 1 + static_cast<int>(rng() % 40);
      for (int i = 0; i < len; ++i) word += "abc"[rng() % 3];
      std::vector<int64_t> expected;
      for (const auto& s : reference_bpe(word, ranks)) expected.push_back(vocab.at(s));
      ASSERT_EQ(tok->encode(word, false), expected) << spec.source << ", word " << word;
    }
  }
}

TEST(ByteBpe, LongWordIsNotQuadratic) {
  const auto tok = load_tokenizer(gpt2_dir());
  const std::string word(200000, 'a');
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok->encode(word, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(tok->decode(ids), word);
  EXPECT_LT(seconds, 5.0) << "200k-byte word took " << seconds << " s";
}

TEST(ByteBpe, RejectsInvalidUtf8AndUnknownIds) {
  const auto tok = load_tokenizer(gpt2_dir());
  EXPECT_THROW(tok->encode(std::string("ok \xC3\x28 bad"), false), alps::Error);
  EXPECT_THROW(tok->encode(std::string("\xED\xA0\x80"), false), alps::Error);  // a UTF-16 surrogate
  EXPECT_THROW(tok->decode({50257}), alps::Error);
  EXPECT_THROW(tok->decode({-1}), alps::Error);
}

TEST(ByteBpe, CorruptFilesGiveErrorsNamingThem) {
  alps::test::TempDir dir;
  const auto vocab = dir / "vocab.json", merges = dir / "merges.txt", json = dir / "tokenizer.json";
  write_file(vocab, R"({"a": 0, "b": 1, "ab": 2)");  // truncated JSON
  write_file(merges, "#version: 0.2\na b\n");
  EXPECT_NE(alps::test::error_message([&] { read_vocab_merges(vocab, merges, {}); }).find("vocab.json: not valid JSON"),
            std::string::npos);
  write_file(vocab, R"({"a": 0, "b": "one"})");
  EXPECT_NE(alps::test::error_message([&] { read_vocab_merges(vocab, merges, {}); }).find("must be an integer"),
            std::string::npos);
  write_file(vocab, R"({"a": 0, "b": 1, "ab": 2})");
  write_file(merges, "#version: 0.2\na b c\n");
  auto message = alps::test::error_message([&] { read_vocab_merges(vocab, merges, {}); });
  EXPECT_NE(message.find("merges.txt line 2"), std::string::npos) << message;
  write_file(merges, "a x\n");
  message = alps::test::error_message([&] { make_bpe(read_vocab_merges(vocab, merges, {})); });
  EXPECT_NE(message.find("not in the vocabulary"), std::string::npos) << message;

  write_file(json, R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [)");
  EXPECT_NE(alps::test::error_message([&] { read_tokenizer_json(json, {}); }).find("tokenizer.json: not valid JSON"),
            std::string::npos);
  write_file(json, R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  message = alps::test::error_message([&] { read_tokenizer_json(json, {}); });
  EXPECT_NE(message.find("unsupported model type 'WordPiece'"), std::string::npos) << message;
  write_file(json, R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a"]]}})");
  message = alps::test::error_message([&] { read_tokenizer_json(json, {}); });
  EXPECT_NE(message.find("model.merges[0]"), std::string::npos) << message;
  write_file(json, R"({"model": {"type": "BPE", "vocab": {"a": 0}}})");
  message = alps::test::error_message([&] { read_tokenizer_json(json, {}); });
  EXPECT_NE(message.find("malformed tokenizer.json"), std::string::npos) << message;
  EXPECT_NE(message.find(json.string()), std::string::npos) << message;
  write_file(json, R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}})");
  message = alps::test::error_message([&] { make_bpe(read_tokenizer_json(json, {})); });
  EXPECT_NE(message.find("does not compile"), std::string::npos) << message;
}

}  // namespace
}  // namespace alps::tokenizer
