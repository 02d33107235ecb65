#pragma once
// Tokenizer interface: every model directory resolves to one implementation (BPE as tokenizer.json or vocab.json +
// merges.txt describe it, or SentencePiece's tokenizer.model), with BOS/EOS behaviour read from the checkpoint's own
// config files.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace alps::tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// Ids of `text`. With `add_special`, the checkpoint's own rule applies (LLaMA prepends <s>; OPT prepends </s>;
  /// GPT-2 adds nothing), exactly as Hugging Face's tokenizer(text) would.
  virtual std::vector<int64_t> encode(std::string_view text, bool add_special = true) const = 0;
  /// Text of `ids`, special tokens skipped.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::optional<int64_t> bos_id() const = 0;
  virtual std::optional<int64_t> eos_id() const = 0;
  /// "sentencepiece", "byte-bpe", "bpe": for logs and reports.
  virtual std::string kind() const = 0;
};

/// Loads the tokenizer of a Hugging Face checkpoint directory: tokenizer.json, vocab.json + merges.txt, or
/// tokenizer.model (in that order of preference unless the config says otherwise), with BOS/EOS rules from
/// tokenizer_config.json / config.json. Throws naming the directory when none is usable.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir);

}  // namespace alps::tokenizer
