// `alps tasks`: the zero-shot tasks alps can score, with their default files and metrics, from the task registry
// (scripts such as scripts/sweep.sh use it to tell task names from perplexity datasets).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>

#include "alps/eval/task.h"
#include "commands.h"

namespace alps::cli {

void add_tasks_command(CLI::App& app, Runner& runner) {
  auto common = std::make_shared<CommonOptions>();
  CLI::App* cmd = app.add_subcommand("tasks", "List the zero-shot tasks of `eval --tasks` and `prune --eval`");
  add_common_flags(cmd, *common, /*with_device=*/false);
  cmd->callback([common, &runner] {
    runner = [common] {
      nlohmann::json doc = nlohmann::json::array();
      for (const eval::TaskSpec& t : eval::task_registry())
        doc.push_back({{"name", t.name}, {"file", t.file}, {"metrics", t.metrics}, {"version", t.version}});
      if (common->json) {
        print_json(doc);
        return 0;
      }
      for (const auto& t : doc)
        std::cout << fmt::format("{:<16} {:<48} {}\n", t["name"].get<std::string>(), t["file"].get<std::string>(),
                                 fmt::join(t["metrics"].get<std::vector<std::string>>(), ","));
      return 0;
    };
  });
}

}  // namespace alps::cli
