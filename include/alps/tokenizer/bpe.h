#pragma once
// BPE tokenizers as Hugging Face `tokenizers` runs them: added tokens found first, then normalizer, pre-tokenizer,
// rank-ordered merges per word, post-processor; decoding through the decoder steps. Covers byte-level BPE (GPT-2,
// OPT, LLaMA-3, Qwen2, SmolLM2) and SentencePiece-style BPE over Metaspace with byte fallback (LLaMA-2, Mistral,
// TinyLlama tokenizer.json).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "alps/tokenizer/decoder.h"
#include "alps/tokenizer/normalizer.h"
#include "alps/tokenizer/pre_tokenizer.h"
#include "alps/tokenizer/special_tokens.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::tokenizer {

/// Everything a BPE tokenizer needs; the loaders below fill it from files, tests may build one directly.
struct BpeSpec {
  std::vector<std::pair<std::string, int64_t>> vocab;       ///< token string (as the model sees words) -> id
  std::vector<std::pair<std::string, std::string>> merges;  ///< in rank order
  std::vector<AddedToken> added_tokens;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizeStep> pre_tokenize;
  std::vector<DecoderStep> decoder;  ///< empty: tokens joined with spaces
  bool ignore_merges = false;  ///< a word that is itself in the vocab is emitted whole (LLaMA-3)
  bool byte_fallback = false;  ///< a character missing from the vocab becomes its "<0xAB>" byte tokens
  bool fuse_unk = false;       ///< consecutive unknown characters become one unk id
  std::optional<int64_t> unk_id;  ///< for characters missing from the vocab (dropped when unset, as tokenizers does)
  std::vector<int64_t> prefix_ids;  ///< prepended by encode(text, true)
  std::vector<int64_t> suffix_ids;  ///< appended by encode(text, true)
  std::optional<int64_t> bos_id;
  std::optional<int64_t> eos_id;
  std::string kind = "bpe";  ///< what kind() reports: "byte-bpe" when the words are byte-level
  std::string source;        ///< file(s) it came from, for error messages
};

std::unique_ptr<Tokenizer> make_bpe(BpeSpec spec);

/// GPT-2 / OPT style: vocab.json + merges.txt, special tokens from `config` (GPT2Tokenizer's defaults otherwise:
/// "<|endoftext|>" as BOS/EOS/UNK, nothing added by encode()).
BpeSpec read_vocab_merges(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt,
                          const SpecialTokenConfig& config);

/// A Hugging Face tokenizer.json with a BPE model. Anything it cannot run exactly (another model type, an unknown
/// normalizer, pre-tokenizer, post-processor or decoder, BPE dropout) throws naming the file and the step.
BpeSpec read_tokenizer_json(const std::filesystem::path& tokenizer_json, const SpecialTokenConfig& config);

/// The "type" of tokenizer.json's model ("BPE", "Unigram", ...), empty when absent; throws for invalid JSON.
std::string tokenizer_json_model_type(const std::filesystem::path& tokenizer_json);

}  // namespace alps::tokenizer
