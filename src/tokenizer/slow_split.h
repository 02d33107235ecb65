#pragma once
// How transformers' Python ("slow") tokenizers cut text at added tokens before the model sees it
// (PreTrainedTokenizer.tokenize): the tokens are found leftmost-longest, then each one's flags edit its neighbours
// (lstrip / rstrip trim their whitespace, single_word glues the token to a word it touches, which then is plain text).
// The fast tokenizers' rules differ (the match itself absorbs the whitespace): bpe.cc has those.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "alps/tokenizer/special_tokens.h"

namespace alps::tokenizer {

struct SlowPiece {
  std::string text;      ///< never empty
  int64_t added_id = -1;  ///< the added token's id; -1 for text the model encodes
};

std::vector<SlowPiece> split_at_added_tokens(std::string_view text, const std::vector<AddedToken>& tokens);

}  // namespace alps::tokenizer
