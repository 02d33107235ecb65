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

/// The text `generated` adds after `prompt`: the decode of both minus the decode of the prompt, since a piece's text
/// depends on what precedes it (SentencePiece drops the space of a leading "▁" piece: "Once upon" + "a time" alone
/// would read "Once upona time"); the continuation decoded alone where the prompt's decode is not a prefix (a
/// character split across the boundary). Ids beyond the vocabulary (an embedding padded past it, picked by a badly
/// pruned model) have no text: they are left out, with a warning, as transformers' fast tokenizers do.
std::string continuation_text(const Tokenizer& tokenizer, const std::vector<int64_t>& prompt,
                              const std::vector<int64_t>& generated);

}  // namespace alps::tokenizer
