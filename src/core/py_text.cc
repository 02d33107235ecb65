#include "alps/core/py_text.h"

#include <unicode/ucasemap.h>
#include <unicode/utypes.h>

#include <memory>

#include "alps/core/error.h"

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
  if (s.empty()) return {};
  // Python titles the first character, whatever it is, and lowers the rest, with the full case mappings and the
  // final-sigma rule: ICU's title casing of the whole string as one word, without moving to the first letter.
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<UCaseMap, decltype(&ucasemap_close)> map(
      ucasemap_open("", U_TITLECASE_WHOLE_STRING | U_TITLECASE_NO_BREAK_ADJUSTMENT, &status), &ucasemap_close);
  ALPS_CHECK(U_SUCCESS(status), "ICU case mapping: ", u_errorName(status));
  std::string out(s.size() * 3 + 16, '\0');  // a character's full mapping is at most 3 characters
  const int32_t n = ucasemap_utf8ToTitle(map.get(), out.data(), static_cast<int32_t>(out.size()), s.data(),
                                         static_cast<int32_t>(s.size()), &status);
  ALPS_CHECK(U_SUCCESS(status), "ICU title casing: ", u_errorName(status));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace alps
