#pragma once
// Byte-level BPE (GPT-2, OPT, LLaMA-3): bytes mapped to printable characters, regex pre-tokenisation (PCRE2, UTF
// mode), then rank-ordered merges per pre-token, exactly as Hugging Face `tokenizers` does.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "alps/tokenizer/special_tokens.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::tokenizer {

/// GPT-2's pre-tokenisation regex (tokenizers' ByteLevel pre-tokenizer with use_regex).
extern const char kGpt2SplitPattern[];

/// One pre-tokenisation step, applied to every piece produced by the previous steps.
struct PreTokenizeStep {
  enum class Kind { kSplit, kPrefixSpace };
  /// tokenizers' SplitDelimiterBehavior: what happens to the regex matches.
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
  Kind kind = Kind::kSplit;
  std::string pattern;  ///< PCRE2 regex (kSplit)
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;  ///< the pieces are the matches' complement
};

/// Everything a byte-level BPE needs; the loaders below fill it from files, tests may build one directly.
struct ByteBpeSpec {
  std::vector<std::pair<std::string, int64_t>> vocab;  ///< byte-level token string -> id
  std::vector<std::pair<std::string, std::string>> merges;  ///< in rank order
  std::vector<AddedToken> added_tokens;
  std::vector<PreTokenizeStep> pre_tokenize;
  bool ignore_merges = false;      ///< a pre-token that is itself in the vocab is emitted whole (LLaMA-3)
  std::optional<int64_t> unk_id;   ///< for bytes missing from the vocab (dropped when unset, as tokenizers does)
  std::vector<int64_t> prefix_ids;  ///< prepended by encode(text, true)
  std::vector<int64_t> suffix_ids;  ///< appended by encode(text, true)
  std::optional<int64_t> bos_id;
  std::optional<int64_t> eos_id;
  std::string source;  ///< file(s) it came from, for error messages
};

std::unique_ptr<Tokenizer> make_byte_bpe(ByteBpeSpec spec);

/// GPT-2 / OPT style: vocab.json + merges.txt, special tokens from `config` (GPT2Tokenizer's defaults otherwise:
/// "<|endoftext|>" as BOS/EOS/UNK, nothing added by encode()).
ByteBpeSpec read_byte_bpe_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt,
                                const SpecialTokenConfig& config);

/// Hugging Face tokenizer.json with a byte-level BPE model; throws naming the file for anything unsupported.
ByteBpeSpec read_byte_bpe_tokenizer_json(const std::filesystem::path& tokenizer_json,
                                         const SpecialTokenConfig& config);

/// Whether `tokenizer_json` describes a byte-level BPE (false for SentencePiece-style BPE with byte fallback).
bool is_byte_level_tokenizer_json(const std::filesystem::path& tokenizer_json);

}  // namespace alps::tokenizer
