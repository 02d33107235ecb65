#include "alps/tokenizer/decoder.h"

#include "alps/core/error.h"
#include "alps/core/utf8.h"
#include "tokenizer/byte_map.h"
#include "tokenizer/regex.h"

namespace alps::tokenizer {
namespace {

using Kind = DecoderStep::Kind;

const char kReplacementCharacter[] = "\xEF\xBF\xBD";  // U+FFFD

// "<0xAB>" -> 0xAB, as tokenizers' ByteFallback recognises byte tokens (exactly six bytes, two hex digits).
int byte_token_value(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = token[i];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

bool is_valid_utf8(const std::string& bytes) { return find_invalid_utf8(bytes) == std::string::npos; }

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string pending;
  auto flush = [&] {
    if (pending.empty()) return;
    if (is_valid_utf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending.size(); ++i) out.emplace_back(kReplacementCharacter);
    }
    pending.clear();
  };
  for (auto& token : tokens) {
    if (const int byte = byte_token_value(token); byte >= 0) {
      pending += static_cast<char>(byte);
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  return out;
}

std::string strip_token(const std::string& token, const std::string& content, size_t start, size_t stop) {
  std::vector<std::pair<size_t, size_t>> chars;  // byte range of each character
  for (size_t i = 0; i < token.size();) {
    const size_t begin = i;
    next_code_point(token, i);
    chars.emplace_back(begin, i);
  }
  auto is_content = [&](size_t k) {
    return token.compare(chars[k].first, chars[k].second - chars[k].first, content) == 0;
  };
  size_t first = 0, last = chars.size();
  while (first < chars.size() && first < start && is_content(first)) ++first;
  for (size_t removed = 0; removed < stop && last > first && is_content(last - 1); ++removed) --last;
  if (first >= last) return "";
  return token.substr(chars[first].first, chars[last - 1].second - chars[first].first);
}

}  // namespace

std::string utf8_lossy(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The valid range of the second byte depends on the first (no overlongs, surrogates or code points past
    // U+10FFFF); a maximal valid prefix of a sequence is replaced by one U+FFFD.
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (len == 0) {
      out += kReplacementCharacter;
      ++i;
      continue;
    }
    size_t k = 1;
    for (; k < len && i + k < n; ++k) {
      const unsigned char b = s[i + k];
      if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
    }
    if (k == len) {
      out.append(bytes, i, len);
    } else {
      out += kReplacementCharacter;
    }
    i += k;
  }
  return out;
}

Decoder::Decoder(std::vector<DecoderStep> steps, const std::string& source) : steps_(std::move(steps)) {
  for (const auto& step : steps_) {
    ALPS_CHECK(step.kind != Kind::kReplace || !step.pattern.empty(), source, ": decoder Replace with an empty pattern");
    regexes_.push_back(step.kind == Kind::kReplace && step.regex
                           ? std::make_unique<Regex>(step.pattern, source + ": decoder Replace")
                           : nullptr);
  }
}

Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (steps_.empty()) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  for (size_t s = 0; s < steps_.size(); ++s) {
    const auto& step = steps_[s];
    switch (step.kind) {
      case Kind::kByteLevel: {
        std::string bytes;
        for (const auto& token : tokens) {
          if (auto mapped = byte_level_to_bytes(token)) {
            bytes += *mapped;
          } else {
            bytes += token;
          }
        }
        tokens = {utf8_lossy(bytes)};
        break;
      }
      case Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i)
          tokens[i] = replace_all(tokens[i], step.replacement, i == 0 && !step.prepend_never ? "" : " ");
        break;
      case Kind::kReplace:
        for (auto& token : tokens) {
          if (!step.regex) {
            token = replace_all(token, step.pattern, step.content);
            continue;
          }
          std::string out;
          size_t previous = 0;
          for (const auto& [b, e] : regexes_[s]->find_all(token)) {
            out.append(token, previous, b - previous);
            out += step.content;
            previous = e;
          }
          out.append(token, previous, std::string::npos);
          token = std::move(out);
        }
        break;
      case Kind::kByteFallback:
        tokens = byte_fallback(std::move(tokens));
        break;
      case Kind::kFuse: {
        std::string fused;
        for (const auto& token : tokens) fused += token;
        tokens = {fused};
        break;
      }
      case Kind::kStrip:
        for (auto& token : tokens) token = strip_token(token, step.content, step.start, step.stop);
        break;
    }
  }
  std::string text;
  for (const auto& token : tokens) text += token;
  return text;
}

}  // namespace alps::tokenizer
