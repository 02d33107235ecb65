#pragma once
// A compiled PCRE2 pattern in UTF + UCP mode (\s, \p{L}, \p{N} are Unicode-aware, as in Oniguruma, which the
// Hugging Face `tokenizers` library uses). Private to the tokenizer component.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace alps::tokenizer {

class Regex {
 public:
  /// Throws naming `context` (the file and step it comes from), `pattern` and PCRE2's message when it does not
  /// compile.
  explicit Regex(const std::string& pattern, const std::string& context = "");
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  /// Byte ranges [begin, end) of the successive non-overlapping matches in `subject`, empty ones included, as
  /// tokenizers iterates them (none in an empty subject). `subject` must be valid UTF-8 (checked once by the caller,
  /// so PCRE2 does not re-check it at every start offset).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view subject) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so pcre2.h stays in the .cc file
};

/// Byte offset of the first invalid UTF-8 sequence in `text`, or npos when it is valid.
size_t find_invalid_utf8(std::string_view text);

}  // namespace alps::tokenizer
