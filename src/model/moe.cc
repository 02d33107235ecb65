#include "model/moe.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "alps/core/error.h"
#include "model/architecture.h"
#include "model/config_reader.h"

namespace alps::model {

MoeNames::MoeNames(const MoeConfig& c)
    : c_(c),
      root_(c.naming == ExpertNaming::mixtral ? "block_sparse_moe." : "mlp."),
      gate_(c.naming == ExpertNaming::mixtral ? "w1" : "gate_proj"),
      up_(c.naming == ExpertNaming::mixtral ? "w3" : "up_proj"),
      down_(c.naming == ExpertNaming::mixtral ? "w2" : "down_proj") {}

std::string MoeNames::router() const { return root_ + "gate"; }
std::string MoeNames::gate(int64_t e) const { return root_ + "experts." + std::to_string(e) + "." + gate_; }
std::string MoeNames::up(int64_t e) const { return root_ + "experts." + std::to_string(e) + "." + up_; }
std::string MoeNames::down(int64_t e) const { return root_ + "experts." + std::to_string(e) + "." + down_; }
std::string MoeNames::shared(const char* projection) const { return root_ + "shared_expert." + projection; }
std::string MoeNames::shared_gate() const { return root_ + "shared_expert_gate"; }

std::vector<std::string> MoeNames::linears(int64_t experts) const {
  std::vector<std::string> names;
  for (int64_t e = 0; e < experts; ++e) {
    names.push_back(gate(e));
    names.push_back(up(e));
    names.push_back(down(e));
  }
  if (c_.shared_expert_intermediate_size > 0)
    for (const char* p : {"gate_proj", "up_proj", "down_proj"}) names.push_back(shared(p));
  return names;
}

std::vector<std::string> MoeNames::expert_tensors(int64_t e) const {
  return {gate(e) + ".weight", up(e) + ".weight", down(e) + ".weight"};
}

std::vector<TensorSpec> MoeNames::specs(const std::string& prefix, int64_t hidden) const {
  const int64_t f = c_.intermediate_size, fs = c_.shared_expert_intermediate_size;
  std::vector<TensorSpec> s{{prefix + router() + ".weight", {c_.num_experts, hidden}}};
  for (int64_t e = 0; e < c_.num_experts; ++e) {
    s.push_back({prefix + gate(e) + ".weight", {f, hidden}});
    s.push_back({prefix + up(e) + ".weight", {f, hidden}});
    s.push_back({prefix + down(e) + ".weight", {hidden, f}});
  }
  if (fs > 0) {
    s.push_back({prefix + shared("gate_proj") + ".weight", {fs, hidden}});
    s.push_back({prefix + shared("up_proj") + ".weight", {fs, hidden}});
    s.push_back({prefix + shared("down_proj") + ".weight", {hidden, fs}});
    s.push_back({prefix + shared_gate() + ".weight", {1, hidden}});
  }
  return s;
}

namespace {

// Which tokens each expert takes, in ascending token order, and their weights.
struct Routing {
  at::Tensor tokens;             ///< [N * top_k] token indices grouped by expert
  at::Tensor weights;            ///< [N * top_k] the matching routing weights
  at::Tensor probability;        ///< [N * top_k] fp32: the softmax's probability before any renormalisation
  std::vector<int64_t> offsets;  ///< expert e's share is [offsets[e], offsets[e + 1])
};

Routing route(const MoeConfig& c, const at::Tensor& x, const at::Tensor& router) {
  const int64_t E = router.size(0);
  ALPS_CHECK(c.top_k <= E, "a mixture layer of ", E, " experts cannot route each token to ", c.top_k);
  const at::Tensor logits = at::linear(x, router);  // [N, E] in the compute dtype
  const at::Tensor probs = at::softmax(logits, -1, at::kFloat);
  auto [top, experts] = at::topk(probs, c.top_k, -1);
  const at::Tensor probability = top;
  if (c.norm_topk_prob) top = top / top.sum(-1, /*keepdim=*/true);
  if (!c.weights_fp32) top = top.to(logits.scalar_type());
  // A stable sort of the (token, slot) pairs by expert keeps each expert's tokens in ascending order.
  const at::Tensor flat = experts.reshape(-1);
  const at::Tensor order = std::get<1>(at::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor counts = at::bincount(flat, {}, E).to(at::kCPU);
  Routing r{at::div(order, c.top_k, "floor"),
            top.reshape(-1).index_select(0, order),
            probability.reshape(-1).index_select(0, order),
            {0}};
  const int64_t* n = counts.data_ptr<int64_t>();
  for (int64_t e = 0; e < E; ++e) r.offsets.push_back(r.offsets.back() + n[e]);
  return r;
}

void show(const MoeIo& io, const std::string& linear, const at::Tensor& x) {
  if (io.observe) io.observe(linear, x);
}

// A gated MLP's product before its down projection: act(x gate^T) * (x up^T).
at::Tensor gated(const MoeIo& io, const at::Tensor& x, const std::string& gate, const std::string& up) {
  return io.activation(apply_linear(x, io.weight(gate))).mul_(apply_linear(x, io.weight(up)));
}

}  // namespace

at::Tensor moe_forward(const MoeConfig& c, const MoeNames& names, const MoeIo& io, const at::Tensor& h,
                       const MoeObservation& observation) {
  const at::Tensor x = h.reshape({-1, h.size(-1)});  // [N, hidden]
  const at::Tensor router = io.weight(names.router());
  const int64_t E = router.size(0);
  const bool all = observation.all_experts;
  // Outputs are computed for the tally even where only inputs are wanted.
  const bool outputs = observation.outputs != nullptr;
  const bool inputs_only = observation.inputs_only && !outputs;
  const bool has_shared = c.shared_expert_intermediate_size > 0;
  // Every linear that reads h is shown it in one run of calls, so that they share one statistic.
  if (observation.router) show(io, names.router(), h);
  if (has_shared) {
    show(io, names.shared("gate_proj"), h);
    show(io, names.shared("up_proj"), h);
  }
  if (all)
    for (int64_t e = 0; e < E; ++e) {
      show(io, names.gate(e), h);
      show(io, names.up(e), h);
    }
  at::Tensor shared;
  if (has_shared) {
    const at::Tensor m = gated(io, x, names.shared("gate_proj"), names.shared("up_proj"));
    show(io, names.shared("down_proj"), m.view({h.size(0), h.size(1), -1}));
    if (!observation.inputs_only)
      shared = at::sigmoid(apply_linear(x, io.weight(names.shared_gate()))) *
               apply_linear(m, io.weight(names.shared("down_proj")));
  }
  if (all)  // each expert's product on every token, as its down projection would see it were every token routed
    for (int64_t e = 0; e < E; ++e)
      show(io, names.down(e), gated(io, x, names.gate(e), names.up(e)).view({h.size(0), h.size(1), -1}));
  if (all && inputs_only) return {};

  const Routing r = route(c, x, router);
  at::Tensor out = observation.inputs_only ? at::Tensor() : at::zeros_like(x);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t first = r.offsets[static_cast<size_t>(e)], n = r.offsets[static_cast<size_t>(e) + 1] - first;
    // An expert no token chose adds nothing; its linears are still shown their (empty) inputs, so that every rank of a
    // distributed run holds statistics for every linear, empty where its windows reached none.
    if (n == 0 && (all || !io.observe)) continue;
    const at::Tensor rows = r.tokens.narrow(0, first, n);
    const at::Tensor xe = x.index_select(0, rows);
    if (!all) {
      show(io, names.gate(e), xe);
      show(io, names.up(e), xe);
    }
    const at::Tensor m = gated(io, xe, names.gate(e), names.up(e));
    if (!all) show(io, names.down(e), m);
    if (inputs_only || n == 0) continue;
    const at::Tensor f = apply_linear(m, io.weight(names.down(e)));
    if (outputs) (*observation.outputs)(e, r.probability.narrow(0, first, n), f);
    if (observation.inputs_only) continue;
    const at::Tensor y = f.mul(r.weights.narrow(0, first, n).unsqueeze(-1));
    out.index_add_(0, rows, y.to(out.scalar_type()));
  }
  if (observation.inputs_only) return {};
  if (shared.defined()) out = out + shared;
  return out.view(h.sizes());
}

void read_moe_config(const ConfigReader& r, const MoeDefaults& d, ModelConfig& c) {
  MoeConfig m;
  m.naming = d.naming;
  // transformers 5 writes num_local_experts for a Qwen3-MoE config whose published config.json says num_experts.
  ALPS_CHECK(!(r.has("num_experts") && r.has("num_local_experts")) ||
                 r.raw().at("num_experts") == r.raw().at("num_local_experts"),
             r.path().string(), ": num_experts ", r.raw().value("num_experts", nlohmann::json()).dump(),
             " and num_local_experts ", r.raw().value("num_local_experts", nlohmann::json()).dump(), " disagree");
  const char* key = r.has("num_experts") ? "num_experts" : "num_local_experts";
  for (const char* k : {"num_experts", "num_local_experts"})
    if (r.has(k)) m.count_keys.emplace_back(k);
  if (m.count_keys.empty())
    m.count_keys.emplace_back(d.naming == ExpertNaming::mixtral ? "num_local_experts" : "num_experts");
  m.num_experts = r.optional_int(key).value_or(d.num_experts);
  r.check_positive(m.num_experts, key);
  m.top_k = r.optional_int("num_experts_per_tok").value_or(d.top_k);
  r.check_positive(m.top_k, "num_experts_per_tok");
  ALPS_CHECK(m.top_k <= m.num_experts, r.field("num_experts_per_tok"), ": ", m.top_k, " experts per token, but ", key,
             " is ", m.num_experts);
  m.intermediate_size = d.moe_intermediate_size
                            ? r.optional_int("moe_intermediate_size").value_or(*d.moe_intermediate_size)
                            : c.intermediate_size;
  if (d.moe_intermediate_size) m.intermediate_key = "moe_intermediate_size";
  r.check_positive(m.intermediate_size, m.intermediate_key.c_str());
  m.norm_topk_prob = d.always_normalise || r.boolean("norm_topk_prob", false);
  m.weights_fp32 = d.weights_fp32;
  if (d.shared_expert_intermediate_size) {
    m.shared_expert_intermediate_size =
        r.optional_int("shared_expert_intermediate_size").value_or(*d.shared_expert_intermediate_size);
    r.check_positive(m.shared_expert_intermediate_size, "shared_expert_intermediate_size");
  }
  const auto L = static_cast<size_t>(c.num_layers);
  m.layers.assign(L, true);
  if (d.sparse_layers) {
    // A layer is a mixture unless mlp_only_layers names it, and then only every decoder_sparse_step-th.
    const int64_t step = r.optional_int("decoder_sparse_step").value_or(1);
    r.check_positive(step, "decoder_sparse_step");
    for (size_t i = 0; i < L; ++i) m.layers[i] = (static_cast<int64_t>(i) + 1) % step == 0;
    if (r.has("mlp_only_layers")) {
      const nlohmann::json& only = r.raw().at("mlp_only_layers");
      ALPS_CHECK(only.is_array(), r.field("mlp_only_layers"), ": expected a list of layer indices, got ", only.dump());
      for (const nlohmann::json& i : only) {
        ALPS_CHECK(i.is_number_integer() && i.get<int64_t>() >= 0 && i.get<int64_t>() < c.num_layers,
                   r.field("mlp_only_layers"), ": expected layer indices below num_hidden_layers ", c.num_layers,
                   ", got ", i.dump());
        m.layers[i.get<size_t>()] = false;
      }
    }
  }
  c.moe = std::move(m);
}

}  // namespace alps::model
