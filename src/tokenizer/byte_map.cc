#include "tokenizer/byte_map.h"

#include <array>

#include "alps/core/utf8.h"

namespace alps::tokenizer {
namespace {

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

std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  const auto& map = byte_map();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    const uint32_t cp = next_code_point(token, i);
    if (cp >= map.from_codepoint.size() || map.from_codepoint[cp] < 0) return std::nullopt;
    out += static_cast<char>(map.from_codepoint[cp]);
  }
  return out;
}

}  // namespace alps::tokenizer
