#pragma once
// The normalizer of a Hugging Face tokenizer.json: text transformations applied before pre-tokenisation (Unicode
// normal forms through ICU, Replace, Prepend, Lowercase, Strip), in the order the file lists them.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace alps::tokenizer {

struct NormalizerStep {
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kReplace, kPrepend, kStrip };
  Kind kind = Kind::kNfc;
  std::string pattern;        ///< kReplace: what to replace (a literal, or a PCRE2 regex when `regex`)
  bool regex = false;
  std::string content;        ///< kReplace: the replacement; kPrepend: the prefix
  bool left = false, right = false;  ///< kStrip: which ends lose their whitespace
};

class Regex;

class Normalizer {
 public:
  /// Compiles the regexes; throws naming `source` for a pattern that does not compile.
  Normalizer(std::vector<NormalizerStep> steps, const std::string& source);
  ~Normalizer();
  Normalizer(Normalizer&&) noexcept;
  Normalizer& operator=(Normalizer&&) noexcept;

  /// `text` (valid UTF-8) after every step.
  std::string apply(std::string_view text) const;
  bool empty() const { return steps_.empty(); }

 private:
  std::vector<NormalizerStep> steps_;
  std::vector<std::unique_ptr<Regex>> regexes_;  // one per step, null unless a regex Replace
};

}  // namespace alps::tokenizer
