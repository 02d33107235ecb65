#pragma once
// The special-token rules of a checkpoint, read from tokenizer_config.json, special_tokens_map.json and
// config.json: which strings are BOS/EOS/UNK/PAD, whether encode() adds BOS/EOS, and the added tokens.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace alps::tokenizer {

/// A token matched literally in the input before pre-tokenisation (Hugging Face "added token").
struct AddedToken {
  std::string content;
  int64_t id = -1;
  bool special = true;       ///< skipped by decode()
  bool lstrip = false;       ///< the match absorbs whitespace on its left
  bool rstrip = false;       ///< the match absorbs whitespace on its right
  bool single_word = false;  ///< only matches when not inside a word
  bool normalized = false;   ///< matched in the normalized text rather than the raw input
};

struct SpecialTokenConfig {
  std::optional<std::string> bos_token;  ///< tokenizer_config.json, else special_tokens_map.json
  std::optional<std::string> eos_token;
  std::optional<std::string> unk_token;
  std::optional<std::string> pad_token;
  std::optional<int64_t> bos_token_id;  ///< config.json (fallback when the token string is unknown)
  std::optional<int64_t> eos_token_id;  ///< config.json (first entry when it is a list)
  std::optional<bool> add_bos_token;    ///< unset: the tokenizer family's default
  std::optional<bool> add_eos_token;
  std::optional<bool> add_prefix_space;
  std::optional<bool> legacy;                        ///< LlamaTokenizer's "legacy" (unset and null: true)
  std::vector<std::string> additional_special_tokens;  ///< special besides BOS/EOS/UNK/PAD
  std::string tokenizer_class;           ///< e.g. "LlamaTokenizer", "GPT2Tokenizer"; empty when absent
  std::vector<AddedToken> added_tokens;  ///< tokenizer_config.json "added_tokens_decoder"
};

/// Reads the three optional files of `model_dir`; a file that exists but is not valid JSON throws naming it.
SpecialTokenConfig read_special_token_config(const std::filesystem::path& model_dir);

}  // namespace alps::tokenizer
