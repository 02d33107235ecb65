#pragma once
// The one home of a method's options: each is declared once, with its JSON key, the field of the options struct it
// sets and what it means. Parsing (unknown keys are errors), the defaults and `alps methods` all read the same table,
// so the documentation cannot drift from what the parser accepts.
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "alps/io/json_fields.h"

namespace alps::io {

template <typename Options>
class OptionTable {
 public:
  /// Declares option `key`, stored in `field`; `help` says what it does (its default is read from Options{}).
  template <typename T>
  OptionTable&& add(std::string key, T Options::*field, std::string help) && {
    Entry e;
    e.key = key;
    e.help = std::move(help);
    e.type = type_name<T>();
    e.read = [key, field](JsonFields& f, Options& o) { f.read(key, o.*field); };
    e.value = [field](const Options& o) { return nlohmann::json(o.*field); };
    entries_.push_back(std::move(e));
    return std::move(*this);
  }

  /// The options in `j` (a JSON object, or null for all defaults); `where` names it in errors.
  Options read(const nlohmann::json& j, const std::string& where) const {
    Options o;
    JsonFields f(j, where, "option");
    for (const auto& e : entries_) e.read(f, o);
    f.finish();
    return o;
  }

  /// [{name, type, default, help}] in declaration order.
  nlohmann::json describe() const {
    const Options defaults{};
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : entries_)
      list.push_back({{"name", e.key}, {"type", e.type}, {"default", e.value(defaults)}, {"help", e.help}});
    return list;
  }

 private:
  struct Entry {
    std::string key, help, type;
    std::function<void(JsonFields&, Options&)> read;
    std::function<nlohmann::json(const Options&)> value;
  };

  template <typename T>
  static const char* type_name() {
    if constexpr (std::is_same_v<T, bool>) return "bool";
    else if constexpr (std::is_integral_v<T>) return "integer";
    else if constexpr (std::is_floating_point_v<T>) return "number";
    else return "string";
  }

  std::vector<Entry> entries_;
};

}  // namespace alps::io
