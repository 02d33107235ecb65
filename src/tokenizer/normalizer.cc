#include "alps/tokenizer/normalizer.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/uniset.h>

#include <memory>

#include "alps/core/error.h"
#include "alps/core/utf8.h"
#include "tokenizer/regex.h"

namespace alps::tokenizer {
namespace {

using Kind = NormalizerStep::Kind;

// tokenizers' normal forms use Unicode 11.0's data: it leaves characters assigned later as they are (they neither
// decompose nor compose). ICU's data is newer, so its normalizers are restricted to the characters of Unicode 11.0,
// which the stability policy keeps normalizing the same way; that is exact on every code point
// (tests/tokenizer/tokenizer_json_test.cc, NormalForm).
const icu::Normalizer2& unicode11_form(Kind kind) {
  struct Forms {
    icu::UnicodeSet unicode11;
    std::unique_ptr<icu::FilteredNormalizer2> nfc, nfd, nfkc, nfkd;
    Forms() {
      UErrorCode status = U_ZERO_ERROR;
      unicode11.applyPattern(icu::UnicodeString(u"[:age=11.0:]"), status);
      unicode11.freeze();
      const icu::Normalizer2* base[] = {icu::Normalizer2::getNFCInstance(status),
                                        icu::Normalizer2::getNFDInstance(status),
                                        icu::Normalizer2::getNFKCInstance(status),
                                        icu::Normalizer2::getNFKDInstance(status)};
      ALPS_CHECK(U_SUCCESS(status), "ICU has no Unicode normalization data: ", u_errorName(status));
      nfc = std::make_unique<icu::FilteredNormalizer2>(*base[0], unicode11);
      nfd = std::make_unique<icu::FilteredNormalizer2>(*base[1], unicode11);
      nfkc = std::make_unique<icu::FilteredNormalizer2>(*base[2], unicode11);
      nfkd = std::make_unique<icu::FilteredNormalizer2>(*base[3], unicode11);
    }
  };
  static const Forms forms;
  return kind == Kind::kNfc    ? *forms.nfc
         : kind == Kind::kNfd  ? *forms.nfd
         : kind == Kind::kNfkc ? *forms.nfkc
                               : *forms.nfkd;
}

std::string normal_form(std::string_view text, Kind kind) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* form = &unicode11_form(kind);
  const icu::UnicodeString source =
      icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  // Most text is already normalized; the quick check spares the copy.
  const int32_t done = form->spanQuickCheckYes(source, status);
  if (U_SUCCESS(status) && done == source.length()) return std::string(text);
  icu::UnicodeString normalized;
  form->normalize(source, normalized, status);
  ALPS_CHECK(U_SUCCESS(status), "Unicode normalization failed: ", u_errorName(status));
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

// tokenizers lowercases character by character with the full (context-free) mapping of each, from the Unicode data
// of Rust's standard library; ICU 72's data is Unicode 15.0, so the few lowercase mappings of characters added
// since (Unicode 16.0) are missing here.
std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t begin = i;
    const uint32_t cp = next_code_point(text, i);
    if (cp < 0x80) {
      out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    } else if (u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_CHANGES_WHEN_LOWERCASED)) {
      icu::UnicodeString(static_cast<UChar32>(cp)).toLower(icu::Locale::getRoot()).toUTF8String(out);
    } else {
      out.append(text.substr(begin, i - begin));
    }
  }
  return out;
}

std::string strip(std::string_view text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left) {
    for (size_t i = 0; i < text.size();) {
      if (!u_isUWhiteSpace(static_cast<UChar32>(next_code_point(text, i)))) break;
      begin = i;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t i = start;
      if (!u_isUWhiteSpace(static_cast<UChar32>(next_code_point(text, i)))) break;
      end = start;
    }
  }
  return std::string(text.substr(begin, end - begin));
}

std::string replace_regex(std::string_view text, const Regex& regex, std::string_view content) {
  std::string out;
  size_t previous = 0;
  for (const auto& [b, e] : regex.find_all(text)) {
    out.append(text.substr(previous, b - previous));
    out.append(content);
    previous = e;
  }
  out.append(text.substr(previous));
  return out;
}

}  // namespace

Normalizer::Normalizer(std::vector<NormalizerStep> steps, const std::string& source) : steps_(std::move(steps)) {
  for (const auto& step : steps_) {
    regexes_.push_back(step.kind == Kind::kReplace && step.regex
                           ? std::make_unique<Regex>(step.pattern, source + ": normalizer Replace")
                           : nullptr);
    ALPS_CHECK(step.kind != Kind::kReplace || !step.pattern.empty(), source,
               ": normalizer Replace with an empty pattern");
  }
}

Normalizer::~Normalizer() = default;
Normalizer::Normalizer(Normalizer&&) noexcept = default;
Normalizer& Normalizer::operator=(Normalizer&&) noexcept = default;

std::string Normalizer::apply(std::string_view input) const {
  std::string text(input);
  for (size_t s = 0; s < steps_.size(); ++s) {
    const auto& step = steps_[s];
    switch (step.kind) {
      case Kind::kNfc:
      case Kind::kNfd:
      case Kind::kNfkc:
      case Kind::kNfkd:
        text = normal_form(text, step.kind);
        break;
      case Kind::kLowercase:
        text = lowercase(text);
        break;
      case Kind::kReplace:
        text = step.regex ? replace_regex(text, *regexes_[s], step.content)
                          : replace_all(text, step.pattern, step.content);
        break;
      case Kind::kPrepend:
        if (!text.empty()) text = step.content + text;  // tokenizers prepends nothing to an empty text
        break;
      case Kind::kStrip:
        text = strip(text, step.left, step.right);
        break;
    }
  }
  return text;
}

}  // namespace alps::tokenizer
