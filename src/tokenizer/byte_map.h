#pragma once
// GPT-2's reversible byte <-> printable character map used by byte-level BPE vocabularies (private).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace alps::tokenizer {

/// UTF-8 of the character that stands for `byte` in a byte-level vocabulary.
const std::string& byte_to_unicode(uint8_t byte);
/// The bytes spelled by a byte-level token, or nullopt when a character is outside the map (tokenizers' ByteLevel
/// decoder then keeps the token's own UTF-8).
std::optional<std::string> byte_level_to_bytes(std::string_view token);

}  // namespace alps::tokenizer
