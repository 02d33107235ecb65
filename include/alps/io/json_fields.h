#pragma once
// Typed reads from one JSON object that reject keys nobody asked for: the form of every JSON input alps takes
// (method options, recipes and their nested objects), so a misspelt knob is an error naming it, never a silent
// default.
#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <type_traits>

#include "alps/core/error.h"

namespace alps::io {

class JsonFields {
 public:
  /// `where` names the object in every error ("recipe x.json calibration", "method 'alps'"); `word` is what a key
  /// is called there ("key", "option"). A null `j` reads as an empty object.
  JsonFields(const nlohmann::json& j, std::string where, std::string word = "key")
      : j_(j), where_(std::move(where)), word_(std::move(word)) {
    ALPS_CHECK(j_.is_null() || j_.is_object(), where_, ": expected a JSON object, got ", j_.dump());
  }

  /// The value under `key` (marked as known), or nullptr when absent.
  const nlohmann::json* get(const std::string& key) {
    known_.insert(key);
    return j_.is_object() && j_.contains(key) ? &j_.at(key) : nullptr;
  }

  /// Sets `field` when `key` is present. Scalars are checked strictly (an integer field takes no 2.5, a bool no 1);
  /// other types go through nlohmann's conversion. Returns whether the key was present.
  template <typename T>
  bool read(const std::string& key, T& field) {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return false;
    const char* problem = nullptr;
    if constexpr (std::is_same_v<T, bool>) {
      if (!v->is_boolean()) problem = "must be true or false";
    } else if constexpr (std::is_integral_v<T>) {
      if (!v->is_number_integer() || (std::is_unsigned_v<T> && v->get<int64_t>() < 0))
        problem = std::is_unsigned_v<T> ? "must be a non-negative integer" : "must be an integer";
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v->is_number()) problem = "must be a number";
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v->is_string()) problem = "must be a string";
    }
    if (problem == nullptr) {
      try {
        field = v->get<T>();
        return true;
      } catch (const nlohmann::json::exception&) {
        problem = "has the wrong type";
      }
    }
    ALPS_FAIL(where_, ": ", word_, " \"", key, "\" ", problem, ", got ", v->dump());
  }

  /// Throws on the first key that no get()/read() asked for, listing the known ones.
  void finish() const {
    if (!j_.is_object()) return;
    for (const auto& [key, value] : j_.items()) {
      if (known_.count(key)) continue;
      std::string list;
      for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
      ALPS_FAIL(where_, ": unknown ", word_, " \"", key, "\" (known: ", list.empty() ? "none" : list, ")");
    }
  }

 private:
  const nlohmann::json& j_;
  std::string where_, word_;
  std::set<std::string> known_;
};

}  // namespace alps::io
