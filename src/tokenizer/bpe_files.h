#pragma once
// What the two BPE readers (vocab.json + merges.txt, tokenizer.json) share: ids from JSON and the special-token
// rules of tokenizer_config.json (private to the tokenizer component).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "alps/tokenizer/bpe.h"

namespace alps::tokenizer {

/// A token id as JSON gives it; throws naming `where` and `what` unless it is an integer that fits int64.
int64_t json_id(const nlohmann::json& v, const std::string& where, const std::string& what);

/// {token: id} as pairs; throws naming `where` for anything else.
std::vector<std::pair<std::string, int64_t>> parse_vocab(const nlohmann::json& j, const std::string& where);

/// The id of `token`: an added token, a vocabulary entry, or (byte-level vocabularies) its byte-level spelling.
std::optional<int64_t> lookup(const BpeSpec& spec, const std::string& token);

/// Registers the config's added tokens and named specials, resolves BOS/EOS; `use_template` also applies
/// add_bos_token / add_eos_token (when the tokenizer has no post-processor of its own).
void apply_special_token_config(BpeSpec& spec, const SpecialTokenConfig& config, bool use_template);

}  // namespace alps::tokenizer
