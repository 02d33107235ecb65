// Readers that turn vocab.json + merges.txt or a tokenizer.json into a ByteBpeSpec.
#include <fstream>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/tokenizer/byte_bpe.h"
#include "tokenizer/byte_map.h"
#include "alps/io/text_files.h"
#include "tokenizer/json_file.h"

namespace alps::tokenizer {
namespace {

// A token id as JSON gives it: nlohmann would convert 2.5 or 1e90 to an integer (the latter undefined behaviour) and
// wrap an unsigned value past int64.
int64_t json_id(const nlohmann::json& v, const std::string& where, const std::string& what) {
  ALPS_CHECK(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}), where,
             ": ", what, " must be an integer id, got ", v.dump());
  return v.get<int64_t>();
}

std::string to_byte_level(std::string_view text) {
  std::string out;
  for (unsigned char c : text) out += byte_to_unicode(c);
  return out;
}

std::optional<int64_t> lookup(const ByteBpeSpec& spec, const std::string& token) {
  for (const auto& a : spec.added_tokens)
    if (a.content == token) return a.id;
  const std::string mapped = to_byte_level(token);
  for (const auto& [t, id] : spec.vocab)
    if (t == mapped) return id;
  return std::nullopt;
}

// Named special tokens (BOS/EOS/UNK/PAD) are matched literally in text and skipped by decode, as transformers does
// by registering them as special added tokens.
void add_named_special(ByteBpeSpec& spec, const std::optional<std::string>& token) {
  if (!token || token->empty()) return;
  for (auto& a : spec.added_tokens)
    if (a.content == *token) {
      a.special = true;
      return;
    }
  if (auto id = lookup(spec, *token)) spec.added_tokens.push_back({*token, *id, true, false, false, false});
}

void add_config_tokens(ByteBpeSpec& spec, const SpecialTokenConfig& config) {
  for (const auto& a : config.added_tokens) {
    bool known = false;
    for (const auto& b : spec.added_tokens) known |= b.content == a.content;
    if (!known) spec.added_tokens.push_back(a);
  }
  for (const auto* token : {&config.bos_token, &config.eos_token, &config.unk_token, &config.pad_token})
    add_named_special(spec, *token);
}

void resolve_bos_eos(ByteBpeSpec& spec, const SpecialTokenConfig& config) {
  if (config.bos_token) spec.bos_id = lookup(spec, *config.bos_token);
  if (!spec.bos_id) spec.bos_id = config.bos_token_id;
  if (config.eos_token) spec.eos_id = lookup(spec, *config.eos_token);
  if (!spec.eos_id) spec.eos_id = config.eos_token_id;
}

// BOS/EOS from tokenizer_config.json's add_bos_token / add_eos_token (both off by default for byte-level BPE).
void add_config_template(ByteBpeSpec& spec, const SpecialTokenConfig& config) {
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

std::vector<std::pair<std::string, int64_t>> parse_vocab(const nlohmann::json& j, const std::string& where) {
  ALPS_CHECK(j.is_object(), where, ": the vocabulary must be a JSON object {token: id}, got ", j.type_name());
  std::vector<std::pair<std::string, int64_t>> vocab;
  vocab.reserve(j.size());
  for (const auto& [token, id] : j.items()) {
    vocab.emplace_back(token, json_id(id, where, "the id of token '" + token + "'"));
  }
  return vocab;
}

PreTokenizeStep::Behavior parse_behavior(const std::string& name, const std::string& where) {
  using B = PreTokenizeStep::Behavior;
  if (name == "Isolated") return B::kIsolated;
  if (name == "Removed") return B::kRemoved;
  if (name == "MergedWithPrevious") return B::kMergedWithPrevious;
  if (name == "MergedWithNext") return B::kMergedWithNext;
  if (name == "Contiguous") return B::kContiguous;
  ALPS_FAIL(where, ": unknown Split behavior '", name, "'");
}

void add_byte_level_steps(std::vector<PreTokenizeStep>& steps, bool add_prefix_space, bool use_regex) {
  if (add_prefix_space) steps.push_back({PreTokenizeStep::Kind::kPrefixSpace, "", {}, false});
  if (use_regex) steps.push_back({PreTokenizeStep::Kind::kSplit, kGpt2SplitPattern, {}, false});
}

void parse_pre_tokenizer(const nlohmann::json& j, std::vector<PreTokenizeStep>& steps, const std::string& where) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& inner : j.at("pretokenizers")) parse_pre_tokenizer(inner, steps, where);
  } else if (type == "ByteLevel") {
    add_byte_level_steps(steps, j.value("add_prefix_space", false), j.value("use_regex", true));
  } else if (type == "Split") {
    PreTokenizeStep step;
    const auto& pattern = j.at("pattern");
    if (pattern.contains("Regex")) {
      step.pattern = pattern["Regex"].get<std::string>();
    } else {
      // A literal delimiter: \Q...\E quotes it, with any "\E" inside re-opened.
      std::string literal = pattern.at("String").get<std::string>(), quoted = "\\Q";
      for (size_t i = 0; i < literal.size(); ++i) {
        if (literal.compare(i, 2, "\\E") == 0) {
          quoted += "\\E\\\\E\\Q";
          ++i;
        } else {
          quoted += literal[i];
        }
      }
      step.pattern = quoted + "\\E";
    }
    step.behavior = parse_behavior(j.at("behavior").get<std::string>(), where);
    step.invert = j.value("invert", false);
    steps.push_back(std::move(step));
  } else {
    ALPS_FAIL(where, ": unsupported pre_tokenizer type '", type,
              "' for a byte-level BPE (supported: ByteLevel, Split, Sequence)");
  }
}

std::vector<int64_t> special_ids(const nlohmann::json& specials, const std::string& name, const std::string& where) {
  auto it = specials.find(name);
  ALPS_CHECK(it != specials.end(), where, ": post_processor uses special token '", name,
             "' that its special_tokens table does not define");
  return it->at("ids").get<std::vector<int64_t>>();
}

// Returns whether the processor adds tokens; fills prefix_ids / suffix_ids for a single sequence.
bool parse_post_processor(const nlohmann::json& j, ByteBpeSpec& spec, const std::string& where) {
  if (j.is_null()) return false;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") return false;
  if (type == "Sequence") {
    bool adds = false;
    for (const auto& inner : j.at("processors")) adds |= parse_post_processor(inner, spec, where);
    return adds;
  }
  if (type == "TemplateProcessing") {
    bool seen_sequence = false;
    for (const auto& piece : j.at("single")) {
      if (piece.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      const auto ids = special_ids(j.at("special_tokens"), piece.at("SpecialToken").at("id").get<std::string>(), where);
      auto& target = seen_sequence ? spec.suffix_ids : spec.prefix_ids;
      target.insert(target.end(), ids.begin(), ids.end());
    }
    return true;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    spec.prefix_ids.push_back(json_id(j.at("cls").at(1), where, "post_processor.cls[1]"));
    spec.suffix_ids.push_back(json_id(j.at("sep").at(1), where, "post_processor.sep[1]"));
    return true;
  }
  ALPS_FAIL(where, ": unsupported post_processor type '", type, "'");
}

bool mentions_byte_level(const nlohmann::json& j) {
  if (j.is_object()) {
    if (j.value("type", "") == "ByteLevel") return true;
    for (const auto& [key, value] : j.items())
      if (mentions_byte_level(value)) return true;
  } else if (j.is_array()) {
    for (const auto& value : j)
      if (mentions_byte_level(value)) return true;
  }
  return false;
}

}  // namespace

ByteBpeSpec read_byte_bpe_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt,
                                const SpecialTokenConfig& config) {
  ByteBpeSpec spec;
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
  add_config_tokens(spec, effective);
  resolve_bos_eos(spec, effective);
  add_byte_level_steps(spec.pre_tokenize, effective.add_prefix_space.value_or(false), true);
  add_config_template(spec, effective);
  return spec;
}

ByteBpeSpec read_byte_bpe_tokenizer_json(const std::filesystem::path& tokenizer_json,
                                         const SpecialTokenConfig& config) {
  const std::string where = tokenizer_json.string();
  const nlohmann::json j = io::read_json_file(tokenizer_json);
  ByteBpeSpec spec;
  spec.source = where;
  try {
    ALPS_CHECK(j.is_object() && j.contains("model"), where, ": expected a tokenizer.json object with a 'model'");
    const auto& model = j.at("model");
    const std::string type = model.value("type", "");
    ALPS_CHECK(type == "BPE", where, ": model type must be BPE for a byte-level tokenizer, got '", type, "'");
    ALPS_CHECK(!model.value("byte_fallback", false), where,
               ": byte_fallback BPE is SentencePiece-style, not byte-level (use tokenizer.model)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      auto it = model.find(key);
      ALPS_CHECK(it == model.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()), where,
                 ": model.", key, " is not supported for byte-level BPE, got ", it->dump());
    }
    if (auto it = j.find("normalizer"); it != j.end()) {
      ALPS_CHECK(it->is_null(), where, ": normalizer '", it->value("type", std::string("?")),
                 "' is not supported (byte-level BPE tokenizers here have none)");
    }
    spec.vocab = parse_vocab(model.at("vocab"), where + " model.vocab");
    const auto& merges = model.at("merges");
    ALPS_CHECK(merges.is_array(), where, ": model.merges must be an array");
    spec.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const auto& m = merges[i];
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        ALPS_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos, where, ": model.merges[",
                   i, "] must be \"a b\", got '", s, "'");
        spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else {
        ALPS_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), where, ": model.merges[", i,
                   "] must be \"a b\" or [\"a\", \"b\"], got ", m.dump());
        spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      }
    }
    spec.ignore_merges = model.value("ignore_merges", false);
    if (auto it = j.find("added_tokens"); it != j.end() && it->is_array()) {
      for (const auto& a : *it) {
        spec.added_tokens.push_back({a.at("content").get<std::string>(), json_id(a.at("id"), where, "added_tokens id"),
                                     a.value("special", false), a.value("lstrip", false), a.value("rstrip", false),
                                     a.value("single_word", false)});
      }
    }
    if (auto it = model.find("unk_token"); it != model.end() && it->is_string()) {
      spec.unk_id = lookup(spec, it->get<std::string>());
    }
    parse_pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()), spec.pre_tokenize, where);
    add_config_tokens(spec, config);
    resolve_bos_eos(spec, config);
    if (!parse_post_processor(j.value("post_processor", nlohmann::json()), spec, where))
      add_config_template(spec, config);
  } catch (const nlohmann::json::exception& e) {
    ALPS_FAIL(where, ": malformed tokenizer.json (", e.what(), ")");
  }
  return spec;
}

bool is_byte_level_tokenizer_json(const std::filesystem::path& tokenizer_json) {
  const nlohmann::json j = io::read_json_file(tokenizer_json);
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) return false;
  try {
    const auto& model = j["model"];
    if (model.value("type", "") != "BPE" || model.value("byte_fallback", false)) return false;
    return mentions_byte_level(j.value("pre_tokenizer", nlohmann::json())) ||
           mentions_byte_level(j.value("decoder", nlohmann::json()));
  } catch (const nlohmann::json::exception& e) {
    // value() throws when a field has the wrong type ("type": 5).
    ALPS_FAIL(tokenizer_json.string(), ": malformed tokenizer.json (", e.what(), ")");
  }
}

}  // namespace alps::tokenizer
