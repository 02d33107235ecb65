#include "model/llama_layout.h"

#include "alps/core/error.h"

namespace alps::model {

namespace {

// The rows of `linear` (and its bias) follow the units in `runs`.
void follow(UnitRule& rule, const std::string& linear, bool bias, std::vector<RowRun> runs) {
  rule.rows.push_back({linear + ".weight", runs});
  if (bias) rule.rows.push_back({linear + ".bias", runs});
}

}  // namespace

LlamaLayout::LlamaLayout(const ModelConfig& c) : c_(c) {
  if (c_.moe) moe_.emplace(*c_.moe);
}

int64_t LlamaLayout::experts_of(int64_t block, const ShapeFn& shape) const {
  return shape(block_prefix(block) + moe_->router() + ".weight")[0];
}

// o_proj reads every query head's output, and a fused qkv_proj's rows are the queries' then the keys' and the
// values'.
std::pair<int64_t, int64_t> LlamaLayout::heads_of(int64_t block, const ShapeFn& shape) const {
  const std::string p = block_prefix(block);
  const int64_t D = c_.head_dim, H = shape(p + "self_attn.o_proj.weight")[1] / D;
  if (c_.fused_projections) return {H, (shape(p + "self_attn.qkv_proj.weight")[0] / D - H) / 2};
  return {H, shape(p + "self_attn.k_proj.weight")[0] / D};
}

std::vector<UnitRule> LlamaLayout::unit_rules(int64_t block, Structure s, const ShapeFn& shape) const {
  if (s == Structure::experts) return {UnitRule::refused("experts leave by CausalLM::keep_experts, not by rows")};
  if (s == Structure::neurons) return neuron_rules(block, shape);
  // Normalised over every head at once, the kept heads' queries and keys would change with the removed ones.
  if (c_.qk_norm == QkNorm::whole) return {UnitRule::refused("its q_norm and k_norm normalise all heads together")};
  // transformers' Phi3Config checks longrope's factors against hidden_size / num_attention_heads, not head_dim:
  // with fewer heads it refuses the output's config.
  if (c_.fused_projections && c_.rope_scaling && c_.rope_scaling->type == "longrope")
    return {UnitRule::refused(
        "its longrope factors are checked against hidden_size / num_attention_heads by transformers, which fewer "
        "heads would change")};
  return {head_rule(block, s, shape)};
}

// The neurons of one gated MLP (the block's, an expert's): down's input columns, the rows of gate and up (or of a
// fused gate_up_proj: the gate's, then the up's).
UnitRule LlamaLayout::mlp_rule(const std::string& gate, const std::string& up, const std::string& down,
                               const std::string& field, int64_t units, bool bias) const {
  UnitRule rule;
  rule.consumer = down;
  rule.field = field;
  rule.units = units;
  if (c_.fused_projections) {
    follow(rule, "mlp.gate_up_proj", bias, {{1}, {1}});
  } else {
    follow(rule, gate, bias, {{1}});
    follow(rule, up, bias, {{1}});
  }
  return rule;
}

std::vector<UnitRule> LlamaLayout::neuron_rules(int64_t block, const ShapeFn& shape) const {
  const std::string p = block_prefix(block);
  if (!c_.is_moe_layer(block))
    return {mlp_rule("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "intermediate_size",
                     shape(p + "mlp.down_proj.weight")[1], c_.mlp_bias)};
  // A mixture: each expert's neurons, as many from each (one intermediate size states them all), and the shared
  // expert's.
  std::vector<UnitRule> rules;
  const MoeNames& n = *moe_;
  for (int64_t e = 0, E = experts_of(block, shape); e < E; ++e)
    rules.push_back(
        mlp_rule(n.gate(e), n.up(e), n.down(e), c_.moe->intermediate_key, shape(p + n.down(e) + ".weight")[1], false));
  for (UnitRule& r : rules) r.multiple = 8;
  if (c_.moe->shared_expert_intermediate_size > 0)
    rules.push_back(mlp_rule(n.shared("gate_proj"), n.shared("up_proj"), n.shared("down_proj"),
                             "shared_expert_intermediate_size", shape(p + n.shared("down_proj") + ".weight")[1],
                             false));
  return rules;
}

UnitRule LlamaLayout::head_rule(int64_t block, Structure s, const ShapeFn& shape) const {
  const int64_t D = c_.head_dim;
  const auto [H, KV] = heads_of(block, shape);
  const bool qkv_bias = c_.attention_bias || c_.qkv_bias;
  UnitRule rule;
  rule.consumer = "self_attn.o_proj";
  if (s == Structure::heads) {  // the same count from each key/value group: the groups stay equal
    rule.field = "num_attention_heads";
    rule.units = H;
    rule.width = D;
    rule.parts = KV;
    if (c_.fused_projections)  // q | k | v: the keys and values all stay
      follow(rule, "self_attn.qkv_proj", qkv_bias, {{D}, {0, 2 * KV * D}});
    else
      follow(rule, "self_attn.q_proj", qkv_bias, {{D}});
    return rule;
  }
  // Whole key/value groups with their query heads.
  rule.field = "num_key_value_heads";
  rule.units = KV;
  rule.width = H / KV * D;
  if (c_.fused_projections) {
    follow(rule, "self_attn.qkv_proj", qkv_bias, {{H / KV * D}, {D}, {D}});
  } else {
    follow(rule, "self_attn.q_proj", qkv_bias, {{H / KV * D}});
    follow(rule, "self_attn.k_proj", qkv_bias, {{D}});
    follow(rule, "self_attn.v_proj", qkv_bias, {{D}});
  }
  return rule;
}

nlohmann::json LlamaLayout::config_of_shapes(const ShapeFn& shape) const {
  nlohmann::json fields = nlohmann::json::object();
  std::optional<int64_t> f, fe, fs, H, KV, E;
  auto agree = [&](std::optional<int64_t>& seen, int64_t value, const char* what, int64_t block) {
    ALPS_CHECK(!seen || *seen == value, "block ", block, " has ", value, " ", what, ", block 0 ", *seen,
               ": a config.json states one count for every block");
    seen = value;
  };
  for (int64_t i = 0; i < c_.num_layers; ++i) {
    const std::string p = block_prefix(i);
    if (c_.is_moe_layer(i)) {
      const MoeNames& n = *moe_;
      agree(E, experts_of(i, shape), "experts", i);
      for (int64_t e = 0; e < *E; ++e) agree(fe, shape(p + n.down(e) + ".weight")[1], "neurons per expert", i);
      if (c_.moe->shared_expert_intermediate_size > 0)
        agree(fs, shape(p + n.shared("down_proj") + ".weight")[1], "shared expert neurons", i);
    } else {
      agree(f, shape(p + "mlp.down_proj.weight")[1], "MLP neurons", i);
    }
    const auto [heads, kv_heads] = heads_of(i, shape);
    agree(H, heads, "query heads", i);
    agree(KV, kv_heads, "key/value heads", i);
  }
  if (f && *f != c_.intermediate_size) fields["intermediate_size"] = *f;
  if (fe && *fe != c_.moe->intermediate_size) fields[c_.moe->intermediate_key] = *fe;
  if (fs && *fs != c_.moe->shared_expert_intermediate_size) fields["shared_expert_intermediate_size"] = *fs;
  if (E && *E != c_.moe->num_experts)
    for (const std::string& key : c_.moe->count_keys) fields[key] = *E;
  if (*H != c_.num_heads || *KV != c_.num_kv_heads) {
    fields["num_attention_heads"] = *H;
    fields["num_key_value_heads"] = *KV;
    fields["head_dim"] = c_.head_dim;  // no longer hidden_size / num_attention_heads
  }
  return fields;
}

}  // namespace alps::model
