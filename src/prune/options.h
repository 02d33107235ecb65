#pragma once
// Private: reads a method's JSON options into its options struct and rejects keys nobody read.
#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "alps/core/error.h"

namespace alps::prune::detail {

class OptionReader {
 public:
  OptionReader(const nlohmann::json& j, std::string method) : j_(j), method_(std::move(method)) {
    ALPS_CHECK(j_.is_null() || j_.is_object(), "options of method '", method_, "': expected a JSON object, got ",
               j_.dump());
  }

  template <typename T>
  void read(const std::string& key, T& field) {
    known_.insert(key);
    if (!j_.is_object() || !j_.contains(key)) return;
    const nlohmann::json& v = j_.at(key);
    try {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        ALPS_CHECK(v.is_number_integer(), "expected an integer");
      } else if constexpr (std::is_floating_point_v<T>) {
        ALPS_CHECK(v.is_number(), "expected a number");
      } else if constexpr (std::is_same_v<T, bool>) {
        ALPS_CHECK(v.is_boolean(), "expected true or false");
      } else {
        ALPS_CHECK(v.is_string(), "expected a string");
      }
      field = v.get<T>();
    } catch (const std::exception& e) {
      ALPS_FAIL("option '", key, "' of method '", method_, "': ", e.what(), ", got ", v.dump());
    }
  }

  /// Throws on any key that no read() asked for.
  void finish() const {
    if (!j_.is_object()) return;
    for (const auto& [key, value] : j_.items()) {
      if (known_.count(key)) continue;
      std::string list;
      for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
      ALPS_FAIL("unknown option '", key, "' for method '", method_, "' (known: ", list.empty() ? "none" : list, ")");
    }
  }

 private:
  const nlohmann::json& j_;
  std::string method_;
  std::set<std::string> known_;
};

}  // namespace alps::prune::detail
