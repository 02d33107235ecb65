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
#include "model/llama_layout.h"
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
                      c.max_positions) {}

  std::vector<TensorSpec> tensor_specs() const override {
    const int64_t h = c_.hidden_size, f = c_.intermediate_size, d = c_.head_dim;
    const int64_t q = c_.num_heads * d, kv = c_.num_kv_heads * d;
    std::vector<TensorSpec> s{{layout_.embed_name(), {c_.vocab_size, h}}, {layout_.final_norm_name(), {h}}};
    // A tied head has no tensor of its own; tolerate a redundant copy as transformers does.
    s.push_back({layout_.lm_head_name(), {c_.vocab_size, h}, c_.tie_word_embeddings});
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
        for (TensorSpec& t : layout_.moe().specs(p, h)) s.push_back(std::move(t));
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
      mlp = layout_.moe().linears(layout_.experts_of(block, shape));
    else if (c_.fused_projections)
      mlp = {"mlp.gate_up_proj", "mlp.down_proj"};
    else
      mlp = {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    names.insert(names.end(), mlp.begin(), mlp.end());
    return names;
  }
  std::string block_prefix(int64_t i) const override { return layout_.block_prefix(i); }
  std::optional<ExpertTensors> expert_tensors(int64_t block, const ShapeFn& shape) const override {
    if (!c_.is_moe_layer(block)) return std::nullopt;
    ExpertTensors t{layout_.moe().router() + ".weight", {}};
    for (int64_t e = 0, E = layout_.experts_of(block, shape); e < E; ++e)
      t.experts.push_back(layout_.moe().expert_tensors(e));
    return t;
  }
  std::vector<std::string> non_block_tensors() const override {
    return {layout_.embed_name(), layout_.final_norm_name(), layout_.head_name()};
  }
  bool carried(const std::string& name) const override {
    const std::string& lm = c_.language_model_prefix;
    return !lm.empty() && name.compare(0, lm.size(), lm) != 0;
  }

  at::Tensor embed(const WeightFn& w, const at::Tensor& ids, const Placement& /*RoPE places tokens*/) const override {
    at::Tensor x = at::embedding(w(layout_.embed_name()), ids);
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
    const BlockWeights io{w, block_prefix(i), observer, c_};
    const bool pre = c_.norm_placement != NormPlacement::post, post = c_.norm_placement != NormPlacement::pre;
    const at::Tensor a = attention(io, i, pre ? io.norm(x, "input_layernorm") : x, cache, at);
    const at::Tensor out = x + (post ? io.norm(a, "post_attention_layernorm") : a);
    at::Tensor h;
    switch (c_.norm_placement) {
      case NormPlacement::pre:
        h = io.norm(out, "post_attention_layernorm");
        break;
      case NormPlacement::post:
        h = out;
        break;
      case NormPlacement::sandwich:
        h = io.norm(out, "pre_feedforward_layernorm");
        break;
    }
    const at::Tensor d = c_.is_moe_layer(i) ? mixture(io, h, at) : mlp(io, h, at);
    if (at.inputs_only) return {};
    return out + (post ? io.norm(d, "post_feedforward_layernorm") : d);
  }

  std::vector<UnitRule> unit_rules(int64_t block, Structure s, const ShapeFn& shape) const override {
    return layout_.unit_rules(block, s, shape);
  }
  nlohmann::json config_of_shapes(const ShapeFn& shape) const override { return layout_.config_of_shapes(shape); }

  bool cache_exact(int64_t length) const override { return rope_.cache_exact(length); }

  at::Tensor head(const WeightFn& w, const at::Tensor& hidden) const override {
    at::Tensor h = rms_norm(hidden, w(layout_.final_norm_name()), c_.norm_eps, c_.norm_scale);
    at::Tensor logits = at::matmul(h, w(layout_.head_name()).t());
    // In the compute dtype, as transformers caps them.
    if (c_.logit_softcap > 0) logits = logits.div_(c_.logit_softcap).tanh_().mul_(c_.logit_softcap);
    return logits.to(at::kFloat);
  }

 private:
  // One block's weights and what its linears show the observer: a linear by its short name, a norm by its name.
  struct BlockWeights {
    const WeightFn& w;
    std::string p;
    const LinearObserver* observer;
    const ModelConfig& c;
    at::Tensor weight(const std::string& name) const { return w(p + name + ".weight"); }
    void observe(const std::string& name, const at::Tensor& in) const {
      if (observer != nullptr) (*observer)(name, in);
    }
    at::Tensor linear(const std::string& name, const at::Tensor& in, bool bias, const at::Tensor& W = {}) const {
      observe(name, in);
      return apply_linear(in, W.defined() ? W : weight(name), bias ? w(p + name + ".bias") : at::Tensor());
    }
    at::Tensor norm(const at::Tensor& in, const char* name) const {
      return rms_norm(in, weight(name), c.norm_eps, c.norm_scale);
    }
  };

  // Self-attention of block i on its input h [B, T, hidden], through o_proj.
  at::Tensor attention(const BlockWeights& io, int64_t i, const at::Tensor& h, BlockCache* cache,
                       const Placement& at) const {
    const int64_t B = h.size(0), T = h.size(1), D = c_.head_dim;
    const bool qkv_bias = c_.attention_bias || c_.qkv_bias;
    // A structured run's pruned blocks hold fewer heads than the config's: their shapes say how many.
    int64_t H = 0, KV = 0;
    at::Tensor q, k, v, o_weight;
    if (c_.fused_projections) {  // one product, its output columns q | k | v
      const at::Tensor qkv = io.linear("self_attn.qkv_proj", h, qkv_bias);
      o_weight = io.weight("self_attn.o_proj");  // read once: its input is every query head's output
      H = o_weight.size(1) / D;
      KV = (qkv.size(-1) / D - H) / 2;
      q = qkv.narrow(-1, 0, H * D);
      k = qkv.narrow(-1, H * D, KV * D);
      v = qkv.narrow(-1, (H + KV) * D, KV * D);
    } else {
      q = io.linear("self_attn.q_proj", h, qkv_bias);
      k = io.linear("self_attn.k_proj", h, qkv_bias);
      v = io.linear("self_attn.v_proj", h, qkv_bias);
      H = q.size(-1) / D;
      KV = k.size(-1) / D;
    }
    if (c_.qk_norm == QkNorm::whole) {
      q = io.norm(q, "self_attn.q_norm");
      k = io.norm(k, "self_attn.k_norm");
    }
    if (c_.clip_qkv > 0) {
      q = q.clamp(-c_.clip_qkv, c_.clip_qkv);
      k = k.clamp(-c_.clip_qkv, c_.clip_qkv);
      v = v.clamp(-c_.clip_qkv, c_.clip_qkv);
    }
    q = q.view({B, T, H, D});
    k = k.view({B, T, KV, D});
    if (c_.qk_norm == QkNorm::per_head) {
      q = io.norm(q, "self_attn.q_norm");
      k = io.norm(k, "self_attn.k_norm");
    }
    v = v.view({B, T, KV, D}).transpose(1, 2);
    const int64_t window = c_.window_of_layer(i);
    const RopeTables& rope = window > 0 && c_.sliding_rope_theta ? sliding_rope_ : rope_;
    auto [cos, sin] = rope.tables(at, T, h.device(), h.scalar_type());
    q = rotate(q.transpose(1, 2), cos, sin);
    k = rotate(k.transpose(1, 2), cos, sin);
    std::tie(k, v) = extend_cache(cache, k, v.contiguous());
    AttentionOptions options =
        attention_at(at, c_.attention_scale > 0 ? c_.attention_scale : 1.0 / std::sqrt(static_cast<double>(D)),
                     at.packed ? 0 : window);
    options.softcap = c_.attention_softcap;
    return io.linear("self_attn.o_proj", causal_attention(q, k, v, options), c_.attention_bias, o_weight);
  }

  // The gated MLP on its input h; with at.inputs_only, down_proj's input is shown and nothing is computed after it.
  at::Tensor mlp(const BlockWeights& io, const at::Tensor& h, const Placement& at) const {
    at::Tensor m;
    if (c_.fused_projections) {  // gate | up
      const at::Tensor gu = io.linear("mlp.gate_up_proj", h, c_.mlp_bias);
      const int64_t f = gu.size(-1) / 2;
      m = activation_(gu.narrow(-1, 0, f).contiguous()).mul_(gu.narrow(-1, f, f));
    } else {
      m = activation_(io.linear("mlp.gate_proj", h, c_.mlp_bias)).mul_(io.linear("mlp.up_proj", h, c_.mlp_bias));
    }
    if (!at.inputs_only) return io.linear("mlp.down_proj", m, c_.mlp_bias);
    io.observe("mlp.down_proj", m);
    return {};
  }

  // A mixture layer (moe.h) on its input h.
  at::Tensor mixture(const BlockWeights& io, const at::Tensor& h, const Placement& at) const {
    MoeIo moe{[&](const std::string& name) { return io.weight(name); }, nullptr,
              [&](at::Tensor g) { return activation_(std::move(g)); }};
    if (io.observer != nullptr) moe.observe = *io.observer;
    return moe_forward(*c_.moe, layout_.moe(), moe, h,
                       {at.all_experts, at.inputs_only, at.expert_outputs, at.show_router});
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
  LlamaLayout layout_{c_};
  RopeTables rope_;          ///< every layer's, or the full-attention layers' where sliding ones differ
  RopeTables sliding_rope_;  ///< the sliding layers' where c_.sliding_rope_theta is set
};

}  // namespace

std::unique_ptr<Architecture> make_llama(const ModelConfig& config) { return std::make_unique<Llama>(config); }

}  // namespace alps::model
