// A Hugging Face tokenizer.json with a BPE model into a BpeSpec: every normalizer, pre-tokenizer, post-processor
// and decoder that LLaMA-2/3, Mistral, Qwen2, SmolLM2, OPT and TinyLlama use; anything else is an error naming the
// file and the step.
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/io/text_files.h"
#include "alps/tokenizer/bpe.h"
#include "tokenizer/bpe_files.h"

namespace alps::tokenizer {
namespace {

using json = nlohmann::json;

std::string type_of(const json& j, const std::string& where, const std::string& section) {
  ALPS_CHECK(j.is_object(), where, ": ", section, " must be an object or null, got ", j.type_name());
  auto it = j.find("type");
  ALPS_CHECK(it != j.end() && it->is_string(), where, ": ", section, " has no string 'type'");
  return it->get<std::string>();
}

// Split and Replace patterns: {"String": literal} or {"Regex": pattern}. A literal is returned as is.
std::pair<std::string, bool> parse_pattern(const json& j, const std::string& where, const std::string& step) {
  ALPS_CHECK(j.is_object(), where, ": ", step, " pattern must be {\"String\": ...} or {\"Regex\": ...}");
  if (auto it = j.find("Regex"); it != j.end()) return {it->get<std::string>(), true};
  return {j.at("String").get<std::string>(), false};
}

// A literal as a PCRE2 pattern: \Q...\E quotes it, with any "\E" inside re-opened.
std::string quote_regex(const std::string& literal) {
  std::string quoted = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal.compare(i, 2, "\\E") == 0) {
      quoted += "\\E\\\\E\\Q";
      ++i;
    } else {
      quoted += literal[i];
    }
  }
  return quoted + "\\E";
}

void parse_normalizer(const json& j, std::vector<NormalizerStep>& steps, const std::string& where) {
  if (j.is_null()) return;
  using Kind = NormalizerStep::Kind;
  const std::string type = type_of(j, where, "normalizer");
  NormalizerStep step;
  if (type == "Sequence") {
    for (const auto& inner : j.at("normalizers")) parse_normalizer(inner, steps, where);
    return;
  } else if (type == "NFC") {
    step.kind = Kind::kNfc;
  } else if (type == "NFD") {
    step.kind = Kind::kNfd;
  } else if (type == "NFKC") {
    step.kind = Kind::kNfkc;
  } else if (type == "NFKD") {
    step.kind = Kind::kNfkd;
  } else if (type == "Lowercase") {
    step.kind = Kind::kLowercase;
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    std::tie(step.pattern, step.regex) = parse_pattern(j.at("pattern"), where, "normalizer Replace");
    step.content = j.at("content").get<std::string>();
  } else if (type == "Prepend") {
    step.kind = Kind::kPrepend;
    step.content = j.at("prepend").get<std::string>();
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    step.left = j.at("strip_left").get<bool>();
    step.right = j.at("strip_right").get<bool>();
  } else {
    ALPS_FAIL(where, ": unsupported normalizer type '", type,
              "' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Strip, Sequence)");
  }
  steps.push_back(std::move(step));
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

PreTokenizeStep::Prepend parse_prepend_scheme(const json& j, const std::string& where) {
  using P = PreTokenizeStep::Prepend;
  if (auto it = j.find("prepend_scheme"); it != j.end()) {
    const std::string scheme = it->get<std::string>();
    if (scheme == "always") return P::kAlways;
    if (scheme == "first") return P::kFirst;
    if (scheme == "never") return P::kNever;
    ALPS_FAIL(where, ": unknown Metaspace prepend_scheme '", scheme, "'");
  }
  // Files written before prepend_scheme existed say add_prefix_space.
  return j.value("add_prefix_space", true) ? P::kAlways : P::kNever;
}

void parse_pre_tokenizer(const json& j, std::vector<PreTokenizeStep>& steps, const std::string& where) {
  if (j.is_null()) return;
  using Kind = PreTokenizeStep::Kind;
  const std::string type = type_of(j, where, "pre_tokenizer");
  PreTokenizeStep step;
  if (type == "Sequence") {
    for (const auto& inner : j.at("pretokenizers")) parse_pre_tokenizer(inner, steps, where);
  } else if (type == "ByteLevel") {
    if (j.value("add_prefix_space", false)) steps.push_back(PreTokenizeStep::of(Kind::kPrefixSpace));
    if (j.value("use_regex", true)) {
      step.pattern = kGpt2SplitPattern;
      steps.push_back(step);
    }
    steps.push_back(PreTokenizeStep::of(Kind::kByteLevel));
  } else if (type == "Split") {
    auto [pattern, regex] = parse_pattern(j.at("pattern"), where, "pre_tokenizer Split");
    step.pattern = regex ? pattern : quote_regex(pattern);
    step.behavior = parse_behavior(j.at("behavior").get<std::string>(), where);
    step.invert = j.value("invert", false);
    steps.push_back(std::move(step));
  } else if (type == "Digits") {
    // Rust's char::is_numeric is the N category; runs of digits form one piece unless individual_digits.
    step.pattern = j.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+";
    steps.push_back(std::move(step));
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    step.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    step.prepend = parse_prepend_scheme(j, where);
    step.split = j.value("split", true);
    steps.push_back(std::move(step));
  } else {
    ALPS_FAIL(where, ": unsupported pre_tokenizer type '", type,
              "' (supported: ByteLevel, Split, Digits, Metaspace, Sequence)");
  }
}

void parse_decoder(const json& j, std::vector<DecoderStep>& steps, const std::string& where) {
  if (j.is_null()) return;
  using Kind = DecoderStep::Kind;
  const std::string type = type_of(j, where, "decoder");
  DecoderStep step;
  if (type == "Sequence") {
    for (const auto& inner : j.at("decoders")) parse_decoder(inner, steps, where);
    return;
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    step.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    step.prepend_never = parse_prepend_scheme(j, where) == PreTokenizeStep::Prepend::kNever;
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    std::tie(step.pattern, step.regex) = parse_pattern(j.at("pattern"), where, "decoder Replace");
    step.content = j.at("content").get<std::string>();
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    step.content = j.at("content").get<std::string>();
    step.start = j.at("start").get<size_t>();
    step.stop = j.at("stop").get<size_t>();
  } else {
    ALPS_FAIL(where, ": unsupported decoder type '", type,
              "' (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence)");
  }
  steps.push_back(std::move(step));
}

std::vector<int64_t> special_ids(const json& specials, const std::string& name, const std::string& where) {
  auto it = specials.find(name);
  ALPS_CHECK(it != specials.end(), where, ": post_processor uses special token '", name,
             "' that its special_tokens table does not define");
  std::vector<int64_t> ids;
  for (const auto& id : it->at("ids")) ids.push_back(json_id(id, where, "post_processor special token id"));
  return ids;
}

// Returns whether the processor adds tokens; fills prefix_ids / suffix_ids for a single sequence.
bool parse_post_processor(const json& j, BpeSpec& spec, const std::string& where) {
  if (j.is_null()) return false;
  const std::string type = type_of(j, where, "post_processor");
  if (type == "ByteLevel") return false;  // only adjusts offsets
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
  ALPS_FAIL(where, ": unsupported post_processor type '", type,
            "' (supported: TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence)");
}

void parse_model(const json& model, BpeSpec& spec, const std::string& where) {
  ALPS_CHECK(model.is_object(), where, ": model must be an object, got ", model.type_name());
  // Files of old tokenizers versions leave the type of a BPE model implicit.
  const std::string type = model.contains("type") || !model.contains("merges") ? type_of(model, where, "model") : "BPE";
  ALPS_CHECK(type == "BPE", where, ": unsupported model type '", type, "' (supported: BPE)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    ALPS_CHECK(it == model.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()), where,
               ": model.", key, " is not supported, got ", it->dump());
  }
  if (auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
    // BPE dropout draws random merges at every encode: no exact ids to reproduce.
    ALPS_CHECK(it->is_number() && it->get<double>() == 0.0, where, ": model.dropout ", it->dump(),
               " makes encoding random; only null or 0 is supported");
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
  spec.byte_fallback = model.value("byte_fallback", false);
  spec.fuse_unk = model.value("fuse_unk", false);
}

}  // namespace

BpeSpec read_tokenizer_json(const std::filesystem::path& tokenizer_json, const SpecialTokenConfig& config) {
  const std::string where = tokenizer_json.string();
  const json j = io::read_json_file(tokenizer_json);
  BpeSpec spec;
  spec.source = where;
  try {
    ALPS_CHECK(j.is_object() && j.contains("model"), where, ": expected a tokenizer.json object with a 'model'");
    parse_model(j.at("model"), spec, where);
    if (auto it = j.find("added_tokens"); it != j.end() && it->is_array()) {
      for (const auto& a : *it) {
        const bool special = a.value("special", false);
        spec.added_tokens.push_back({a.at("content").get<std::string>(), json_id(a.at("id"), where, "added_tokens id"),
                                     special, a.value("lstrip", false), a.value("rstrip", false),
                                     a.value("single_word", false), a.value("normalized", !special)});
      }
    }
    parse_normalizer(j.value("normalizer", json()), spec.normalizer, where);
    parse_pre_tokenizer(j.value("pre_tokenizer", json()), spec.pre_tokenize, where);
    parse_decoder(j.value("decoder", json()), spec.decoder, where);
    for (const auto& step : spec.pre_tokenize)
      if (step.kind == PreTokenizeStep::Kind::kByteLevel) spec.kind = "byte-bpe";
    if (auto it = j.at("model").find("unk_token"); it != j.at("model").end() && !it->is_null()) {
      const std::string unk = it->get<std::string>();
      spec.unk_id = lookup(spec, unk);
      ALPS_CHECK(spec.unk_id.has_value(), where, ": model.unk_token '", unk, "' is not in the vocabulary");
    }
    const bool has_template = parse_post_processor(j.value("post_processor", json()), spec, where);
    apply_special_token_config(spec, config, !has_template);
  } catch (const nlohmann::json::exception& e) {
    ALPS_FAIL(where, ": malformed tokenizer.json (", e.what(), ")");
  }
  return spec;
}

std::string tokenizer_json_model_type(const std::filesystem::path& tokenizer_json) {
  const json j = io::read_json_file(tokenizer_json);
  if (!j.is_object()) return "";
  auto model = j.find("model");
  if (model == j.end() || !model->is_object()) return "";
  auto type = model->find("type");
  return type != model->end() && type->is_string() ? type->get<std::string>() : "";
}

}  // namespace alps::tokenizer
