#include "alps/report/report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "alps/core/build_info.h"
#include "alps/core/strings.h"
#include "alps/report/structured_summary.h"

namespace alps::report {

using json = nlohmann::json;

json to_json(const LayerReport& r) {
  json j = {{"block", r.block}, {"name", r.name}, {"shape", r.shape}, {"skipped", r.skipped}};
  if (r.skipped) return j;
  j.update({{"method", r.method},
            {"pattern", r.pattern},
            {"refine", r.refine},
            {"sparsity", r.sparsity},
            {"rel_error", r.rel_error ? json(*r.rel_error) : json(nullptr)},
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
  if (!j.at("rel_error").is_null()) r.rel_error = j.at("rel_error").get<double>();
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
          {"eval_dense", r.eval_dense},
          {"files", r.files},
          {"extra", r.extra}};
}

namespace {

// The phases in the order a run goes through them; a phase this list does not know comes after them.
std::vector<std::string> phases_in_run_order(const std::map<std::string, double>& seconds) {
  // A distributed run reduces each block's statistics before its solves and sends the solved weights after them.
  static const std::vector<std::string> kOrder = {
      "dense_eval", "calibration",       "sparsity_profile", "statistics", "structured", "reduce_statistics",
      "solve",      "broadcast_weights", "pruned_forward",   "save_state", "eval",       "save"};
  std::vector<std::string> out;
  for (const auto& p : kOrder)
    if (seconds.count(p) > 0) out.push_back(p);
  for (const auto& [p, s] : seconds)
    if (std::find(kOrder.begin(), kOrder.end(), p) == kOrder.end()) out.push_back(p);
  return out;
}

// Per linear kind (the name after the block index), which is how layer errors are usually compared.
struct Kind {
  double error = 0, seconds = 0;
  int count = 0, measured = 0;
  int64_t zeros = 0, total = 0;
};

// What the summary and the model card say of a run's layers, counted once.
struct Tally {
  int64_t zeros = 0, total = 0, pruned = 0, skipped = 0;
  double solve = 0;
  std::map<std::string, Kind> by_kind;
  std::map<std::string, int> uses;               // "method pattern" -> layers
  std::map<std::string, int64_t> expert_tokens;  // "model.layers.3.mlp.experts.17" -> the tokens routed to it
};

// An expert's linear ("...mlp.experts.17.gate_proj"): where its index sits in the name, or npos.
size_t expert_index_at(const std::string& name) {
  const size_t at = name.find(".experts.");
  return at == std::string::npos ? at : at + 9;
}

Tally tally(const RunReport& r) {
  Tally t;
  for (const auto& l : r.layers) {
    const int64_t n = l.shape.size() == 2 ? l.shape[0] * l.shape[1] : 0;
    t.total += n;
    if (l.skipped) {
      ++t.skipped;
      continue;
    }
    ++t.pruned;
    ++t.uses[l.method + " " + l.pattern];
    const int64_t z = static_cast<int64_t>(std::llround(l.sparsity * static_cast<double>(n)));
    t.zeros += z;
    t.solve += l.seconds + l.refine_seconds;
    // The experts of a mixture are one kind each of gate, up and down, whatever their index.
    std::string name = l.name;
    if (const size_t e = expert_index_at(name); e != std::string::npos) {
      const size_t end = name.find('.', e);
      if (const auto tokens = l.stats.find("tokens"); tokens != l.stats.end() && tokens->is_number_integer())
        t.expert_tokens.emplace(name.substr(0, end), tokens->get<int64_t>());
      name.replace(e, end - e, "*");
    }
    const auto dot = name.find('.', name.find("layers.") + 7);
    Kind& k = t.by_kind[dot == std::string::npos ? name : name.substr(dot + 1)];
    if (const auto e = l.rel_error_refined ? l.rel_error_refined : l.rel_error) {
      k.error += *e;
      ++k.measured;
    }
    k.seconds += l.seconds + l.refine_seconds;
    k.zeros += z;
    k.total += n;
    ++k.count;
  }
  return t;
}

double percent(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// The run's sparsity profile (--sparsity-profile owl): its statistics and block sparsities, or null for uniform runs.
const json* sparsity_profile(const RunReport& r) {
  const auto it = r.extra.find("sparsity_profile");
  return it == r.extra.end() || it->is_null() ? nullptr : &*it;
}

std::string description(const RunReport& r, const Tally& t) {
  // What the layers were pruned with: the recipe's method and pattern, or each one overrides gave and how often.
  std::string what = r.recipe.value("method", "?") + " " + r.recipe.value("pattern", "?");
  if (t.uses.size() == 1) what = t.uses.begin()->first;
  if (const json* p = sparsity_profile(r)) {  // one sparsity per block: named by the profile, not block by block
    what = fmt::format("{} {}, sparsity profile {}", r.recipe.value("method", "?"), r.recipe.value("pattern", "?"),
                       p->value("profile", "?"));
  } else if (t.uses.size() > 1) {
    what.clear();
    for (const auto& [use, count] : t.uses)
      what += fmt::format("{}{} ({} layer{})", what.empty() ? "" : ", ", use, count, count == 1 ? "" : "s");
  }
  std::string structured;  // what the structured steps kept, before the unstructured pruning of the rest
  if (r.extra.contains("structured")) {
    const json& s = r.extra.at("structured");
    structured = fmt::format("{} kept {}", s.value("method", "?"), kept_units_text(s, r.blocks_done));
    if (t.pruned == 0)
      return fmt::format("{} ({}/{} blocks); no unstructured pruning", structured, r.blocks_done, r.blocks_total);
    structured += "; then ";
  }
  std::string orders;  // N:M in another order of some linears' inputs (RIA's channel permutation)
  if (r.extra.contains("channel_orders")) {
    const json& c = r.extra.at("channel_orders");
    orders = fmt::format("; {} linears are N:M with their inputs in the orders of {}", c.value("linears", 0),
                         c.value("file", "?"));
  }
  return fmt::format("{}{}: {} linear layers pruned ({} left dense) in {}/{} blocks, linear-layer sparsity {:.2f}%{}",
                     structured, what, t.pruned, t.skipped, r.blocks_done, r.blocks_total, percent(t.zeros, t.total),
                     orders);
}

}  // namespace

std::string pruning_description(const RunReport& r) { return description(r, tally(r)); }

namespace {

// Layers by kind: count, sparsity, mean relative error, solve time.
std::string kind_table(const Tally& t) {
  if (t.pruned == 0) return "";  // structured pruning alone
  std::string out = fmt::format("\n{:<24} {:>6} {:>9} {:>15} {:>10}\n", "layer kind", "layers", "sparsity",
                                "mean rel. error", "solve s");
  for (const auto& [kind, k] : t.by_kind)
    out += fmt::format("{:<24} {:>6} {:>8.2f}% {:>15} {:>10.1f}\n", kind, k.count, percent(k.zeros, k.total),
                       k.measured > 0 ? fmt::format("{:.4e}", k.error / k.measured) : "not measured", k.seconds);
  return out;
}

// How many calibration tokens the experts of a mixture saw; empty for a dense model.
std::string expert_line(const Tally& t) {
  if (t.expert_tokens.empty()) return "";
  std::vector<int64_t> tokens;
  for (const auto& [expert, n] : t.expert_tokens) tokens.push_back(n);
  std::sort(tokens.begin(), tokens.end());
  const auto none = std::count(tokens.begin(), tokens.end(), 0);
  return fmt::format("\nexperts: {} saw {} / {} / {} calibration tokens (min / median / max){}\n", tokens.size(),
                     tokens.front(), tokens[tokens.size() / 2], tokens.back(),
                     none > 0 ? fmt::format("; {} saw none and were pruned by magnitude", none) : "");
}

// A sparsity profile's targets per block beside what the layers of each block reached; empty without a profile.
std::string profile_table(const RunReport& r) {
  const json* profile = sparsity_profile(r);
  if (profile == nullptr) return "";
  const json& p = *profile;
  const auto target = p.at("block_sparsity").get<std::vector<double>>();
  std::vector<double> zeros(target.size(), 0), total(target.size(), 0);
  for (const auto& l : r.layers) {
    if (l.skipped || l.block < 0 || static_cast<size_t>(l.block) >= target.size() || l.shape.size() != 2) continue;
    const double n = static_cast<double>(l.shape[0] * l.shape[1]);
    zeros[static_cast<size_t>(l.block)] += l.sparsity * n;
    total[static_cast<size_t>(l.block)] += n;
  }
  std::string out = fmt::format("\nsparsity profile {} (M {}, lambda {}): per block, target and reached\n",
                                p.value("profile", ""), p.value("m", 0.0), p.value("lambda", 0.0));
  for (size_t b = 0; b < target.size(); ++b)
    out += fmt::format("  block {:>3} {:>8.4f} {:>8}\n", b + 1, target[b],
                       total[b] > 0 ? fmt::format("{:.4f}", zeros[b] / total[b]) : "-");
  if (p.contains("zeros") && p.contains("weights"))  // the model-wide count the profile's layers share
    out += fmt::format("  {} zeros in the {} weights that follow the profile: round({} x {})\n",
                       p.at("zeros").get<int64_t>(), p.at("weights").get<int64_t>(), p.value("sparsity", 0.0),
                       p.at("weights").get<int64_t>());
  return out;
}

// The phases in run order and their total, beside the time of the layer solves within them.
std::string phase_table(const RunReport& r, double solve) {
  std::string out = fmt::format("\n{:<24} {:>10}\n", "phase", "seconds");
  double wall = 0;
  for (const auto& phase : phases_in_run_order(r.phase_seconds)) {
    const double s = r.phase_seconds.at(phase);
    out += fmt::format("{:<24} {:>10.1f}\n", phase, s);
    wall += s;
  }
  // The solve phase also forms each layer's problem and moves weights: the methods' own share, said as such.
  return out + fmt::format("{:<24} {:>10.1f}  (of which the methods' own layer solves {:.1f}, inside solve)\n", "total",
                           wall, solve);
}

// Every evaluation's figures; with --eval-dense, the input model's figure beside each of the pruned model's.
std::string eval_table(const RunReport& r) {
  const bool with_dense = !r.eval_dense.empty();
  auto dense = [&](const json& e, const std::string& metric) -> std::string {
    if (!with_dense) return "";
    for (const auto& d : r.eval_dense) {
      const bool same = e.contains("task") ? d.value("task", "") == e.value("task", "?")
                                           : d.value("dataset", "") == e.value("dataset", "?");
      if (!same) continue;
      const json& v = e.contains("task") ? d["metrics"].value(metric, json()) : d.value(metric, json());
      if (v.is_number()) return fmt::format(" {:>12.4f}", v.get<double>());
    }
    return fmt::format(" {:>12}", "-");
  };
  std::string out;
  if (!r.eval.empty())
    out += fmt::format("\n{:<24} {:<16} {:>12}{}  {}\n", "evaluation", "metric", "value",
                       with_dense ? fmt::format(" {:>12}", "dense") : "", "over");
  for (const auto& e : r.eval) {
    if (e.contains("task")) {  // zero-shot task: its metrics
      const auto& metrics = e["metrics"];
      for (const auto& [name, value] : metrics.items()) {
        if (!value.is_number() || (name.size() > 7 && ends_with(name, "_stderr"))) continue;
        const auto se = metrics.find(name + "_stderr");
        out += fmt::format(
            "{:<24} {:<16} {:>12.4f}{}  {} documents{}\n", e.value("task", "?"), name, value.get<double>(),
            dense(e, name), e.value("docs", 0),
            se != metrics.end() && se->is_number() ? fmt::format(", stderr {:.4f}", se->get<double>()) : "");
      }
      continue;
    }
    out += fmt::format("{:<24} {:<16} {:>12.4f}{}  {} windows of {} tokens\n", e.value("dataset", "?"), "perplexity",
                       e.value("perplexity", 0.0), dense(e, "perplexity"), e.value("windows", 0), e.value("seqlen", 0));
  }
  return out;
}

}  // namespace

std::string summary_text(const RunReport& r) {
  const Tally t = tally(r);
  return description(r, t) + "\n" + kind_table(t) + expert_line(t) + structured_table(r) + profile_table(r) +
         phase_table(r, t.solve) + eval_table(r) +
         (r.output.empty() ? "" : "\npruned checkpoint and report: " + r.output + "\n");
}

}  // namespace alps::report
