// LlamaForCausalLM forward, following transformers' modeling_llama: RMSNorm, RoPE (rotate_half convention,
// optional llama3 frequency scaling), grouped-query attention, SwiGLU MLP, tied or untied lm_head.
#include <ATen/ATen.h>

#include <cmath>

#include "alps/core/error.h"
#include "architecture.h"

namespace alps::model {

namespace {

class Llama final : public Architecture {
 public:
  explicit Llama(const ModelConfig& c) : c_(c) {}

  std::vector<TensorSpec> tensor_specs() const override {
    const int64_t h = c_.hidden_size, f = c_.intermediate_size, d = c_.head_dim;
    const int64_t q = c_.num_heads * d, kv = c_.num_kv_heads * d;
    std::vector<TensorSpec> s{{"model.embed_tokens.weight", {c_.vocab_size, h}}, {"model.norm.weight", {h}}};
    // A tied head has no tensor of its own; tolerate a redundant copy as transformers does.
    s.push_back({"lm_head.weight", {c_.vocab_size, h}, c_.tie_word_embeddings});
    for (int64_t i = 0; i < c_.num_layers; ++i) {
      const std::string p = block_prefix(i);
      s.push_back({p + "input_layernorm.weight", {h}});
      s.push_back({p + "post_attention_layernorm.weight", {h}});
      for (auto [name, out, in] : {std::tuple{"self_attn.q_proj", q, h}, {"self_attn.k_proj", kv, h},
                                   {"self_attn.v_proj", kv, h}, {"self_attn.o_proj", h, q}}) {
        s.push_back({p + name + ".weight", {out, in}});
        if (c_.attention_bias) s.push_back({p + name + ".bias", {out}});
      }
      for (auto [name, out, in] : {std::tuple{"mlp.gate_proj", f, h}, {"mlp.up_proj", f, h}, {"mlp.down_proj", h, f}}) {
        s.push_back({p + name + ".weight", {out, in}});
        if (c_.mlp_bias) s.push_back({p + name + ".bias", {out}});
      }
    }
    return s;
  }

  std::vector<std::string> linear_names() const override {
    return {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
            "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  }
  std::string block_prefix(int64_t i) const override { return "model.layers." + std::to_string(i) + "."; }
  std::vector<std::string> non_block_tensors() const override {
    return {"model.embed_tokens.weight", "model.norm.weight", head_name()};
  }

  at::Tensor embed(const WeightFn& w, const at::Tensor& ids) const override {
    return at::embedding(w("model.embed_tokens.weight"), ids);
  }

  at::Tensor block_forward(const WeightFn& w, int64_t i, const at::Tensor& x,
                           const LinearObserver* observer) const override {
    const std::string p = block_prefix(i);
    const int64_t B = x.size(0), T = x.size(1), H = c_.num_heads, KV = c_.num_kv_heads, D = c_.head_dim;
    auto lin = [&](const std::string& name, const at::Tensor& in, bool bias) {
      if (observer != nullptr) (*observer)(name, in);
      return apply_linear(in, w(p + name + ".weight"), bias ? w(p + name + ".bias") : at::Tensor());
    };

    at::Tensor h = rms_norm(x, w(p + "input_layernorm.weight"));
    at::Tensor q = lin("self_attn.q_proj", h, c_.attention_bias).view({B, T, H, D}).transpose(1, 2);
    at::Tensor k = lin("self_attn.k_proj", h, c_.attention_bias).view({B, T, KV, D}).transpose(1, 2);
    at::Tensor v = lin("self_attn.v_proj", h, c_.attention_bias).view({B, T, KV, D}).transpose(1, 2);
    auto [cos, sin] = rope_tables(T, x.device(), x.scalar_type());
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    at::Tensor a = causal_attention(q, k, v.contiguous(), 1.0 / std::sqrt(static_cast<double>(D)));
    at::Tensor out = x + lin("self_attn.o_proj", a, c_.attention_bias);

    h = rms_norm(out, w(p + "post_attention_layernorm.weight"));
    at::Tensor g = lin("mlp.gate_proj", h, c_.mlp_bias);
    at::Tensor u = lin("mlp.up_proj", h, c_.mlp_bias);
    return out + lin("mlp.down_proj", at::silu(g).mul_(u), c_.mlp_bias);
  }

  at::Tensor head(const WeightFn& w, const at::Tensor& hidden) const override {
    at::Tensor h = rms_norm(hidden, w("model.norm.weight"));
    return at::matmul(h, w(head_name()).t()).to(at::kFloat);
  }

 private:
  std::string head_name() const { return c_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"; }

  // transformers' LlamaRMSNorm: normalise in fp32, cast back, then scale.
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) const {
    at::Tensor xf = x.to(at::kFloat);
    at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, true) + c_.norm_eps);
    return weight * normed.to(x.scalar_type());
  }

  static at::Tensor rotate_half(const at::Tensor& x) {
    const int64_t half = x.size(-1) / 2;
    return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  }

  // inv_freq_j = theta^(-2j/D), then the llama3 rescaling (transformers' _compute_llama3_parameters): long
  // wavelengths divided by `factor`, short ones kept, a linear blend in between.
  at::Tensor inv_freq() const {
    const int64_t D = c_.head_dim;
    at::Tensor inv = 1.0 / at::pow(c_.rope_theta, at::arange(0, D, 2, at::kLong).to(at::kFloat) / static_cast<double>(D));
    if (!c_.rope_scaling) return inv;
    const RopeScaling& s = *c_.rope_scaling;
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
    at::Tensor wavelen = 2 * M_PI / inv;
    at::Tensor scaled = at::where(wavelen > low_wavelen, inv / s.factor, inv);
    at::Tensor smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    at::Tensor smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
    at::Tensor medium = at::logical_not(wavelen < high_wavelen).logical_and(at::logical_not(wavelen > low_wavelen));
    return at::where(medium, smoothed, scaled);
  }

  // cos/sin [1, 1, T, D] for positions 0..T-1, computed in fp32 like transformers, then cast to the compute dtype.
  std::pair<at::Tensor, at::Tensor> rope_tables(int64_t T, c10::Device device, c10::ScalarType dtype) const {
    at::Tensor freqs = at::outer(at::arange(T, at::kFloat).to(device), inv_freq().to(device));  // [T, D/2]
    at::Tensor emb = at::cat({freqs, freqs}, -1).view({1, 1, T, c_.head_dim});
    return {emb.cos().to(dtype), emb.sin().to(dtype)};
  }

  ModelConfig c_;
};

}  // namespace

std::unique_ptr<Architecture> make_llama(const ModelConfig& config) { return std::make_unique<Llama>(config); }

}  // namespace alps::model
