#include "alps/tokenizer/special_tokens.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "alps/core/error.h"
#include "tokenizer/json_file.h"

namespace alps::tokenizer {
namespace {

// A token is either a string or an AddedToken object {"content": ..., "__type": "AddedToken"}.
std::optional<std::string> token_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return std::nullopt;
}

std::optional<std::string> token_string(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? std::nullopt : token_text(*it);
}

std::vector<std::string> token_strings(const nlohmann::json& j, const char* key) {
  std::vector<std::string> tokens;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return tokens;
  for (const auto& entry : *it)
    if (auto token = token_text(entry)) tokens.push_back(*token);
  return tokens;
}

std::optional<bool> optional_bool(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

std::optional<int64_t> optional_id(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  // LLaMA-3.1 lists several EOS ids; the first is the end-of-text token.
  if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) return (*it)[0].get<int64_t>();
  return std::nullopt;
}

}  // namespace

SpecialTokenConfig read_special_token_config(const std::filesystem::path& model_dir) {
  SpecialTokenConfig config;
  if (auto j = read_json_if_exists(model_dir / "tokenizer_config.json")) {
    const auto file = (model_dir / "tokenizer_config.json").string();
    ALPS_CHECK(j->is_object(), file, ": expected a JSON object, got ", j->type_name());
    config.bos_token = token_string(*j, "bos_token");
    config.eos_token = token_string(*j, "eos_token");
    config.unk_token = token_string(*j, "unk_token");
    config.pad_token = token_string(*j, "pad_token");
    config.add_bos_token = optional_bool(*j, "add_bos_token");
    config.add_eos_token = optional_bool(*j, "add_eos_token");
    config.add_prefix_space = optional_bool(*j, "add_prefix_space");
    config.legacy = optional_bool(*j, "legacy");
    config.additional_special_tokens = token_strings(*j, "additional_special_tokens");
    if (auto it = j->find("tokenizer_class"); it != j->end() && it->is_string()) config.tokenizer_class = *it;
    if (auto it = j->find("added_tokens_decoder"); it != j->end() && it->is_object()) {
      for (const auto& [key, value] : it->items()) {
        AddedToken token;
        try {
          token.id = std::stoll(key);
        } catch (const std::exception&) {
          ALPS_FAIL(file, ": added_tokens_decoder key '", key, "' is not an integer id");
        }
        ALPS_CHECK(value.is_object() && value.contains("content") && value["content"].is_string(), file,
                   ": added_tokens_decoder[", key, "] has no string 'content'");
        token.content = value["content"];
        token.special = false;  // absent flags are false, as transformers reads them
        for (auto [name, flag] : {std::pair{"special", &token.special}, {"lstrip", &token.lstrip},
                                  {"rstrip", &token.rstrip}, {"single_word", &token.single_word},
                                  {"normalized", &token.normalized}}) {
          auto field = value.find(name);
          if (field == value.end()) continue;
          ALPS_CHECK(field->is_boolean(), file, ": added_tokens_decoder[", key, "].", name,
                     " must be true or false, got ", field->dump());
          *flag = field->get<bool>();
        }
        // An AddedToken without the flag is normalized unless special (tokenizers' default).
        if (!value.contains("normalized")) token.normalized = !token.special;
        config.added_tokens.push_back(std::move(token));
      }
    }
  }
  if (auto j = read_json_if_exists(model_dir / "special_tokens_map.json"); j && j->is_object()) {
    if (!config.bos_token) config.bos_token = token_string(*j, "bos_token");
    if (!config.eos_token) config.eos_token = token_string(*j, "eos_token");
    if (!config.unk_token) config.unk_token = token_string(*j, "unk_token");
    if (!config.pad_token) config.pad_token = token_string(*j, "pad_token");
    if (config.additional_special_tokens.empty())
      config.additional_special_tokens = token_strings(*j, "additional_special_tokens");
  }
  if (auto j = read_json_if_exists(model_dir / "config.json"); j && j->is_object()) {
    config.bos_token_id = optional_id(*j, "bos_token_id");
    config.eos_token_id = optional_id(*j, "eos_token_id");
  }
  return config;
}

}  // namespace alps::tokenizer
