// `alps inspect`: what a checkpoint is (architecture, sizes, parameter count) and how sparse each linear is.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <iostream>

#include "alps/core/device.h"
#include "alps/core/paths.h"
#include "alps/model/causal_lm.h"
#include "commands.h"

namespace alps::cli {

namespace {

struct InspectArgs {
  CommonOptions common;
  std::string model;
};

int run_inspect(const InspectArgs& a) {
  const model::CausalLM m = model::CausalLM::load(resolve_model_dir(a.model, data_dir()));
  const model::ModelConfig& c = m.config();
  nlohmann::json linears = nlohmann::json::array();
  int64_t linear_params = 0, linear_zeros = 0;
  for (int64_t b = 0; b < m.num_blocks(); ++b)
    for (const std::string& l : m.linear_names()) {
      const std::string name = m.weight_name(b, l);
      const at::Tensor w = m.tensor(name);
      const int64_t zeros = w.numel() - w.count_nonzero().item<int64_t>();
      linear_params += w.numel();
      linear_zeros += zeros;
      linears.push_back({{"name", name},
                         {"shape", {w.size(0), w.size(1)}},
                         {"dtype", dtype_name(w.scalar_type())},
                         {"zeros", zeros},
                         {"sparsity", static_cast<double>(zeros) / static_cast<double>(w.numel())}});
    }
  const double sparsity = linear_params ? static_cast<double>(linear_zeros) / linear_params : 0.0;
  nlohmann::json doc{{"model", a.model},
                     {"architecture", c.architecture},
                     {"hidden_size", c.hidden_size},
                     {"intermediate_size", c.intermediate_size},
                     {"num_layers", c.num_layers},
                     {"num_heads", c.num_heads},
                     {"num_kv_heads", c.num_kv_heads},
                     {"vocab_size", c.vocab_size},
                     {"max_positions", c.max_positions},
                     {"tie_word_embeddings", c.tie_word_embeddings},
                     {"rope_scaling", nullptr},
                     {"sliding_window", c.sliding_window},
                     {"parameters", m.num_parameters()},
                     {"linear_parameters", linear_params},
                     {"linear_sparsity", sparsity},
                     {"linears", linears}};
  if (c.rope_scaling) doc["rope_scaling"] = {{"type", c.rope_scaling->type}, {"factor", c.rope_scaling->factor}};
  if (a.common.json) {
    print_json(doc);
    return 0;
  }
  std::cout << fmt::format("{} ({}): {} layers, hidden {}, {} heads ({} KV), vocab {}, {} positions\n",
                           c.architecture, a.model, c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads,
                           c.vocab_size, c.max_positions);
  if (c.rope_scaling)
    std::cout << fmt::format("RoPE scaling {} (factor {})\n", c.rope_scaling->type, c.rope_scaling->factor);
  if (!c.sliding_window.empty()) {
    std::string windows;
    for (int64_t w : c.sliding_window) windows += (windows.empty() ? "" : ", ") + (w > 0 ? std::to_string(w) : "none");
    std::cout << fmt::format("sliding window per layer: {}\n", windows);
  }
  std::cout << fmt::format("parameters {} ({} in prunable linears, sparsity {:.4f})\n", m.num_parameters(),
                           linear_params, sparsity);
  std::cout << fmt::format("{:<48} {:>14} {:>6} {:>9}\n", "linear", "shape", "dtype", "sparsity");
  for (const auto& l : linears)
    std::cout << fmt::format("{:<48} {:>14} {:>6} {:>9.4f}\n", l["name"].get<std::string>(),
                             fmt::format("{}x{}", l["shape"][0].get<int64_t>(), l["shape"][1].get<int64_t>()),
                             l["dtype"].get<std::string>(), l["sparsity"].get<double>());
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
