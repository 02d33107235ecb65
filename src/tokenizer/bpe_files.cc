// vocab.json + merges.txt (GPT-2, OPT) into a BpeSpec, and the special-token rules both BPE readers share.
#include "tokenizer/bpe_files.h"

#include <fstream>

#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/io/text_files.h"
#include "tokenizer/byte_map.h"

namespace alps::tokenizer {
namespace {

// Named special tokens (BOS/EOS/UNK/PAD) are matched literally in text and skipped by decode, as transformers does
// by registering them as special added tokens.
void add_named_special(BpeSpec& spec, const std::optional<std::string>& token) {
  if (!token || token->empty()) return;
  for (auto& a : spec.added_tokens)
    if (a.content == *token) {
      a.special = true;
      return;
    }
  if (auto id = lookup(spec, *token)) spec.added_tokens.push_back({*token, *id, true, false, false, false, false});
}

}  // namespace

// nlohmann would convert 2.5 or 1e90 to an integer (the latter undefined behaviour) and wrap an unsigned value past
// int64.
int64_t json_id(const nlohmann::json& v, const std::string& where, const std::string& what) {
  ALPS_CHECK(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}), where,
             ": ", what, " must be an integer id, got ", v.dump());
  return v.get<int64_t>();
}

std::vector<std::pair<std::string, int64_t>> parse_vocab(const nlohmann::json& j, const std::string& where) {
  ALPS_CHECK(j.is_object(), where, ": the vocabulary must be a JSON object {token: id}, got ", j.type_name());
  std::vector<std::pair<std::string, int64_t>> vocab;
  vocab.reserve(j.size());
  for (const auto& [token, id] : j.items()) {
    vocab.emplace_back(token, json_id(id, where, "the id of token '" + token + "'"));
  }
  return vocab;
}

std::optional<int64_t> lookup(const BpeSpec& spec, const std::string& token) {
  for (const auto& a : spec.added_tokens)
    if (a.content == token) return a.id;
  for (const auto& [t, id] : spec.vocab)
    if (t == token) return id;
  if (spec.kind == "byte-bpe") {
    std::string mapped;
    for (unsigned char c : token) mapped += byte_to_unicode(c);
    for (const auto& [t, id] : spec.vocab)
      if (t == mapped) return id;
  }
  return std::nullopt;
}

void apply_special_token_config(BpeSpec& spec, const SpecialTokenConfig& config, bool use_template) {
  for (const auto& a : config.added_tokens) {
    bool known = false;
    for (const auto& b : spec.added_tokens) known |= b.content == a.content;
    if (!known) spec.added_tokens.push_back(a);
  }
  for (const auto* token : {&config.bos_token, &config.eos_token, &config.unk_token, &config.pad_token})
    add_named_special(spec, *token);

  if (config.bos_token) spec.bos_id = lookup(spec, *config.bos_token);
  if (!spec.bos_id) spec.bos_id = config.bos_token_id;
  if (config.eos_token) spec.eos_id = lookup(spec, *config.eos_token);
  if (!spec.eos_id) spec.eos_id = config.eos_token_id;

  if (!use_template) return;
  // BOS/EOS from tokenizer_config.json's add_bos_token / add_eos_token (both off by default for byte-level BPE).
  if (config.add_bos_token.value_or(false)) {
    ALPS_CHECK(spec.bos_id.has_value(), spec.source, ": add_bos_token is true but the BOS token '",
               config.bos_token.value_or(""), "' is not in the vocabulary");
    spec.prefix_ids.push_back(*spec.bos_id);
  }
  if (config.add_eos_token.value_or(false)) {
    ALPS_CHECK(spec.eos_id.has_value(), spec.source, ": add_eos_token is true but the EOS token '",
               config.eos_token.value_or(""), "' is not in the vocabulary");
    spec.suffix_ids.push_back(*spec.eos_id);
  }
}

BpeSpec read_vocab_merges(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt,
                          const SpecialTokenConfig& config) {
  BpeSpec spec;
  spec.kind = "byte-bpe";
  spec.source = vocab_json.string() + " + " + merges_txt.string();
  spec.vocab = parse_vocab(io::read_json_file(vocab_json), vocab_json.string());

  require_regular_file(merges_txt);  // an ifstream opens a directory and reads it as empty
  std::ifstream in(merges_txt, std::ios::binary);
  ALPS_CHECK(in.good(), "cannot open ", merges_txt.string());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& line = lines[i];
    if (line.rfind("#version", 0) == 0) continue;
    const size_t space = line.find(' ');
    ALPS_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                   line.find(' ', space + 1) == std::string::npos,
               merges_txt.string(), " line ", i + 1, ": expected two tokens separated by one space, got '", line, "'");
    spec.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }

  SpecialTokenConfig effective = config;
  if (!config.bos_token && !config.eos_token && !config.unk_token) {
    // GPT2Tokenizer's constructor defaults when the checkpoint has no tokenizer_config.json.
    effective.bos_token = effective.eos_token = effective.unk_token = std::string("<|endoftext|>");
  }
  // What GPT2Tokenizer does: GPT-2's regex, each piece's bytes as byte-level characters, the inverse on decode.
  using Kind = PreTokenizeStep::Kind;
  if (effective.add_prefix_space.value_or(false)) spec.pre_tokenize.push_back(PreTokenizeStep::of(Kind::kPrefixSpace));
  PreTokenizeStep split;
  split.pattern = kGpt2SplitPattern;
  spec.pre_tokenize.push_back(split);
  spec.pre_tokenize.push_back(PreTokenizeStep::of(Kind::kByteLevel));
  spec.decoder.push_back(DecoderStep::of(DecoderStep::Kind::kByteLevel));
  apply_special_token_config(spec, effective, true);
  return spec;
}

}  // namespace alps::tokenizer
