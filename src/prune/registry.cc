// The only list of methods: a table, not self-registering statics, which a static library drops.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "alps/core/error.h"
#include "alps/core/suggest.h"
#include "alps/prune/method.h"
#include "alps/prune/methods/alps_admm.h"
#include "alps/prune/methods/dsnot.h"
#include "alps/prune/methods/magnitude.h"
#include "alps/prune/methods/ria.h"
#include "alps/prune/methods/sparsegpt.h"
#include "alps/prune/methods/wanda.h"

namespace alps::prune {

namespace {
nlohmann::json no_options() { return nlohmann::json::array(); }

struct Entry {
  std::string_view name;
  MethodFactory make;
  nlohmann::json (*options)();  // the method's option table, described
  std::string_view summary;
  std::string_view unstructured;  // over what an unstructured sparsity is counted
};
constexpr Entry kMethods[] = {
    {"alps", &make_alps_admm, &alps_option_list,
     "ADMM with a rho schedule on the scaled least-squares problem finds the support, then masked PCG refits the "
     "kept weights (its own refit; --refine adds another)",
     "per layer"},
    {"dsnot", &make_dsnot, &dsnot_option_list,
     "Wanda's mask, then training-free prune/regrow swaps per row that drive the expected output change to zero",
     "per output row"},
    {"magnitude", &make_magnitude, &no_options, "zero the smallest |W|", "per layer"},
    {"ria", &make_ria, &ria_option_list,
     "zero the lowest (relative importance of |W_ij| in its row and column) * ||X_j||^a, weights left as they are; "
     "for N:M optionally after a channel permutation",
     "per layer (per output row with per_row=true)"},
    {"sparsegpt", &make_sparsegpt, &sparsegpt_option_list,
     "column by column OBS updates with the Cholesky factor of H^-1; masks chosen per block of columns",
     "per block of columns"},
    {"wanda", &make_wanda, &no_options, "zero the lowest |W_ij| * ||X_j|| per output row, weights left as they are",
     "per output row"}};
}  // namespace

nlohmann::json method_catalog() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : kMethods)
    list.push_back({{"name", e.name},
                    {"summary", e.summary},
                    {"patterns", {{"unstructured", e.unstructured}, {"n_m", "per group of M consecutive inputs"}}},
                    {"options", e.options()}});
  return list;
}

std::vector<std::string> method_names() {
  std::vector<std::string> names;
  for (const auto& e : kMethods) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

std::unique_ptr<Method> make_method(std::string_view name, const nlohmann::json& options) {
  // A method's name and constants come from the command line or a recipe: whatever the model and data, a run with
  // them cannot work, hence usage errors.
  for (const auto& entry : kMethods) {
    if (entry.name != name) continue;
    try {
      return entry.make(options);
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      throw UsageError(e.what(), e.where());
    }
  }
  ALPS_USAGE_FAIL("unknown pruning method '", name, "' (known: ", join_names(method_names()), ")",
                  did_you_mean(name, method_names()));
}

}  // namespace alps::prune
