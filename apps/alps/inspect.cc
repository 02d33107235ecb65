// `alps inspect`: what a checkpoint is (architecture, sizes, parameter count) and how sparse each linear is.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "alps/core/device.h"
#include "alps/core/paths.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/output_dir.h"
#include "alps/report/structured_summary.h"
#include "commands.h"

namespace alps::cli {

namespace {

struct InspectArgs {
  CommonOptions common;
  std::string model;
};

// What the block computes beyond a LLaMA block's defaults, in words, each one a ModelConfig value
// (docs/architectures.md).
std::vector<std::string> block_features(const model::ModelConfig& c) {
  std::vector<std::string> f;
  if (c.rotary_dim() != c.head_dim)
    f.push_back(fmt::format("RoPE on {} of {} dimensions per head", c.rotary_dim(), c.head_dim));
  if (c.sliding_rope_theta) f.push_back(fmt::format("sliding layers' RoPE base {}", *c.sliding_rope_theta));
  if (c.qk_norm != model::QkNorm::none)
    f.push_back(c.qk_norm == model::QkNorm::per_head ? "QK-norm per head" : "QK-norm over the whole projection");
  if (c.norm_placement == model::NormPlacement::post) f.push_back("norms after attention and MLP");
  if (c.norm_placement == model::NormPlacement::sandwich) f.push_back("norms before and after attention and MLP");
  if (c.fused_projections) f.push_back("fused qkv_proj and gate_up_proj");
  if (c.activation != "silu" && c.activation != "relu") f.push_back("activation " + c.activation);
  if (c.attention_softcap > 0) f.push_back(fmt::format("attention soft-cap {}", c.attention_softcap));
  if (c.logit_softcap > 0) f.push_back(fmt::format("logit soft-cap {}", c.logit_softcap));
  if (!c.language_model_prefix.empty())
    f.push_back("language model under '" + c.language_model_prefix + "', other tensors carried");
  if (c.clip_qkv > 0) f.push_back(fmt::format("q, k and v clipped to +-{}", c.clip_qkv));
  if (c.moe) {
    const model::MoeConfig& e = *c.moe;
    const auto mixtures = std::count(e.layers.begin(), e.layers.end(), true);
    f.push_back(
        fmt::format("{} experts of {}, {} per token{}{}, in {} of {} layers{}", e.num_experts, e.intermediate_size,
                    e.top_k, e.norm_topk_prob ? " (weights renormalised)" : "",
                    e.shared_expert_intermediate_size > 0
                        ? fmt::format(", a shared expert of {}", e.shared_expert_intermediate_size)
                        : "",
                    mixtures, c.num_layers,
                    e.fused ? "; stored fused (mlp.experts.gate_up_proj and down_proj), listed per expert" : ""));
  }
  return f;
}

// What alps wrote beside a pruned checkpoint: the block sparsities a sparsity profile aimed at (empty when uniform)
// and a structured run's steps with the parameters and weight bytes before (null when none), and those steps in
// words; all empty without a report this alps reads.
struct ReportBeside {
  std::vector<double> targets;
  nlohmann::json structured;
  std::string kept;
};

ReportBeside report_beside(const std::filesystem::path& dir, int64_t blocks) {
  const std::filesystem::path report = dir / pipeline::kReportFile;
  if (!std::filesystem::exists(report)) return {};
  try {
    const nlohmann::json r = nlohmann::json::parse(std::ifstream(report));
    ReportBeside out;
    const nlohmann::json& p = r.at("extra").value("sparsity_profile", nlohmann::json());
    if (!p.is_null()) out.targets = p.at("block_sparsity").get<std::vector<double>>();
    if (r.at("extra").contains("structured")) {
      const nlohmann::json& s = r.at("extra").at("structured");
      out.structured = {{"method", s.at("method")},
                        {"steps", s.at("steps")},
                        {"parameters", s.at("parameters")},
                        {"weight_bytes_before", s.value("weight_bytes_before", nlohmann::json())}};
      out.kept = report::kept_units_text(s, blocks);
    }
    return out;
  } catch (const nlohmann::json::exception&) {
    return {};  // not a report this alps reads: the checkpoint is inspected without it
  }
}

// The zeros of every prunable linear and every block, as --json lists them; a block's target beside it where a
// sparsity profile set one. A mixture's router is listed after its block's linears ("router": true) and counts in the
// totals only once pruned: it stays dense unless a recipe rule names it, and the totals are those of what the run
// pruned, as its summary counts them.
struct SparsityCount {
  nlohmann::json linears = nlohmann::json::array(), blocks = nlohmann::json::array();
  int64_t params = 0, zeros = 0;
};

SparsityCount count_zeros(const model::CausalLM& m, const std::vector<double>& targets) {
  SparsityCount out;
  for (int64_t b = 0; b < m.num_blocks(); ++b) {
    int64_t block_params = 0, block_zeros = 0;
    const std::string router_name = m.router_name(b);
    std::vector<std::string> names = m.linear_names(b);
    if (!router_name.empty()) names.push_back(router_name);
    for (const std::string& l : names) {
      const std::string name = m.weight_name(b, l);
      const at::Tensor w = m.tensor(name);
      const int64_t zeros = w.numel() - w.count_nonzero().item<int64_t>();
      const bool router = l == router_name, counted = !router || zeros > 0;
      block_params += counted ? w.numel() : 0;
      block_zeros += counted ? zeros : 0;
      out.linears.push_back({{"name", name},
                             {"shape", {w.size(0), w.size(1)}},
                             {"dtype", dtype_name(w.scalar_type())},
                             {"zeros", zeros},
                             {"sparsity", static_cast<double>(zeros) / static_cast<double>(w.numel())}});
      if (router) out.linears.back()["router"] = true;
    }
    nlohmann::json block = {{"block", b},
                            {"sparsity", block_params ? static_cast<double>(block_zeros) / block_params : 0.0}};
    if (static_cast<size_t>(b) < targets.size()) block["target"] = targets[static_cast<size_t>(b)];
    out.blocks.push_back(block);
    out.params += block_params;
    out.zeros += block_zeros;
  }
  return out;
}

// Everything `alps inspect --json` prints; the text form reads it back.
nlohmann::json inspect_document(const std::string& model_arg, const model::CausalLM& m, const ReportBeside& beside) {
  const model::ModelConfig& c = m.config();
  const SparsityCount n = count_zeros(m, beside.targets);
  nlohmann::json doc{{"model", model_arg},
                     {"architecture", c.architecture},
                     {"hidden_size", c.hidden_size},
                     {"intermediate_size", c.intermediate_size},
                     {"num_layers", c.num_layers},
                     {"num_heads", c.num_heads},
                     {"num_kv_heads", c.num_kv_heads},
                     {"vocab_size", c.vocab_size},
                     {"max_positions", c.max_positions},
                     {"tie_word_embeddings", c.tie_word_embeddings},
                     {"head_dim", c.head_dim},
                     {"rotary_dim", c.rotary_dim()},
                     {"block_features", block_features(c)},
                     {"rope_scaling", nullptr},
                     {"sliding_window", c.sliding_window},
                     {"parameters", m.num_parameters()},
                     {"weight_file_bytes", m.weight_file_bytes()},
                     {"linear_parameters", n.params},
                     {"linear_sparsity", n.params ? static_cast<double>(n.zeros) / n.params : 0.0},
                     {"blocks", n.blocks},
                     {"linears", n.linears}};
  if (c.rope_scaling) doc["rope_scaling"] = {{"type", c.rope_scaling->type}, {"factor", c.rope_scaling->factor}};
  if (c.moe) {
    nlohmann::json layers = nlohmann::json::array();
    for (int64_t i = 0; i < c.num_layers; ++i)
      if (c.is_moe_layer(i)) layers.push_back(i);
    doc["experts"] = {{"num_experts", c.moe->num_experts},
                      {"per_token", c.moe->top_k},
                      {"intermediate_size", c.moe->intermediate_size},
                      {"shared_expert_intermediate_size", c.moe->shared_expert_intermediate_size},
                      {"layers", layers}};
  }
  if (!beside.structured.is_null()) doc["structured"] = beside.structured;
  return doc;
}

std::string joined(const nlohmann::json& items, const char* sep) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i.get<std::string>();
  return out;
}

void print_inspect(const nlohmann::json& doc, const model::ModelConfig& c, const ReportBeside& beside) {
  std::cout << fmt::format("{} ({}): {} layers, hidden {}, MLP {}, {} heads ({} KV) of {}, vocab {}, {} positions\n",
                           c.architecture, doc["model"].get<std::string>(), c.num_layers, c.hidden_size,
                           c.intermediate_size, c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size, c.max_positions);
  if (doc.contains("structured")) {
    const nlohmann::json& s = doc["structured"];
    const nlohmann::json& bytes = s["weight_bytes_before"];
    std::cout << fmt::format(
        "structured ({}, alps-report.json): kept {}; before: {} parameters{}\n", s["method"].get<std::string>(),
        beside.kept, s["parameters"]["before"].get<int64_t>(),
        bytes.is_null() ? "" : fmt::format(", weight files {:.1f} MB", bytes.get<int64_t>() / 1e6));
  }
  if (c.rope_scaling)
    std::cout << fmt::format("RoPE scaling {} (factor {})\n", c.rope_scaling->type, c.rope_scaling->factor);
  if (!doc["block_features"].empty()) std::cout << fmt::format("block: {}\n", joined(doc["block_features"], "; "));
  if (!c.sliding_window.empty()) {
    nlohmann::json windows = nlohmann::json::array();
    for (int64_t w : c.sliding_window) windows.push_back(w > 0 ? std::to_string(w) : "none");
    std::cout << fmt::format("sliding window per layer: {}\n", joined(windows, ", "));
  }
  std::cout << fmt::format("parameters {} ({} in prunable linears, sparsity {:.4f}), weight files {:.1f} MB\n",
                           doc["parameters"].get<int64_t>(), doc["linear_parameters"].get<int64_t>(),
                           doc["linear_sparsity"].get<double>(), doc["weight_file_bytes"].get<int64_t>() / 1e6);
  // Numbered as the checkpoint numbers them (model.layers.0), as --json and the linears below do.
  std::cout << fmt::format("{:<8} {:>9}{}\n", "layer", "sparsity",
                           !beside.targets.empty() ? "   target (alps-report.json: sparsity profile)" : "");
  for (const auto& b : doc["blocks"])
    std::cout << fmt::format("{:<8} {:>9.4f}{}\n", b["block"].get<int64_t>(), b["sparsity"].get<double>(),
                             b.contains("target") ? fmt::format(" {:>9.4f}", b["target"].get<double>()) : "");
  std::cout << fmt::format("{:<48} {:>14} {:>6} {:>9}\n", "linear", "shape", "dtype", "sparsity");
  for (const auto& l : doc["linears"])
    std::cout << fmt::format("{:<48} {:>14} {:>6} {:>9.4f}{}\n", l["name"].get<std::string>(),
                             fmt::format("{}x{}", l["shape"][0].get<int64_t>(), l["shape"][1].get<int64_t>()),
                             l["dtype"].get<std::string>(), l["sparsity"].get<double>(),
                             l.contains("router") ? "  router" : "");
}

int run_inspect(const InspectArgs& a) {
  const std::filesystem::path dir = resolve_model_dir(a.model, data_dir());
  const model::CausalLM m = model::CausalLM::load(dir);
  const ReportBeside beside = report_beside(dir, m.num_blocks());
  const nlohmann::json doc = inspect_document(a.model, m, beside);
  if (a.common.json)
    print_json(doc);
  else
    print_inspect(doc, m.config(), beside);
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, Runner& runner) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Architecture, parameter count and per-linear shape and sparsity");
  cmd->add_option("--model", a->model, model_flag_help())->required();
  add_common_flags(cmd, a->common, /*with_device=*/false);
  cmd->callback([a, &runner] { runner = [a] { return run_inspect(*a); }; });
}

}  // namespace alps::cli
