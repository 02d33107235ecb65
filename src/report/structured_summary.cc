// A structured run in words: what each step kept and where, from the report's extra.structured.
#include "alps/report/structured_summary.h"

#include <fmt/format.h>

#include <vector>

namespace alps::report {

using json = nlohmann::json;

namespace {

bool is_experts_step(const json& step) { return step.value("structure", "") == "experts"; }

// The choices (extra.structured.blocks) a step made: those of its structure and, for neurons and heads, of its config
// field (a mixture's experts, shared expert and dense MLPs are three neuron steps).
std::vector<const json*> choices_of(const json& structured, const json& step) {
  std::vector<const json*> out;
  if (!structured.contains("blocks")) return out;
  for (const json& b : structured.at("blocks"))  // pointers into `structured` itself, not into a copy
    if (b.value("structure", "") == step.value("structure", "") &&
        (is_experts_step(step) || b.value("field", "") == step.value("field", "")))
      out.push_back(&b);
  return out;
}

}  // namespace

std::string structured_scope(const json& structured, const json& step, int64_t blocks) {
  std::string where = is_experts_step(step) ? "mixture layer" : "block";
  const std::vector<const json*> choices = choices_of(structured, step);
  for (const json* b : choices) {
    const std::string linear = b->value("linear", std::string());
    if (linear.find(".shared_expert.") != std::string::npos)
      where = "shared expert";
    else if (linear.find(".experts.") != std::string::npos)
      where = "expert";
  }
  const auto n = static_cast<int64_t>(choices.size());
  // A mixture model's dense MLPs (mlp_only_layers) are some of its blocks.
  return where == "block" && n < blocks ? fmt::format("{} of {} blocks, the dense MLPs", n, blocks) : "every " + where;
}

std::string kept_units_text(const json& structured, int64_t blocks) {
  std::string text;
  for (const json& step : structured.value("steps", json::array()))
    text += fmt::format("{}{} of {} {} in {}", text.empty() ? "" : "; ", step.value("kept", 0), step.value("units", 0),
                        step.value("structure", ""), structured_scope(structured, step, blocks));
  return text;
}

// A structured run: what each step kept and where, the mean error of its choice, and the model before and
// after (parameters; the weight files, once written).
std::string structured_table(const RunReport& r) {
  if (!r.extra.contains("structured")) return "";
  const json& s = r.extra.at("structured");
  std::string out = fmt::format("\nstructured ({}):\n", s.value("method", ""));
  for (const json& step : s.value("steps", json::array())) {
    // A neurons or heads step: the mean relative error of its layers' choices; experts: the mean share of the routed
    // output (probability times output norm) that the removed experts carried.
    const bool experts = is_experts_step(step);
    const std::vector<const json*> choices = choices_of(s, step);
    double error = 0;
    for (const json* b : choices) error += b->value(experts ? "removed_share" : "rel_error", 0.0);
    const double mean = choices.empty() ? 0.0 : error / static_cast<double>(choices.size());
    out += fmt::format("  {:<10} kept {} of {} in {} ({}{}), {}\n", step.value("structure", ""), step.value("kept", 0),
                       step.value("units", 0), structured_scope(s, step, r.blocks_done), step.value("flag", ""),
                       experts ? ", " + step.value("method", std::string()) : "",
                       experts ? fmt::format("removed {:.2f}% of the routed output", 100 * mean)
                               : fmt::format("mean err {:.4e}", mean));
  }
  if (s.contains("parameters")) {
    const json& p = s.at("parameters");
    const auto before = p.value("before", int64_t{0}), after = p.value("after", int64_t{0});
    out += fmt::format("  parameters {:.2f}M -> {:.2f}M ({:.1f}%)\n", before / 1e6, after / 1e6,
                       before > 0 ? 100.0 * static_cast<double>(after) / static_cast<double>(before) : 0.0);
  }
  int64_t written = 0;  // the model's weight files, not the channel orders beside them
  const std::string orders = r.extra.contains("channel_orders") ? r.extra.at("channel_orders").value("file", "") : "";
  for (const json& f : r.files) {
    const std::string name = f.value("name", "");
    if (name.find(".safetensors") != std::string::npos && name != orders) written += f.value("bytes", int64_t{0});
  }
  if (s.contains("weight_bytes_before") && written > 0)
    out += fmt::format("  weight files {:.1f} MB -> {:.1f} MB\n", s.at("weight_bytes_before").get<int64_t>() / 1e6,
                       written / 1e6);
  return out;
}

}  // namespace alps::report
