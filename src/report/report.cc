#include "alps/report/report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "alps/core/build_info.h"

namespace alps::report {

using json = nlohmann::json;

json to_json(const LayerReport& r) {
  json j = {{"block", r.block}, {"name", r.name}, {"shape", r.shape}, {"skipped", r.skipped}};
  if (r.skipped) return j;
  j.update({{"method", r.method},
            {"pattern", r.pattern},
            {"refine", r.refine},
            {"sparsity", r.sparsity},
            {"rel_error", r.rel_error},
            {"seconds", r.seconds},
            {"refine_seconds", r.refine_seconds}});
  j["rel_error_refined"] = r.rel_error_refined ? json(*r.rel_error_refined) : json(nullptr);
  for (const auto& [key, value] : r.stats.items()) j.emplace(key, value);  // never over a field above
  return j;
}

LayerReport layer_from_json(const json& j) {
  LayerReport r;
  r.block = j.at("block");
  r.name = j.at("name");
  r.shape = j.at("shape").get<std::vector<int64_t>>();
  r.skipped = j.at("skipped");
  if (r.skipped) return r;
  r.method = j.at("method");
  r.pattern = j.at("pattern");
  r.refine = j.at("refine");
  r.sparsity = j.at("sparsity");
  r.rel_error = j.at("rel_error");
  r.seconds = j.at("seconds");
  r.refine_seconds = j.at("refine_seconds");
  if (!j.at("rel_error_refined").is_null()) r.rel_error_refined = j.at("rel_error_refined").get<double>();
  // Everything to_json writes for a solved layer besides the method's stats: read from to_json itself.
  static const json fields = to_json(LayerReport{});
  for (const auto& [key, value] : j.items())
    if (!fields.contains(key)) r.stats[key] = value;
  return r;
}

json hardware_json() {
  json hw;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      hw["cpu"] = line.substr(line.find(':') + 2);
      break;
    }
  }
  hw["cores"] = std::thread::hardware_concurrency();
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) hw["memory_gib"] = static_cast<double>(pages) * static_cast<double>(page) / (1 << 30);
  const BuildInfo info = build_info();
  hw["cuda_devices"] = info.cuda_devices;
  return hw;
}

json software_json() {
  const BuildInfo info = build_info();
  return {{"alps", info.alps_version},
          {"source_revision", info.source_revision},
          {"libtorch", info.torch_version},
          {"cuda_build", info.cuda_build},
          {"blas", info.blas},
          {"threads", info.threads.threads},
          {"thread_pools", thread_settings_text(info.threads)}};
}

json to_json(const RunReport& r) {
  json layers = json::array();
  int64_t zeros = 0;
  int64_t total = 0;
  for (const auto& l : r.layers) {
    layers.push_back(to_json(l));
    const int64_t n = l.shape.size() == 2 ? l.shape[0] * l.shape[1] : 0;
    total += n;
    if (!l.skipped) zeros += static_cast<int64_t>(std::llround(l.sparsity * static_cast<double>(n)));
  }
  return {{"format", "alps-report/1"},
          {"complete", r.complete},
          {"model", r.model},
          {"output", r.output},
          {"recipe", r.recipe},
          {"software", software_json()},
          {"hardware", hardware_json()},
          {"blocks_done", r.blocks_done},
          {"blocks_total", r.blocks_total},
          {"linear_sparsity", total > 0 ? static_cast<double>(zeros) / static_cast<double>(total) : 0.0},
          {"phase_seconds", r.phase_seconds},
          {"layers", layers},
          {"eval", r.eval},
          {"files", r.files},
          {"extra", r.extra}};
}

std::string summary_text(const RunReport& r) {
  int64_t zeros = 0, total = 0, pruned = 0, skipped = 0;
  double solve = 0;
  // Per linear kind (the name after the block index), which is how layer errors are usually compared.
  struct Kind {
    double error = 0, seconds = 0;
    int count = 0;
  };
  std::map<std::string, Kind> by_kind;
  std::map<std::string, int> uses;  // "method pattern" -> layers
  for (const auto& l : r.layers) {
    const int64_t n = l.shape.size() == 2 ? l.shape[0] * l.shape[1] : 0;
    total += n;
    if (l.skipped) {
      ++skipped;
      continue;
    }
    ++pruned;
    ++uses[l.method + " " + l.pattern];
    zeros += static_cast<int64_t>(std::llround(l.sparsity * static_cast<double>(n)));
    solve += l.seconds + l.refine_seconds;
    const auto dot = l.name.find('.', l.name.find("layers.") + 7);
    Kind& k = by_kind[dot == std::string::npos ? l.name : l.name.substr(dot + 1)];
    k.error += l.rel_error_refined.value_or(l.rel_error);
    k.seconds += l.seconds + l.refine_seconds;
    ++k.count;
  }
  // What the layers were pruned with: the recipe's method and pattern, or each one overrides gave and how often.
  std::string what = r.recipe.value("method", "?") + " " + r.recipe.value("pattern", "?");
  if (uses.size() == 1) what = uses.begin()->first;
  if (uses.size() > 1) {
    what.clear();
    for (const auto& [use, count] : uses)
      what += fmt::format("{}{} ({} layer{})", what.empty() ? "" : ", ", use, count, count == 1 ? "" : "s");
  }
  std::string out = fmt::format(
      "{}: {} linear layers pruned ({} left dense) in {}/{} blocks, linear-layer sparsity {:.2f}%\n", what, pruned,
      skipped, r.blocks_done, r.blocks_total,
      total > 0 ? 100.0 * static_cast<double>(zeros) / static_cast<double>(total) : 0.0);
  out += fmt::format("\n{:<24} {:>6} {:>15} {:>10}\n", "layer kind", "layers", "mean rel. error", "solve s");
  for (const auto& [kind, k] : by_kind)
    out += fmt::format("{:<24} {:>6} {:>15.4e} {:>10.1f}\n", kind, k.count, k.error / k.count, k.seconds);
  out += fmt::format("\n{:<24} {:>10}\n", "phase", "seconds");
  double wall = 0;
  for (const auto& [phase, s] : r.phase_seconds) {
    out += fmt::format("{:<24} {:>10.1f}\n", phase, s);
    wall += s;
  }
  out += fmt::format("{:<24} {:>10.1f}  (layer solves {:.1f})\n", "total", wall, solve);
  if (!r.eval.empty()) out += fmt::format("\n{:<24} {:<16} {:>12}  {}\n", "evaluation", "metric", "value", "over");
  for (const auto& e : r.eval) {
    if (e.contains("task")) {  // zero-shot task: its metrics
      const auto& metrics = e["metrics"];
      for (const auto& [name, value] : metrics.items()) {
        if (!value.is_number() || (name.size() > 7 && name.compare(name.size() - 7, 7, "_stderr") == 0)) continue;
        const auto se = metrics.find(name + "_stderr");
        out += fmt::format("{:<24} {:<16} {:>12.4f}  {} documents{}\n", e.value("task", "?"), name,
                           value.get<double>(), e.value("docs", 0),
                           se != metrics.end() && se->is_number() ? fmt::format(", stderr {:.4f}", se->get<double>())
                                                                  : "");
      }
      continue;
    }
    out += fmt::format("{:<24} {:<16} {:>12.4f}  {} windows of {} tokens\n", e.value("dataset", "?"), "perplexity",
                       e.value("perplexity", 0.0), e.value("windows", 0), e.value("seqlen", 0));
  }
  return out;
}

}  // namespace alps::report
