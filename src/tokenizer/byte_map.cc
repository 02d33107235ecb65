#include "tokenizer/byte_map.h"

#include <array>

namespace alps::tokenizer {
namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int, 512> from_codepoint;  // every mapped code point is below U+0200

  ByteMap() {
    from_codepoint.fill(-1);
    // Printable Latin-1 bytes stand for themselves; the rest take U+0100, U+0101, ... in byte order.
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? b : next++;
      append_utf8(to_unicode[b], cp);
      from_codepoint[cp] = static_cast<int>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t byte) { return byte_map().to_unicode[byte]; }

std::string byte_level_to_bytes(std::string_view token) {
  const auto& map = byte_map();
  std::string out;
  size_t i = 0;
  while (i < token.size()) {
    const auto c = static_cast<unsigned char>(token[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
    if (i + len > token.size()) len = token.size() - i;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(token[i + k]) & 0x3F);
    if (cp < map.from_codepoint.size() && map.from_codepoint[cp] >= 0) {
      out += static_cast<char>(map.from_codepoint[cp]);
    } else {
      out.append(token.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace alps::tokenizer
