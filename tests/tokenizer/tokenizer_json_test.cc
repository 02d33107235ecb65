// tokenizer.json pipelines against Hugging Face `tokenizers` (goldens from scripts/make_tokenizer_golden.py): one
// small tokenizer.json per family with that family's normalizer, pre-tokenizer, model options and decoder, each
// id-exact on the whole WikiText-2 test text and on every row of it; Unicode normal forms on every code point;
// SmolLM2's real tokenizer where the model is present; errors naming the file and the step.
#include <gtest/gtest.h>
#include <unicode/uchar.h>
#include <unicode/uversion.h>

#include <chrono>
#include <cstring>
#include <fstream>

#include "alps/core/error.h"
#include "alps/core/utf8.h"
#include "alps/tokenizer/bpe.h"
#include "golden.h"

namespace alps::tokenizer {
namespace {

using test::expect_summary;
using test::fnv1a64;
using test::fnv1a64_text;
using test::read_golden;

std::filesystem::path family_dir(const std::string& name) {
  return alps::test::source_dir() / "tests" / "data" / "tokenizer" / name;
}

void expect_matches_golden(const Tokenizer& tok, const nlohmann::json& golden, const std::string& what) {
  const std::string text = test::wikitext2_test();
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok.encode(text, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ timing   ] %s: %zu bytes -> %zu ids in %.3f s\n", what.c_str(), text.size(), ids.size(), seconds);
  expect_summary(ids, golden.at("wikitext2_test"), what + " WikiText-2 test");
  const std::string decoded = tok.decode(ids);
  EXPECT_EQ(fnv1a64_text({decoded}), golden.at("wikitext2_decoded_fnv1a64").get<std::string>())
      << what << ": decode differs from the reference";
  if (golden.at("round_trip").get<bool>()) EXPECT_EQ(decoded, text) << what << ": decode(encode(x)) != x";

  // Every row on its own, hashed in chunks; a failing chunk is narrowed down to its first differing row.
  const auto rows = test::wikitext2_rows();
  for (const auto& chunk : golden.at("row_chunks")) {
    const auto first = chunk.at("first").get<size_t>(), count = chunk.at("rows").get<size_t>();
    std::vector<int64_t> flat;
    for (size_t r = first; r < first + count; ++r) {
      const auto row_ids = tok.encode(rows.at(r), true);
      flat.insert(flat.end(), row_ids.begin(), row_ids.end());
      flat.push_back(-1);
    }
    EXPECT_EQ(fnv1a64(flat), chunk.at("fnv1a64").get<std::string>())
        << what << ": rows " << first << ".." << first + count - 1 << " differ";
  }
  for (const auto& row : golden.at("rows")) {
    const auto& text_row = rows.at(row.at("row").get<size_t>());
    EXPECT_EQ(tok.encode(text_row, true), row.at("ids").get<std::vector<int64_t>>())
        << what << " row " << row.at("row");
  }
  for (const auto& c : golden.at("cases")) {
    const auto text_case = c.at("text").get<std::string>();
    const auto expected = c.at("ids").get<std::vector<int64_t>>();
    EXPECT_EQ(tok.encode(text_case, true), expected) << what << ": text '" << text_case << "'";
    EXPECT_EQ(tok.decode(expected), c.at("decoded").get<std::string>()) << what << ": decode of '" << text_case << "'";
  }
}

class Family : public ::testing::TestWithParam<const char*> {};

TEST_P(Family, MatchesTokenizersOnAllOfWikiText2) {
  const std::string name = GetParam();
  const auto tok = load_tokenizer(family_dir(name));
  expect_matches_golden(*tok, read_golden(name + "_golden.json"), name);
}

INSTANTIATE_TEST_SUITE_P(TokenizerJson, Family,
                         ::testing::Values("llama2_style", "mistral_style", "qwen2_style", "smollm2_style",
                                           "gemma_style", "features_a", "features_b"),
                         [](const auto& info) { return std::string(info.param); });

// What each family's file reads as: the kind, BOS/EOS and whether encode(text, true) adds BOS.
TEST(TokenizerJson, FamiliesSpecialTokens) {
  const auto llama2 = load_tokenizer(family_dir("llama2_style"));
  EXPECT_EQ(llama2->kind(), "bpe");
  EXPECT_EQ(llama2->bos_id(), 1);
  EXPECT_EQ(llama2->eos_id(), 2);
  EXPECT_EQ(llama2->encode("Hello", true).front(), 1);
  const auto qwen2 = load_tokenizer(family_dir("qwen2_style"));
  EXPECT_EQ(qwen2->kind(), "byte-bpe");
  EXPECT_FALSE(qwen2->bos_id().has_value());
  EXPECT_EQ(qwen2->encode("Hello", true), qwen2->encode("Hello", false));
  const auto smollm2 = load_tokenizer(family_dir("smollm2_style"));
  const auto ids = smollm2->encode("<|im_start|>user 2024<|im_end|>", false);
  EXPECT_EQ(ids.front(), smollm2->bos_id());
  EXPECT_EQ(ids.back(), smollm2->eos_id());
  ASSERT_GE(ids.size(), 6u);
  for (size_t k = 0; k < 4; ++k)  // Digits: every digit its own word
    EXPECT_EQ(smollm2->decode({ids[ids.size() - 5 + k]}), std::string(1, "2024"[k]));
  // Gemma: <bos> is id 2 and comes first; no meta space is prepended, so " Hello" and "Hello" differ.
  const auto gemma = load_tokenizer(family_dir("gemma_style"));
  EXPECT_EQ(gemma->bos_id(), 2);
  EXPECT_EQ(gemma->eos_id(), 1);
  EXPECT_EQ(gemma->encode("Hello", true).front(), 2);
  EXPECT_NE(gemma->encode("Hello", false), gemma->encode(" Hello", false));
}

// A 64-bit LCG and the pool of SEQUENCE_POOL: the strings the golden script normalized.
std::vector<std::string> lcg_sequences(const nlohmann::json& spec) {
  std::vector<uint32_t> pool;
  for (const auto& range : spec.at("pool"))
    for (uint32_t cp = range.at(0).get<uint32_t>(); cp <= range.at(1).get<uint32_t>(); ++cp) pool.push_back(cp);
  uint64_t x = 0x2545F4914F6CDD1Dull;
  auto step = [&] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  std::vector<std::string> out;
  const auto count = spec.at("count").get<size_t>(), max_length = spec.at("max_length").get<uint64_t>();
  for (size_t i = 0; i < count; ++i) {
    const uint64_t length = 1 + step() % max_length;
    std::string s;
    for (uint64_t k = 0; k < length; ++k) {
      const uint32_t cp = pool[step() % pool.size()];
      append_utf8(s, cp);  // the pool has no surrogates
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string utf8_of(uint32_t cp) { return lcg_sequences({{"pool", {{cp, cp}}}, {"count", 1}, {"max_length", 1}})[0]; }

// Whether `cp` was assigned by Unicode `version` ("14.0.0"): what Python's unicodedata of that version calls
// anything but Cn.
bool assigned_by(uint32_t cp, const std::string& version) {
  UVersionInfo age, limit;
  u_charAge(static_cast<UChar32>(cp), age);
  u_versionFromString(limit, version.c_str());
  return u_charType(static_cast<UChar32>(cp)) != U_UNASSIGNED && std::memcmp(age, limit, sizeof(age)) <= 0;
}

class NormalForm : public ::testing::TestWithParam<const char*> {};

// Every code point on its own and the LCG sequences, as tokenizers normalizes them. Lowercase is compared on the
// characters of the Unicode version of the script's Python, since ICU 72's data (15.0) lacks the lowercase mappings
// that Unicode 16.0 added and Rust's standard library has.
TEST_P(NormalForm, MatchesTokenizersOnEveryCodePoint) {
  using Kind = NormalizerStep::Kind;
  const std::string name = GetParam();
  const auto golden = read_golden("unicode_golden.json");
  const auto& form = golden.at("forms").at(name);
  NormalizerStep step;
  step.kind = name == "NFC"    ? Kind::kNfc
              : name == "NFD"  ? Kind::kNfd
              : name == "NFKC" ? Kind::kNfkc
              : name == "NFKD" ? Kind::kNfkd
                               : Kind::kLowercase;
  const Normalizer normalizer({step}, "test");
  const auto block = golden.at("block").get<uint32_t>();
  const auto lowercase_version = golden.at("lowercase_unicode_version").get<std::string>();
  const auto& blocks = form.at("code_point_blocks");
  ASSERT_EQ(blocks.size(), 0x110000u / block);
  int failures = 0;
  for (uint32_t b = 0; b < blocks.size(); ++b) {
    std::vector<std::string> outputs;
    for (uint32_t cp = b * block; cp < (b + 1) * block; ++cp)
      if ((cp < 0xD800 || cp >= 0xE000) && (step.kind != Kind::kLowercase || assigned_by(cp, lowercase_version)))
        outputs.push_back(normalizer.apply(utf8_of(cp)));
    if (fnv1a64_text(outputs) != blocks[b].get<std::string>() && ++failures <= 10)
      ADD_FAILURE() << name << " differs from tokenizers in code points U+" << std::hex << b * block << "..U+"
                    << (b + 1) * block - 1;
  }
  EXPECT_EQ(failures, 0) << name << ": blocks that differ";

  const auto& sequences_spec = golden.at("sequences");
  const auto sequences = lcg_sequences(sequences_spec);
  const auto chunk = sequences_spec.at("chunk").get<size_t>();
  for (size_t i = 0; i < form.at("first_sequences").size(); ++i) {
    const auto& expected = form.at("first_sequences")[i];
    ASSERT_EQ(sequences[i], expected.at("text").get<std::string>()) << "the LCG strings differ from the script's";
    EXPECT_EQ(normalizer.apply(sequences[i]), expected.at("normalized").get<std::string>())
        << name << " sequence " << i;
  }
  for (size_t c = 0; c < form.at("sequence_chunks").size(); ++c) {
    std::vector<std::string> outputs;
    for (size_t i = c * chunk; i < (c + 1) * chunk; ++i) outputs.push_back(normalizer.apply(sequences[i]));
    EXPECT_EQ(fnv1a64_text(outputs), form.at("sequence_chunks")[c].get<std::string>())
        << name << ": sequences " << c * chunk << ".." << (c + 1) * chunk - 1 << " differ";
  }
}

INSTANTIATE_TEST_SUITE_P(TokenizerJson, NormalForm, ::testing::Values("NFC", "NFD", "NFKC", "NFKD", "Lowercase"),
                         [](const auto& info) { return std::string(info.param); });

// SmolLM2's genuine tokenizer.json (Digits then ByteLevel, 17 special tokens), when scripts/get_smollm2.sh has run.
TEST(TokenizerJson, SmolLM2RealTokenizerMatchesTokenizers) {
  ALPS_REQUIRE_SMOLLM2();
  const auto golden = read_golden("smollm2_real_golden.json");
  const auto tok = load_tokenizer(alps::test::smollm2_dir());
  EXPECT_EQ(tok->kind(), "byte-bpe");
  EXPECT_EQ(tok->vocab_size(), 49152);
  EXPECT_EQ(tok->eos_id(), 2);
  expect_matches_golden(*tok, golden, "SmolLM2-135M-Instruct");
}

std::string load_error(const std::string& tokenizer_json) {
  alps::test::TempDir dir;
  std::ofstream(dir / "tokenizer.json") << tokenizer_json;
  const std::string message =
      alps::test::error_message([&] { make_bpe(read_tokenizer_json(dir / "tokenizer.json", {})); });
  EXPECT_NE(message.find((dir / "tokenizer.json").string()), std::string::npos) << message;
  return message;
}

// Every step alps cannot run exactly is refused, naming the file, the section and the type.
// Regexes that match the empty string cut (Split, every behaviour) and replace (Replace normalizer and decoder) at
// each empty match, as tokenizers does, with Oniguruma's rule that an empty match right where the previous match
// ended does not count.
TEST(TokenizerJson, EmptyRegexMatchesMatchTokenizers) {
  const auto golden = read_golden("empty_matches_golden.json");
  nlohmann::json base;
  std::ifstream(family_dir(golden.at("base").get<std::string>())) >> base;
  const auto texts = golden.at("texts").get<std::vector<std::string>>();
  for (const auto& variant : golden.at("variants")) {
    nlohmann::json doc = base;
    std::string step;
    for (const char* key : {"pre_tokenizer", "normalizer", "decoder"}) {
      if (!variant.contains(key)) continue;
      doc[key] = variant[key];
      step = std::string(key) + " " + variant[key].dump();
    }
    alps::test::TempDir dir;
    std::ofstream(dir / "tokenizer.json") << doc.dump();
    const auto tok = load_tokenizer(dir.path());
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto& ids = variant.at("ids").at(i);
      if (ids.is_null()) continue;  // tokenizers' own quirks, not compared (the golden script says which)
      EXPECT_EQ(tok->encode(texts[i], true), ids.get<std::vector<int64_t>>()) << step << ": text '" << texts[i] << "'";
      EXPECT_EQ(tok->decode(ids.get<std::vector<int64_t>>()), variant.at("decoded").at(i).get<std::string>())
          << step << ": decoding text '" << texts[i] << "'";
    }
  }
}

TEST(TokenizerJson, UnsupportedStepsAreErrorsNamingTheStep) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"normalizer": {"type": "Precompiled", "precompiled_charsmap": ""}, )" + model + "}",
       "unsupported normalizer type 'Precompiled'"},
      {R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "BertNormalizer"}]}, )" +
           model + "}",
       "unsupported normalizer type 'BertNormalizer'"},
      {R"({"pre_tokenizer": {"type": "Whitespace"}, )" + model + "}", "unsupported pre_tokenizer type 'Whitespace'"},
      {R"({"pre_tokenizer": {"type": "Split", "pattern": {"String": "x"}, "behavior": "Sideways"}, )" + model + "}",
       "unknown Split behavior 'Sideways'"},
      {R"({"pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "sometimes"}, )" + model + "}",
       "unknown Metaspace prepend_scheme 'sometimes'"},
      {R"({"decoder": {"type": "WordPiece", "prefix": "##"}, )" + model + "}", "unsupported decoder type 'WordPiece'"},
      {R"({"post_processor": {"type": "Custom"}, )" + model + "}", "unsupported post_processor type 'Custom'"},
      {R"({"model": {"type": "WordLevel", "vocab": {"a": 0}}})", "unsupported model type 'WordLevel'"},
      {R"({"model": {"type": "BPE", "dropout": 0.1, "vocab": {"a": 0}, "merges": []}})", "makes encoding random"},
      {R"({"model": {"type": "BPE", "unk_token": "<unk>", "vocab": {"a": 0}, "merges": []}})",
       "model.unk_token '<unk>' is not in the vocabulary"},
      {R"({"model": {"type": "BPE", "continuing_subword_prefix": "##", "vocab": {"a": 0}, "merges": []}})",
       "model.continuing_subword_prefix is not supported"},
      {R"({"pre_tokenizer": {"type": "Metaspace", "replacement": "ab"}, )" + model + "}",
       "Metaspace replacement must be one character"},
      {R"({"normalizer": {"type": "Replace", "pattern": {"Regex": "("}, "content": ""}, )" + model + "}",
       "does not compile"},
      {R"({"normalizer": 7, )" + model + "}", "normalizer must be an object or null"},
  };
  for (const auto& [json, expected] : cases) {
    const auto message = load_error(json);
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in: " << message;
  }
}

// Byte fallback, unk and fuse_unk on a vocabulary built here: "é" has byte tokens, "€" only partly (so unk).
TEST(TokenizerJson, ByteFallbackUnkAndFuseUnk) {
  nlohmann::json vocab = {{"<unk>", 0}, {"a", 1}, {"<0xC3>", 2}, {"<0xA9>", 3}, {"<0xE2>", 4}};
  for (bool fuse : {false, true}) {
    BpeSpec spec;
    spec.source = "test";
    for (const auto& [token, id] : vocab.items()) spec.vocab.emplace_back(token, id.get<int64_t>());
    spec.byte_fallback = true;
    spec.fuse_unk = fuse;
    spec.unk_id = 0;
    spec.decoder = {DecoderStep::of(DecoderStep::Kind::kByteFallback), DecoderStep::of(DecoderStep::Kind::kFuse)};
    const auto tok = make_bpe(spec);
    EXPECT_EQ(tok->encode("a\xC3\xA9"
                          "a",
                          false),
              (std::vector<int64_t>{1, 2, 3, 1}));
    const std::vector<int64_t> unks = fuse ? std::vector<int64_t>{1, 0, 1} : std::vector<int64_t>{1, 0, 0, 1};
    EXPECT_EQ(tok->encode("a\xE2\x82\xAC\xE2\x82\xAC"
                          "a",
                          false),
              unks)
        << "fuse_unk " << fuse;
    EXPECT_EQ(tok->decode({1, 2, 3, 1}),
              "a\xC3\xA9"
              "a");
    EXPECT_EQ(tok->decode({2, 1}),
              "\xEF\xBF\xBD"
              "a");  // a lone lead byte decodes to U+FFFD
  }
}

TEST(TokenizerJson, Utf8LossyReplacesMaximalInvalidSubsequences) {
  EXPECT_EQ(utf8_lossy("ok"), "ok");
  EXPECT_EQ(utf8_lossy("\xC3\xA9"), "\xC3\xA9");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_lossy("\xE2\x82"), fffd);  // truncated 3-byte sequence: one replacement
  EXPECT_EQ(utf8_lossy("\xE2\x82"
                       "a"),
            fffd + "a");
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), fffd + fffd);             // overlong lead byte, then a stray continuation byte
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), fffd + fffd + fffd);  // a surrogate: E0..9F is the only valid second byte
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // past U+10FFFF
}

}  // namespace
}  // namespace alps::tokenizer
