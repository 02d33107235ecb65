// `alps methods [NAME]`: the pruning methods, the patterns they take and every option with its default, read from
// the method registries (the same tables `--method` / `--option` and `--structured-method` / `--structured-option`
// are checked against).
#include <fmt/format.h>

#include <iostream>

#include "alps/core/error.h"
#include "alps/prune/method.h"
#include "alps/prune/structured.h"
#include "commands.h"

namespace alps::cli {

namespace {
struct MethodsArgs {
  CommonOptions common;
  std::string name;
};

void print_method(const nlohmann::json& m) {
  const bool structured = m.value("kind", "") == "structured";
  std::cout << m["name"].get<std::string>() << ": " << m["summary"].get<std::string>() << "\n";
  if (structured)
    std::cout << "  structured: chooses the MLP neurons and attention heads kept (--structured-method)\n";
  else
    std::cout << "  patterns: unstructured sparsity counted " << m["patterns"]["unstructured"].get<std::string>()
              << "; N:M " << m["patterns"]["n_m"].get<std::string>() << "\n";
  if (m["options"].empty()) {
    std::cout << "  options: none\n\n";
    return;
  }
  std::cout << (structured ? "  options (--structured-option key=value, or \"structured_options\" in a recipe)"
                           : "  options (--option key=value, or \"options\" in a recipe)")
            << ": name, type, default, meaning\n";
  for (const auto& o : m["options"])
    std::cout << fmt::format("    {:<17} {:<8} {:<10} {}\n", o["name"].get<std::string>(),
                             o["type"].get<std::string>(), o["default"].dump(), o["help"].get<std::string>());
  std::cout << "\n";
}
}  // namespace

void add_methods_command(CLI::App& app, Runner& runner) {
  auto a = std::make_shared<MethodsArgs>();
  CLI::App* cmd = app.add_subcommand("methods", "List the pruning methods, their patterns and options with defaults");
  std::vector<std::string> names = prune::method_names();
  for (const auto& n : prune::unit_method_names()) names.push_back(n);
  cmd->add_option("name", a->name, "Only this method")->check(one_of(names));
  add_common_flags(cmd, a->common, /*with_device=*/false);
  cmd->callback([a, &runner] {
    runner = [a] {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& m : prune::method_catalog())
        if (a->name.empty() || m["name"] == a->name) list.push_back(m);
      for (auto m : prune::unit_method_catalog()) {
        m["kind"] = "structured";
        if (a->name.empty() || m["name"] == a->name) list.push_back(m);
      }
      if (a->common.json) {
        print_json(list);
        return 0;
      }
      for (const auto& m : list) print_method(m);
      return 0;
    };
  });
}

}  // namespace alps::cli
