// The only list of methods: a table, not self-registering statics, which a static library drops.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "alps/core/error.h"
#include "alps/prune/method.h"
#include "alps/prune/methods/alps_admm.h"
#include "alps/prune/methods/dsnot.h"
#include "alps/prune/methods/magnitude.h"
#include "alps/prune/methods/sparsegpt.h"
#include "alps/prune/methods/wanda.h"

namespace alps::prune {

namespace {
struct Entry {
  std::string_view name;
  MethodFactory make;
};
constexpr Entry kMethods[] = {{"alps", &make_alps_admm},
                              {"dsnot", &make_dsnot},
                              {"magnitude", &make_magnitude},
                              {"sparsegpt", &make_sparsegpt},
                              {"wanda", &make_wanda}};
}  // namespace

std::vector<std::string> method_names() {
  std::vector<std::string> names;
  for (const auto& e : kMethods) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

std::unique_ptr<Method> make_method(std::string_view name, const nlohmann::json& options) {
  for (const auto& e : kMethods)
    if (e.name == name) return e.make(options);
  std::string known;
  for (const auto& n : method_names()) known += (known.empty() ? "" : ", ") + n;
  ALPS_FAIL("unknown pruning method '", name, "' (known: ", known, ")");
}

}  // namespace alps::prune
