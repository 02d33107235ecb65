#pragma once
// UTF-8 helpers for code that walks text by code points (tokenizer steps, Python string semantics).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace alps {

/// Length in bytes of the UTF-8 sequence that starts with `lead` (1 for a stray continuation byte).
inline size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 1;
}

/// The code point at `text[i]`; advances `i` past it.
inline uint32_t next_code_point(std::string_view text, size_t& i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  size_t len = utf8_length(lead);
  if (i + len > text.size()) len = text.size() - i;
  uint32_t cp = len == 1 ? lead : len == 2 ? (lead & 0x1F) : len == 3 ? (lead & 0x0F) : (lead & 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  i += len;
  return cp;
}

/// The code point that ends just before `text[i]` (i > 0); moves `i` back to its first byte.
inline uint32_t previous_code_point(std::string_view text, size_t& i) {
  size_t begin = i - 1;
  while (begin > 0 && i - begin < 4 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  size_t at = begin;
  const uint32_t cp = next_code_point(text, at);
  i = begin;
  return cp;
}

inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Replaces every non-overlapping occurrence of `from` (non-empty) in `text`, left to right.
inline std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  size_t start = 0;
  for (size_t at; (at = text.find(from, start)) != std::string_view::npos; start = at + from.size()) {
    out.append(text.substr(start, at - start));
    out.append(to);
  }
  out.append(text.substr(start));
  return out;
}

}  // namespace alps
