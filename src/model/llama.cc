// The forward of LLaMA and its descendants, following transformers' modeling_llama and the modeling files that
// derive from it: RMSNorm, RoPE (rotate_half convention; rope.h), grouped-query attention, a gated MLP, tied or
// untied lm_head. Mistral, Qwen2 and 3, OLMo 2, Gemma 2 and 3, Phi-3 and the mixtures of experts (Mixtral, Qwen2-MoE,
// Qwen3-MoE, OLMoE: moe.h) run this forward too: their differences are ModelConfig values (sliding windows, biases,
// QK-norm, norm placement and scaling, soft-capping, GeGLU, embedding scale, RoPE per layer type, expert MLPs) set
// by their own config readers.
#include <ATen/ATen.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "alps/core/error.h"
#include "model/architecture.h"
#include "model/moe.h"
#include "model/rms_norm.h"
#include "model/rope.h"
#include "model/rotary.h"

namespace alps::model {

namespace {

class Llama final : public Architecture {
 public:
  explicit Llama(const ModelConfig& c)
      : c_(c),
        rope_(RopeParameters{c.rope_theta, c.rope_scaling, c.partial_rotary_factor}, c.rotary_dim(), c.max_positions),
        sliding_rope_(RopeParameters{c.sliding_rope_theta.value_or(c.rope_theta), std::nullopt, 1.0}, c.rotary_dim(),
                      c.max_positions) {
    if (c_.moe) moe_names_.emplace(*c_.moe);
  }

  std::vector<TensorSpec> tensor_specs() const override {
    const int64_t h = c_.hidden_size, f = c_.intermediate_size, d = c_.head_dim;
    const int64_t q = c_.num_heads * d, kv = c_.num_kv_heads * d;
    std::vector<TensorSpec> s{{embed_name(), {c_.vocab_size, h}}, {model_ + "norm.weight", {h}}};
    // A tied head has no tensor of its own; tolerate a redundant copy as transformers does.
    s.push_back({lm_head_, {c_.vocab_size, h}, c_.tie_word_embeddings});
    for (int64_t i = 0; i < c_.num_layers; ++i) {
      const std::string p = block_prefix(i);
      for (const char* norm : block_norms()) s.push_back({p + norm + ".weight", {h}});
      if (c_.qk_norm != QkNorm::none) {
        const bool per_head = c_.qk_norm == QkNorm::per_head;
        s.push_back({p + "self_attn.q_norm.weight", {per_head ? d : q}});
        s.push_back({p + "self_attn.k_norm.weight", {per_head ? d : kv}});
      }
      auto linear = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
        s.push_back({p + name + ".weight", {out, in}});
        if (bias) s.push_back({p + name + ".bias", {out}});
      };
      const bool qkv_bias = c_.attention_bias || c_.qkv_bias;
      if (c_.fused_projections) {
        linear("self_attn.qkv_proj", q + 2 * kv, h, qkv_bias);
      } else {
        for (auto [name, out] : {std::pair{"self_attn.q_proj", q}, {"self_attn.k_proj", kv}, {"self_attn.v_proj", kv}})
          linear(name, out, h, qkv_bias);
      }
      linear("self_attn.o_proj", h, q, c_.attention_bias);
      if (c_.is_moe_layer(i)) {
        for (TensorSpec& t : moe_names_->specs(p, h)) s.push_back(std::move(t));
        continue;
      }
      if (c_.fused_projections) {
        linear("mlp.gate_up_proj", 2 * f, h, c_.mlp_bias);
      } else {
        linear("mlp.gate_proj", f, h, c_.mlp_bias);
        linear("mlp.up_proj", f, h, c_.mlp_bias);
      }
      linear("mlp.down_proj", h, f, c_.mlp_bias);
    }
    return s;
  }

  std::vector<std::string> linear_names(int64_t block, const ShapeFn& shape) const override {
    std::vector<std::string> names =
        c_.fused_projections
            ? std::vector<std::string>{"self_attn.qkv_proj", "self_attn.o_proj"}
            : std::vector<std::string>{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"};
    std::vector<std::string> mlp;
    if (c_.is_moe_layer(block))
      mlp = moe_names_->linears(experts_of(block, shape));
    else if (c_.fused_projections)
      mlp = {"mlp.gate_up_proj", "mlp.down_proj"};
    else
      mlp = {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    names.insert(names.end(), mlp.begin(), mlp.end());
    return names;
  }
  std::string block_prefix(int64_t i) const override { return model_ + "layers." + std::to_string(i) + "."; }
  std::optional<ExpertTensors> expert_tensors(int64_t block, const ShapeFn& shape) const override {
    if (!c_.is_moe_layer(block)) return std::nullopt;
    ExpertTensors t{moe_names_->router() + ".weight", {}};
    for (int64_t e = 0, E = experts_of(block, shape); e < E; ++e) t.experts.push_back(moe_names_->expert_tensors(e));
    return t;
  }
  std::vector<std::string> non_block_tensors() const override {
    return {embed_name(), model_ + "norm.weight", head_name()};
  }
  bool carried(const std::string& name) const override {
    const std::string& lm = c_.language_model_prefix;
    return !lm.empty() && name.compare(0, lm.size(), lm) != 0;
  }

  at::Tensor embed(const WeightFn& w, const at::Tensor& ids, const Placement& /*RoPE places tokens*/) const override {
    at::Tensor x = at::embedding(w(embed_name()), ids);
    if (!c_.scale_embeddings) return x;
    // transformers multiplies by sqrt(hidden_size) held as an fp32 tensor cast to the embeddings' dtype: the
    // factor rounds to fp32 and then to that dtype first.
    const double factor = at::scalar_tensor(std::sqrt(static_cast<double>(c_.hidden_size)), at::kFloat)
                              .to(x.scalar_type())
                              .item<double>();
    return x.mul_(factor);
  }

  at::Tensor block_forward(const WeightFn& w, int64_t i, const at::Tensor& x, const LinearObserver* observer,
                           BlockCache* cache, const Placement& at) const override {
    const std::string p = block_prefix(i);
    const int64_t B = x.size(0), T = x.size(1), D = c_.head_dim;
    int64_t H = c_.num_heads, KV = c_.num_kv_heads;  // a structured run's pruned blocks hold fewer: their shapes say
    auto observe = [&](const std::string& name, const at::Tensor& in) {
      if (observer != nullptr) (*observer)(name, in);
    };
    auto lin = [&](const std::string& name, const at::Tensor& in, bool bias, const at::Tensor& weight = {}) {
      observe(name, in);
      return apply_linear(in, weight.defined() ? weight : w(p + name + ".weight"),
                          bias ? w(p + name + ".bias") : at::Tensor());
    };
    auto norm = [&](const at::Tensor& in, const char* name) {
      return rms_norm(in, w(p + name + ".weight"), c_.norm_eps, c_.norm_scale);
    };
    const bool pre = c_.norm_placement != NormPlacement::post, post = c_.norm_placement != NormPlacement::pre;

    at::Tensor h = pre ? norm(x, "input_layernorm") : x;
    const bool qkv_bias = c_.attention_bias || c_.qkv_bias;
    at::Tensor q, k, v, o_weight;
    if (c_.fused_projections) {  // one product, its output columns q | k | v
      const at::Tensor qkv = lin("self_attn.qkv_proj", h, qkv_bias);
      o_weight = w(p + "self_attn.o_proj.weight");  // read once: its input is every query head's output
      H = o_weight.size(1) / D;
      KV = (qkv.size(-1) / D - H) / 2;
      q = qkv.narrow(-1, 0, H * D);
      k = qkv.narrow(-1, H * D, KV * D);
      v = qkv.narrow(-1, (H + KV) * D, KV * D);
    } else {
      q = lin("self_attn.q_proj", h, qkv_bias);
      k = lin("self_attn.k_proj", h, qkv_bias);
      v = lin("self_attn.v_proj", h, qkv_bias);
      H = q.size(-1) / D;
      KV = k.size(-1) / D;
    }
    if (c_.qk_norm == QkNorm::whole) {
      q = norm(q, "self_attn.q_norm");
      k = norm(k, "self_attn.k_norm");
    }
    if (c_.clip_qkv > 0) {
      q = q.clamp(-c_.clip_qkv, c_.clip_qkv);
      k = k.clamp(-c_.clip_qkv, c_.clip_qkv);
      v = v.clamp(-c_.clip_qkv, c_.clip_qkv);
    }
    q = q.view({B, T, H, D});
    k = k.view({B, T, KV, D});
    if (c_.qk_norm == QkNorm::per_head) {
      q = norm(q, "self_attn.q_norm");
      k = norm(k, "self_attn.k_norm");
    }
    v = v.view({B, T, KV, D}).transpose(1, 2);
    const int64_t window = c_.window_of_layer(i);
    const RopeTables& rope = window > 0 && c_.sliding_rope_theta ? sliding_rope_ : rope_;
    auto [cos, sin] = rope.tables(at, T, x.device(), x.scalar_type());
    q = rotate(q.transpose(1, 2), cos, sin);
    k = rotate(k.transpose(1, 2), cos, sin);
    std::tie(k, v) = extend_cache(cache, k, v.contiguous());
    AttentionOptions options =
        attention_at(at, c_.attention_scale > 0 ? c_.attention_scale : 1.0 / std::sqrt(static_cast<double>(D)),
                     at.packed ? 0 : window);
    options.softcap = c_.attention_softcap;
    at::Tensor a = lin("self_attn.o_proj", causal_attention(q, k, v, options), c_.attention_bias, o_weight);
    at::Tensor out = x + (post ? norm(a, "post_attention_layernorm") : a);

    switch (c_.norm_placement) {
      case NormPlacement::pre:
        h = norm(out, "post_attention_layernorm");
        break;
      case NormPlacement::post:
        h = out;
        break;
      case NormPlacement::sandwich:
        h = norm(out, "pre_feedforward_layernorm");
        break;
    }
    at::Tensor d;
    if (c_.is_moe_layer(i)) {
      MoeIo io{[&](const std::string& name) { return w(p + name + ".weight"); }, nullptr,
               [&](at::Tensor g) { return activation_(std::move(g)); }};
      if (observer != nullptr) io.observe = *observer;
      d = moe_forward(*c_.moe, *moe_names_, io, h, {at.all_experts, at.inputs_only, at.expert_outputs, at.show_router});
      if (at.inputs_only) return {};
    } else {
      at::Tensor m;
      if (c_.fused_projections) {  // gate | up
        const at::Tensor gu = lin("mlp.gate_up_proj", h, c_.mlp_bias);
        const int64_t f = gu.size(-1) / 2;
        m = activation_(gu.narrow(-1, 0, f).contiguous()).mul_(gu.narrow(-1, f, f));
      } else {
        m = activation_(lin("mlp.gate_proj", h, c_.mlp_bias)).mul_(lin("mlp.up_proj", h, c_.mlp_bias));
      }
      if (at.inputs_only) {
        observe("mlp.down_proj", m);
        return {};
      }
      d = lin("mlp.down_proj", m, c_.mlp_bias);
    }
    return out + (post ? norm(d, "post_feedforward_layernorm") : d);
  }

  std::vector<UnitRule> unit_rules(int64_t block, Structure s, const ShapeFn& shape) const override {
    const std::string p = block_prefix(block);
    if (s == Structure::experts) return {UnitRule::refused("experts leave by CausalLM::keep_experts, not by rows")};
    if (s == Structure::neurons) {
      if (!c_.is_moe_layer(block))
        return {mlp_rule("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "intermediate_size",
                         shape(p + "mlp.down_proj.weight")[1], c_.mlp_bias)};
      // A mixture: each expert's neurons, as many from each (one intermediate size states them all), and the shared
      // expert's.
      std::vector<UnitRule> rules;
      const MoeNames& n = *moe_names_;
      for (int64_t e = 0, E = experts_of(block, shape); e < E; ++e)
        rules.push_back(mlp_rule(n.gate(e), n.up(e), n.down(e), c_.moe->intermediate_key,
                                 shape(p + n.down(e) + ".weight")[1], false));
      for (UnitRule& r : rules) r.multiple = 8;
      if (c_.moe->shared_expert_intermediate_size > 0)
        rules.push_back(mlp_rule(n.shared("gate_proj"), n.shared("up_proj"), n.shared("down_proj"),
                                 "shared_expert_intermediate_size", shape(p + n.shared("down_proj") + ".weight")[1],
                                 false));
      return rules;
    }
    // Normalised over every head at once, the kept heads' queries and keys would change with the removed ones.
    if (c_.qk_norm == QkNorm::whole) return {UnitRule::refused("its q_norm and k_norm normalise all heads together")};
    // transformers' Phi3Config checks longrope's factors against hidden_size / num_attention_heads, not head_dim:
    // with fewer heads it refuses the output's config.
    if (c_.fused_projections && c_.rope_scaling && c_.rope_scaling->type == "longrope")
      return {UnitRule::refused(
          "its longrope factors are checked against hidden_size / num_attention_heads by transformers, which fewer "
          "heads would change")};
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
    } else {  // whole key/value groups with their query heads
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
    }
    return {rule};
  }

  nlohmann::json config_of_shapes(const ShapeFn& shape) const override {
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
        const MoeNames& n = *moe_names_;
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

  bool cache_exact(int64_t length) const override { return rope_.cache_exact(length); }

  at::Tensor head(const WeightFn& w, const at::Tensor& hidden) const override {
    at::Tensor h = rms_norm(hidden, w(model_ + "norm.weight"), c_.norm_eps, c_.norm_scale);
    at::Tensor logits = at::matmul(h, w(head_name()).t());
    // In the compute dtype, as transformers caps them.
    if (c_.logit_softcap > 0) logits = logits.div_(c_.logit_softcap).tanh_().mul_(c_.logit_softcap);
    return logits.to(at::kFloat);
  }

 private:
  // The rows of `linear` (and its bias) follow the units in `runs`.
  static void follow(UnitRule& rule, const std::string& linear, bool bias, std::vector<RowRun> runs) {
    rule.rows.push_back({linear + ".weight", runs});
    if (bias) rule.rows.push_back({linear + ".bias", runs});
  }

  // The neurons of one gated MLP (the block's, an expert's): down's input columns, the rows of gate and up (or of
  // a fused gate_up_proj: the gate's, then the up's).
  UnitRule mlp_rule(const std::string& gate, const std::string& up, const std::string& down, const std::string& field,
                    int64_t units, bool bias) const {
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

  // Block i's query and key/value heads as its tensors are now: o_proj reads every query head's output, and a fused
  // qkv_proj's rows are the queries' then the keys' and the values'.
  std::pair<int64_t, int64_t> heads_of(int64_t i, const ShapeFn& shape) const {
    const std::string p = block_prefix(i);
    const int64_t D = c_.head_dim, H = shape(p + "self_attn.o_proj.weight")[1] / D;
    if (c_.fused_projections) return {H, (shape(p + "self_attn.qkv_proj.weight")[0] / D - H) / 2};
    return {H, shape(p + "self_attn.k_proj.weight")[0] / D};
  }

  std::string embed_name() const { return model_ + "embed_tokens.weight"; }
  std::string head_name() const { return c_.tie_word_embeddings ? embed_name() : lm_head_; }

  // A mixture block's experts: its router's rows (fewer than the config's where experts were removed).
  int64_t experts_of(int64_t block, const ShapeFn& shape) const {
    return shape(block_prefix(block) + moe_names_->router() + ".weight")[0];
  }

  // The MLP's activation, in place.
  at::Tensor activation_(at::Tensor g) const { return c_.activation == "silu" ? at::silu_(g) : at::gelu_(g, "tanh"); }

  // RoPE on the leading rotary_dim dimensions of each head of x [B, heads, T, D]; the rest pass (partial rotary).
  at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const {
    const int64_t D = c_.head_dim, R = c_.rotary_dim();
    if (R == D) return apply_rotary(x, cos, sin);
    return at::cat({apply_rotary(x.narrow(-1, 0, R), cos, sin), x.narrow(-1, R, D - R)}, -1);
  }

  // The block's RMSNorms, by where they sit (post_attention_layernorm is the MLP's input norm in a pre-norm
  // block and the attention output's norm in the others, as the checkpoints name them).
  std::vector<const char*> block_norms() const {
    switch (c_.norm_placement) {
      case NormPlacement::pre:
        return {"input_layernorm", "post_attention_layernorm"};
      case NormPlacement::post:
        return {"post_attention_layernorm", "post_feedforward_layernorm"};
      case NormPlacement::sandwich:
        return {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                "post_feedforward_layernorm"};
    }
    return {};
  }

  ModelConfig c_;
  // The decoder's tensors ("model." or, inside a multimodal checkpoint, "language_model.model.") and the head's.
  std::string model_ = c_.language_model_prefix + "model.", lm_head_ = c_.language_model_prefix + "lm_head.weight";
  RopeTables rope_;                    ///< every layer's, or the full-attention layers' where sliding ones differ
  RopeTables sliding_rope_;            ///< the sliding layers' where c_.sliding_rope_theta is set
  std::optional<MoeNames> moe_names_;  ///< the mixture layers' tensor names
};

}  // namespace

std::unique_ptr<Architecture> make_llama(const ModelConfig& config) { return std::make_unique<Llama>(config); }

}  // namespace alps::model
