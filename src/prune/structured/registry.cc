// The only list of structured methods: a table, as src/prune/registry.cc is for the others.
#include <algorithm>
#include <string>

#include "alps/core/error.h"
#include "alps/core/suggest.h"
#include "prune/structured/methods.h"

namespace alps::prune {

namespace {
struct Entry {
  std::string_view name;
  std::unique_ptr<UnitMethod> (*make)(const nlohmann::json& options);
  nlohmann::json (*options)();
  std::string_view summary;
};
constexpr Entry kUnitMethods[] = {
    {"obs", &make_unit_obs, &unit_obs_option_list,
     "structured Optimal Brain Surgeon (ZipLM style): remove the unit whose removal raises the error least, refit the "
     "rest in closed form, repeat"},
    {"osscar", &make_osscar, &osscar_option_list,
     "OSSCAR: exact block eliminations a few units at a time, then a local search of swaps while the least-squares "
     "error falls"},
    {"score", &make_unit_score, &score_option_list,
     "keep the units of highest weight norm times input norm (structured Wanda, FLAP); refit=true refits them"}};
}  // namespace

std::vector<std::string> unit_method_names() {
  std::vector<std::string> names;
  for (const auto& e : kUnitMethods) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json unit_method_catalog() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : kUnitMethods)
    list.push_back({{"name", e.name}, {"summary", e.summary}, {"options", e.options()}});
  return list;
}

std::unique_ptr<UnitMethod> make_unit_method(std::string_view name, const nlohmann::json& options) {
  for (const auto& e : kUnitMethods) {
    if (e.name != name) continue;
    try {
      return e.make(options);
    } catch (const UsageError&) {
      throw;
    } catch (const Error& err) {
      throw UsageError(err.what(), err.where());
    }
  }
  ALPS_USAGE_FAIL("unknown structured method '", name, "' (known: ", join_names(unit_method_names()), ")",
                  did_you_mean(name, unit_method_names()));
}

}  // namespace alps::prune
