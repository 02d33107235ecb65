#include "alps/core/py_text.h"

#include <locale.h>
#include <wctype.h>

#include "alps/core/utf8.h"

namespace alps {

namespace {

// Decodes the code point at s[i] and advances i; a malformed sequence yields its first byte.
char32_t code_point_or_byte(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xe ? 3 : (b0 >> 3) == 0x1e ? 4 : 0;
  if (len == 0 || i + len > s.size()) {
    ++i;
    return b0;
  }
  char32_t c = len == 1 ? b0 : b0 & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b >> 6) != 0x2) {
      ++i;
      return b0;
    }
    c = (c << 6) | (b & 0x3f);
  }
  i += len;
  return c;
}

// glibc's C.UTF-8 locale carries the Unicode simple case mappings; created once, never the global locale.
locale_t utf8_locale() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  const locale_t loc = utf8_locale();
  return loc ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), loc)) : c;
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  const locale_t loc = utf8_locale();
  return loc ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc)) : c;
}

}  // namespace

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

size_t py_len(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) code_point_or_byte(s, i);
  return n;
}

std::string_view py_rstrip(std::string_view s) {
  size_t end = 0;  // byte offset just past the last non-space code point
  for (size_t i = 0; i < s.size();) {
    if (!py_isspace(code_point_or_byte(s, i))) end = i;
  }
  return s.substr(0, end);
}

std::string_view py_lstrip(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    if (!py_isspace(code_point_or_byte(s, i))) return s.substr(at);
  }
  return s.substr(s.size());
}

std::string_view py_strip(std::string_view s) { return py_rstrip(py_lstrip(s)); }

std::string py_capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const bool first = i == 0;
    const char32_t c = code_point_or_byte(s, i);
    append_utf8(out, first ? to_upper(c) : to_lower(c));
  }
  return out;
}

}  // namespace alps
