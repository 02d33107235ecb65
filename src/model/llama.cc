// LlamaForCausalLM forward, following transformers' modeling_llama: RMSNorm, RoPE (rotate_half convention,
// optional linear, dynamic or llama3 frequency scaling), grouped-query attention, SwiGLU MLP, tied or untied
// lm_head. The LLaMA variants (Mistral, Qwen2) run this forward too: their differences are config values
// (sliding-window attention per layer, q/k/v biases) read by their own config readers.
#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "model/architecture.h"
#include "model/config_reader.h"
#include "model/rms_norm.h"
#include "model/rotary.h"

namespace alps::model {

namespace {

// RoPE base and its scaling. transformers <= 4.x writes rope_theta / rope_scaling; 5.x folds both into
// rope_parameters (and rope_scaling, when present, wins).
void read_rope(const ConfigReader& r, ModelConfig& c) {
  nlohmann::json rope = nlohmann::json::object();
  std::string where = "rope_parameters.";
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = r.raw().find(key);
    if (it == r.raw().end() || it->is_null()) continue;
    ALPS_CHECK(it->is_object(), r.field(key), " must be an object, got ", it->dump());
    rope.update(*it);
    where = std::string(key) + ".";
  }
  const ConfigReader s(rope, r.path(), where);
  for (const auto& [key, value] : rope.items())
    ALPS_CHECK(!value.is_object(), s.field(key.c_str()),
               " is an object: RoPE parameters per layer type are not supported");
  // inv_freq = theta^(-2i/d): theta <= 0 gives NaN or infinite frequencies.
  c.rope_theta = s.number("rope_theta", r.number("rope_theta", 10000.0));
  ALPS_CHECK(c.rope_theta > 0, r.path().string(), ": rope_theta must be positive, got ", c.rope_theta);
  // A LLaMA block rotates whole heads; transformers fails on a partial rotary factor here too.
  for (const ConfigReader* from : {&s, &r}) {
    const double partial = from->number("partial_rotary_factor", 1.0);
    ALPS_CHECK(partial == 1.0, from->field("partial_rotary_factor"),
               ": only 1 (RoPE on whole heads) is supported, got ", partial);
  }
  const char* type_key = s.has("rope_type") ? "rope_type" : "type";
  const std::string type = s.string(type_key, "default");
  // transformers 4.x lets "type" overwrite "rope_type", 5.x the other way round: two names for one rule are only
  // unambiguous when they agree.
  if (s.has("rope_type") && s.has("type"))
    ALPS_CHECK(s.string("type", "") == type, s.field("type"), " is '", s.string("type", ""), "' but '", where,
               "rope_type' is '", type, "': transformers 4.x runs the first and 5.x the second; keep one");
  if (type == "default") return;
  ALPS_CHECK(type == "linear" || type == "dynamic" || type == "llama3", s.field(type_key),
             ": expected one of default, linear, dynamic, llama3, got '", type, "'");
  RopeScaling sc;
  sc.type = type;
  ALPS_CHECK(s.has("factor"), s.field("factor"), " is required for rope_type '", type, "'");
  sc.factor = s.number("factor", 1.0);
  // Every rule divides a frequency or a length by the factor.
  ALPS_CHECK(sc.factor > 0, r.path().string(), ": ", type, " ", where, "factor must be positive, got ", sc.factor);
  if (type == "dynamic")  // the base is raised to head_dim / (head_dim - 2)
    ALPS_CHECK(c.head_dim > 2, r.path().string(), ": dynamic RoPE scaling needs head_dim > 2, got ", c.head_dim);
  if (type == "llama3") {
    sc.low_freq_factor = s.number("low_freq_factor", 1.0);
    sc.high_freq_factor = s.number("high_freq_factor", 4.0);
    // transformers takes a top-level original_max_position_embeddings first, then the rope dict's, then
    // max_position_embeddings.
    const ConfigReader& from = r.has("original_max_position_embeddings") ? r : s;
    sc.original_max_position_embeddings =
        from.optional_int("original_max_position_embeddings").value_or(c.max_positions);
    // The llama3 rule divides the original length by both frequency factors and blends between them.
    ALPS_CHECK(sc.low_freq_factor > 0, r.path().string(), ": llama3 ", where, "low_freq_factor must be positive, got ",
               sc.low_freq_factor);
    ALPS_CHECK(sc.high_freq_factor > sc.low_freq_factor, r.path().string(), ": llama3 ", where,
               "high_freq_factor must exceed low_freq_factor, got ", sc.high_freq_factor, " and ", sc.low_freq_factor);
    from.check_positive(sc.original_max_position_embeddings, "original_max_position_embeddings");
  }
  c.rope_scaling = sc;
}

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
                                   {"self_attn.v_proj", kv, h}}) {
        s.push_back({p + name + ".weight", {out, in}});
        if (c_.attention_bias || c_.qkv_bias) s.push_back({p + name + ".bias", {out}});
      }
      s.push_back({p + "self_attn.o_proj.weight", {h, q}});
      if (c_.attention_bias) s.push_back({p + "self_attn.o_proj.bias", {h}});
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

  at::Tensor embed(const WeightFn& w, const at::Tensor& ids, const Placement& /*RoPE places tokens*/) const override {
    return at::embedding(w("model.embed_tokens.weight"), ids);
  }

  at::Tensor block_forward(const WeightFn& w, int64_t i, const at::Tensor& x,
                           const LinearObserver* observer, BlockCache* cache, const Placement& at) const override {
    const std::string p = block_prefix(i);
    const int64_t B = x.size(0), T = x.size(1), H = c_.num_heads, KV = c_.num_kv_heads, D = c_.head_dim;
    auto observe = [&](const std::string& name, const at::Tensor& in) {
      if (observer != nullptr) (*observer)(name, in);
    };
    auto lin = [&](const std::string& name, const at::Tensor& in, bool bias) {
      observe(name, in);
      return apply_linear(in, w(p + name + ".weight"), bias ? w(p + name + ".bias") : at::Tensor());
    };

    at::Tensor h = rms_norm(x, w(p + "input_layernorm.weight"), c_.norm_eps);
    const bool qkv_bias = c_.attention_bias || c_.qkv_bias;
    at::Tensor q = lin("self_attn.q_proj", h, qkv_bias).view({B, T, H, D}).transpose(1, 2);
    at::Tensor k = lin("self_attn.k_proj", h, qkv_bias).view({B, T, KV, D}).transpose(1, 2);
    at::Tensor v = lin("self_attn.v_proj", h, qkv_bias).view({B, T, KV, D}).transpose(1, 2);
    auto [cos, sin] = rope_tables(at, T, x.device(), x.scalar_type());
    q = apply_rotary(q, cos, sin);
    k = apply_rotary(k, cos, sin);
    std::tie(k, v) = extend_cache(cache, k, v.contiguous());
    at::Tensor a = causal_attention(
        q, k, v, attention_at(at, 1.0 / std::sqrt(static_cast<double>(D)), at.packed ? 0 : c_.window_of_layer(i)));
    at::Tensor out = x + lin("self_attn.o_proj", a, c_.attention_bias);

    h = rms_norm(out, w(p + "post_attention_layernorm.weight"), c_.norm_eps);
    at::Tensor g = lin("mlp.gate_proj", h, c_.mlp_bias);
    at::Tensor u = lin("mlp.up_proj", h, c_.mlp_bias);
    const at::Tensor m = at::silu_(g).mul_(u);
    if (at.inputs_only) {
      observe("mlp.down_proj", m);
      return {};
    }
    return out + lin("mlp.down_proj", m, c_.mlp_bias);
  }

  // Dynamic scaling computes every position's rotation from the sequence's whole length once it passes
  // max_position_embeddings, so keys cached at a shorter length would be rotated differently.
  bool cache_exact(int64_t length) const override {
    return !(c_.rope_scaling && c_.rope_scaling->type == "dynamic" && length > c_.max_positions);
  }

  at::Tensor head(const WeightFn& w, const at::Tensor& hidden) const override {
    at::Tensor h = rms_norm(hidden, w("model.norm.weight"), c_.norm_eps);
    return at::matmul(h, w(head_name()).t()).to(at::kFloat);
  }

 private:
  std::string head_name() const { return c_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"; }

  // inv_freq_j = theta^(-2j/D) for a forward over T positions, then the scaling, each computed as transformers'
  // rope initialisers compute it (fp32 tensors, the same operations in the same order).
  at::Tensor inv_freq(int64_t T) const {
    const int64_t D = c_.head_dim;
    const at::Tensor exponent = at::arange(0, D, 2, at::kLong).to(at::kFloat) / static_cast<double>(D);
    if (!c_.rope_scaling) return 1.0 / at::pow(c_.rope_theta, exponent);
    const RopeScaling& s = *c_.rope_scaling;
    // linear: positions divided by the factor, applied to the frequencies instead (the same products).
    if (s.type == "linear") return 1.0 / at::pow(c_.rope_theta, exponent) / s.factor;
    if (s.type == "dynamic") return dynamic_inv_freq(T, exponent);
    // llama3: long wavelengths divided by `factor`, short ones kept, a linear blend in between.
    at::Tensor inv = 1.0 / at::pow(c_.rope_theta, exponent);
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
    at::Tensor wavelen = 2 * M_PI / inv;
    at::Tensor scaled = at::where(wavelen > low_wavelen, inv / s.factor, inv);
    at::Tensor smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    at::Tensor smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
    at::Tensor medium = at::logical_not(wavelen < high_wavelen).logical_and(at::logical_not(wavelen > low_wavelen));
    return at::where(medium, smoothed, scaled);
  }

  // Dynamic NTK scaling: base' = base * (factor * L / M - (factor - 1))^(D / (D - 2)) with M =
  // max_position_embeddings and L = max(T, M), so nothing changes up to M positions. transformers computes the
  // initial table (L = M) in Python doubles and a longer forward's table from the int64 length tensor, in fp32;
  // both are reproduced. Unlike transformers' rotary module, which keeps the table of the longest forward so far
  // until a forward shorter than M resets it, the table here depends only on the forward's own length: what a
  // freshly loaded transformers model computes for it.
  at::Tensor dynamic_inv_freq(int64_t T, const at::Tensor& exponent) const {
    const double factor = c_.rope_scaling->factor, power = c_.head_dim / static_cast<double>(c_.head_dim - 2);
    const int64_t M = c_.max_positions;
    if (T <= M) {
      const double base = c_.rope_theta * std::pow((factor * static_cast<double>(M) / static_cast<double>(M)) -
                                                       (factor - 1), power);
      return 1.0 / at::pow(base, exponent);
    }
    const at::Tensor length = at::scalar_tensor(T, at::kLong);
    const at::Tensor base = c_.rope_theta * (factor * length / M - (factor - 1)).pow(power);
    return 1.0 / at::pow(base, exponent);
  }

  // cos/sin for the T new tokens placed at `at` ([1, 1, T, D/2], or [B, 1, T, D/2] with positions per sequence:
  // transformers' tables repeat these halves), computed in fp32 like transformers, then cast to the compute dtype.
  std::pair<at::Tensor, at::Tensor> rope_tables(const Placement& at, int64_t T, c10::Device device,
                                                c10::ScalarType dtype) const {
    // Made on the device: a blocking upload from the host would make every block of a GPU forward wait for the GPU.
    const at::Tensor positions = at.positions.defined()
                                     ? at.positions.to(device)
                                     : at::arange(at.past, at.past + T, at::TensorOptions(at::kLong).device(device));
    const at::Tensor inv = device_inv_freq(at.sequence_length(T), device);
    const at::Tensor freqs = (positions.to(at::kFloat).unsqueeze(-1) * inv).view({-1, 1, T, c_.head_dim / 2});
    return {freqs.cos().to(dtype), freqs.sin().to(dtype)};
  }

  // inv_freq on `device`, computed on the host as transformers computes it and uploaded once per device and length
  // that changes it (only dynamic scaling past max_position_embeddings does).
  at::Tensor device_inv_freq(int64_t T, c10::Device device) const {
    const bool by_length = c_.rope_scaling && c_.rope_scaling->type == "dynamic" && T > c_.max_positions;
    const std::pair<std::string, int64_t> key{device.str(), by_length ? T : 0};
    std::lock_guard<std::mutex> lock(inv_freq_mu_);
    auto it = inv_freq_on_device_.find(key);
    if (it == inv_freq_on_device_.end()) {
      if (inv_freq_on_device_.size() > 64) inv_freq_on_device_.clear();  // dynamic lengths: keep the map small
      it = inv_freq_on_device_.emplace(key, inv_freq(T).to(device)).first;
    }
    return it->second;
  }

  ModelConfig c_;
  mutable std::mutex inv_freq_mu_;
  mutable std::map<std::pair<std::string, int64_t>, at::Tensor> inv_freq_on_device_;
};

}  // namespace

std::unique_ptr<Architecture> make_llama(const ModelConfig& config) { return std::make_unique<Llama>(config); }

void read_llama_family_config(const ConfigReader& r, const LlamaDefaults& defaults, ModelConfig& c) {
  read_sizes(r, "intermediate_size", defaults.max_positions, c);
  // Absent takes the config class's default; null means "as many as the query heads".
  c.num_kv_heads = r.raw().contains("num_key_value_heads")
                       ? r.optional_int("num_key_value_heads").value_or(c.num_heads)
                       : defaults.num_kv_heads.value_or(c.num_heads);
  r.check_positive(c.num_kv_heads, "num_key_value_heads");
  ALPS_CHECK(c.num_heads % c.num_kv_heads == 0, r.path().string(), ": num_attention_heads ", c.num_heads,
             " is not a multiple of num_key_value_heads ", c.num_kv_heads);
  // transformers reads `head_dim or hidden_size // num_attention_heads`: absent, null and 0 all mean the default,
  // which only makes sense when the division is exact. An explicit head_dim may differ from the quotient (the
  // projections are [heads * head_dim, hidden]).
  c.head_dim = r.optional_int("head_dim").value_or(0);
  if (c.head_dim == 0) {
    ALPS_CHECK(c.hidden_size % c.num_heads == 0, r.path().string(), ": hidden_size ", c.hidden_size,
               " is not divisible by num_attention_heads ", c.num_heads);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  r.check_positive(c.head_dim, "head_dim");
  ALPS_CHECK(c.head_dim % 2 == 0, r.path().string(), ": head_dim must be even for RoPE, got ", c.head_dim);
  // RMSNorm divides by sqrt(mean(x^2) + eps): eps <= 0 turns a zero hidden state into NaN.
  c.norm_eps = r.number("rms_norm_eps", 1e-6);
  ALPS_CHECK(c.norm_eps > 0, r.path().string(), ": rms_norm_eps must be positive, got ", c.norm_eps);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.activation = r.string("hidden_act", "silu");
  ALPS_CHECK(c.activation == "silu", r.field("hidden_act"), ": expected 'silu', got '", c.activation, "'");
  read_rope(r, c);
}

void read_llama_config(const ConfigReader& r, ModelConfig& c) {
  read_llama_family_config(r, LlamaDefaults{}, c);
  c.attention_bias = r.boolean("attention_bias", false);
  c.mlp_bias = r.boolean("mlp_bias", false);
}

}  // namespace alps::model
