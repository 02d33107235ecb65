#pragma once
// The decoder of a Hugging Face tokenizer.json: how the strings of a list of tokens become text again. Each step
// maps the list of strings to a new list; the result is their concatenation (as `tokenizers` decodes).
#include <memory>
#include <string>
#include <vector>

namespace alps::tokenizer {

struct DecoderStep {
  enum class Kind {
    kByteLevel,     ///< byte-level characters back to bytes; the whole list becomes one string (invalid UTF-8: U+FFFD)
    kMetaspace,     ///< `replacement` becomes a space, except in the first token unless `prepend_never`
    kReplace,       ///< every occurrence of `pattern` (a literal, or a regex when `regex`) becomes `content`
    kByteFallback,  ///< runs of "<0xAB>" tokens become the UTF-8 text they spell (U+FFFD per byte if invalid)
    kFuse,          ///< the list becomes one string
    kStrip,         ///< up to `start` leading and `stop` trailing `content` characters removed from each token
  };
  Kind kind = Kind::kFuse;
  std::string pattern;
  bool regex = false;
  std::string content;  ///< kReplace: the replacement; kStrip: the character removed
  std::string replacement = "\xE2\x96\x81";  ///< kMetaspace
  bool prepend_never = false;                ///< kMetaspace: prepend_scheme "never" keeps the first token's spaces
  size_t start = 0, stop = 0;                ///< kStrip

  static DecoderStep of(Kind kind) {
    DecoderStep step;
    step.kind = kind;
    return step;
  }
};

class Regex;

class Decoder {
 public:
  /// No steps: tokens are joined with single spaces, as `tokenizers` does without a decoder.
  Decoder(std::vector<DecoderStep> steps, const std::string& source);
  ~Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;

  std::string decode(std::vector<std::string> tokens) const;

 private:
  std::vector<DecoderStep> steps_;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

/// `bytes` as UTF-8 with every maximal invalid subsequence replaced by U+FFFD (Rust's String::from_utf8_lossy).
std::string utf8_lossy(const std::string& bytes);

}  // namespace alps::tokenizer
