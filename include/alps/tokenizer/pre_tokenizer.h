#pragma once
// The pre-tokenizer of a Hugging Face tokenizer.json: how a normalized text is cut into the words that BPE merges
// within. Each step applies to every piece the previous steps produced, as `tokenizers` does.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace alps::tokenizer {

/// GPT-2's pre-tokenisation regex (tokenizers' ByteLevel pre-tokenizer with use_regex).
extern const char kGpt2SplitPattern[];

struct PreTokenizeStep {
  enum class Kind {
    kSplit,        ///< cut at the matches of `pattern` (Split, Digits, ByteLevel's regex)
    kPrefixSpace,  ///< ByteLevel's add_prefix_space: a space before every piece that does not start with one
    kByteLevel,    ///< every byte of the piece becomes its printable stand-in character (GPT-2's byte map)
    kMetaspace,    ///< spaces become `replacement`, which is prepended per `prepend`, then optionally split on
  };
  /// tokenizers' SplitDelimiterBehavior: what happens to the matches.
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
  /// Metaspace's prepend_scheme: `kFirst` only prepends to a piece that starts the original text.
  enum class Prepend { kAlways, kFirst, kNever };
  Kind kind = Kind::kSplit;
  std::string pattern;  ///< kSplit: PCRE2 regex
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;  ///< kSplit: the pieces are the matches' complement
  std::string replacement = "\xE2\x96\x81";  ///< kMetaspace: one character, "▁" by default
  Prepend prepend = Prepend::kAlways;
  bool split = true;  ///< kMetaspace: split before every replacement character

  static PreTokenizeStep of(Kind kind) {
    PreTokenizeStep step;
    step.kind = kind;
    return step;
  }
};

/// A piece of text and whether it begins at offset 0 of the original input (Metaspace's "first" scheme).
struct Piece {
  std::string text;
  bool at_start = false;
};

class Regex;

class PreTokenizer {
 public:
  /// Compiles the regexes; throws naming `source` for a pattern that does not compile.
  PreTokenizer(std::vector<PreTokenizeStep> steps, const std::string& source);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  /// The words of `text` (valid UTF-8); empty pieces are dropped.
  std::vector<Piece> apply(Piece text) const;

 private:
  std::vector<PreTokenizeStep> steps_;
  std::vector<std::unique_ptr<Regex>> regexes_;  // one per step, null unless kSplit or a splitting kMetaspace
};

}  // namespace alps::tokenizer
