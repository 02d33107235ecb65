// OPTForCausalLM forward, following transformers' modeling_opt: learned positions with offset 2, pre- or post-
// LayerNorm blocks (do_layer_norm_before), ReLU MLP, project_in/project_out when word_embed_proj_dim != hidden_size,
// tied lm_head.
#include <ATen/ATen.h>

#include <cmath>
#include <tuple>

#include "alps/core/error.h"
#include "model/architecture.h"
#include "model/config_reader.h"

namespace alps::model {

namespace {

// OPTLearnedPositionalEmbedding: fairseq reserved the first two rows (padding), so position p reads row p + 2.
constexpr int64_t kPositionOffset = 2;
const std::string kPrefix = "model.decoder.";

class Opt final : public Architecture {
 public:
  explicit Opt(const ModelConfig& c) : c_(c), project_(c.word_embed_proj_dim != c.hidden_size) {}

  std::vector<TensorSpec> tensor_specs() const override {
    const int64_t h = c_.hidden_size, f = c_.intermediate_size, e = c_.word_embed_proj_dim;
    std::vector<TensorSpec> s{{kPrefix + "embed_tokens.weight", {c_.vocab_size, e}},
                              {kPrefix + "embed_positions.weight", {c_.max_positions + kPositionOffset, h}},
                              {"lm_head.weight", {c_.vocab_size, e}, c_.tie_word_embeddings}};
    if (project_) {
      s.push_back({kPrefix + "project_in.weight", {h, e}});
      s.push_back({kPrefix + "project_out.weight", {e, h}});
    }
    if (c_.do_layer_norm_before) {
      s.push_back({kPrefix + "final_layer_norm.weight", {h}});
      s.push_back({kPrefix + "final_layer_norm.bias", {h}});
    }
    for (int64_t i = 0; i < c_.num_layers; ++i) {
      const std::string p = block_prefix(i);
      for (auto [name, out, in] : {std::tuple{"self_attn.q_proj", h, h}, {"self_attn.k_proj", h, h},
                                   {"self_attn.v_proj", h, h}, {"self_attn.out_proj", h, h}, {"fc1", f, h},
                                   {"fc2", h, f}}) {
        s.push_back({p + name + ".weight", {out, in}});
        if (c_.enable_bias) s.push_back({p + name + ".bias", {out}});
      }
      for (const char* norm : {"self_attn_layer_norm", "final_layer_norm"}) {
        s.push_back({p + norm + ".weight", {h}});
        s.push_back({p + norm + ".bias", {h}});
      }
    }
    return s;
  }

  std::vector<std::string> linear_names(int64_t /*every block the same*/, const ShapeFn& /*unused*/) const override {
    return {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj", "fc1", "fc2"};
  }
  std::string block_prefix(int64_t i) const override { return kPrefix + "layers." + std::to_string(i) + "."; }
  std::vector<std::string> non_block_tensors() const override {
    std::vector<std::string> n{kPrefix + "embed_tokens.weight", kPrefix + "embed_positions.weight", head_name()};
    if (project_) {
      n.push_back(kPrefix + "project_in.weight");
      n.push_back(kPrefix + "project_out.weight");
    }
    if (c_.do_layer_norm_before) {
      n.push_back(kPrefix + "final_layer_norm.weight");
      n.push_back(kPrefix + "final_layer_norm.bias");
    }
    return n;
  }

  at::Tensor embed(const WeightFn& w, const at::Tensor& ids, const Placement& at) const override {
    const int64_t T = ids.size(1);
    ALPS_CHECK(at.sequence_length(T) <= c_.max_positions, "OPT input of ", at.sequence_length(T),
               " tokens exceeds max_position_embeddings ", c_.max_positions);
    at::Tensor x = at::embedding(w(kPrefix + "embed_tokens.weight"), ids);
    if (project_) x = apply_linear(x, w(kPrefix + "project_in.weight"));
    const at::Tensor table = w(kPrefix + "embed_positions.weight");
    if (at.positions.defined())  // per sequence; each below the length checked above
      return x + table.index_select(0, (at.positions + kPositionOffset).flatten().to(table.device()))
                     .view({ids.size(0), T, -1});
    return x + table.narrow(0, kPositionOffset + at.past, T).unsqueeze(0);
  }

  at::Tensor block_forward(const WeightFn& w, int64_t i, const at::Tensor& x,
                           const LinearObserver* observer, BlockCache* cache, const Placement& at) const override {
    const std::string p = block_prefix(i);
    const int64_t B = x.size(0), T = x.size(1), H = c_.num_heads, D = c_.head_dim;
    auto observe = [&](const std::string& name, const at::Tensor& in) {
      if (observer != nullptr) (*observer)(name, in);
    };
    auto lin = [&](const std::string& name, const at::Tensor& in) {
      observe(name, in);
      return apply_linear(in, w(p + name + ".weight"), c_.enable_bias ? w(p + name + ".bias") : at::Tensor());
    };
    auto norm = [&](const std::string& name, const at::Tensor& in) {
      return layer_norm(in, w(p + name + ".weight"), w(p + name + ".bias"));
    };

    at::Tensor h = c_.do_layer_norm_before ? norm("self_attn_layer_norm", x) : x;
    at::Tensor q = lin("self_attn.q_proj", h).view({B, T, H, D}).transpose(1, 2);
    at::Tensor k = lin("self_attn.k_proj", h).view({B, T, H, D}).transpose(1, 2);
    at::Tensor v = lin("self_attn.v_proj", h).view({B, T, H, D}).transpose(1, 2);
    std::tie(k, v) = extend_cache(cache, k, v);
    at::Tensor a = causal_attention(q, k, v, attention_at(at, 1.0 / std::sqrt(static_cast<double>(D))));
    at::Tensor out = x + lin("self_attn.out_proj", a);
    if (!c_.do_layer_norm_before) out = norm("self_attn_layer_norm", out);

    h = c_.do_layer_norm_before ? norm("final_layer_norm", out) : out;
    const at::Tensor m = lin("fc1", h).relu_();
    if (at.inputs_only) {
      observe("fc2", m);
      return {};
    }
    out = out + lin("fc2", m);
    if (!c_.do_layer_norm_before) out = norm("final_layer_norm", out);
    return out;
  }

  std::vector<UnitRule> unit_rules(int64_t block, Structure s, const ShapeFn& shape) const override {
    // transformers' OPT takes head_dim as hidden_size / num_attention_heads: fewer heads is no OPT config.
    if (s != Structure::neurons)
      return {UnitRule::refused("its config has no head_dim: its heads are hidden_size / num_attention_heads")};
    UnitRule rule;
    rule.consumer = "fc2";
    rule.field = "ffn_dim";
    rule.units = shape(block_prefix(block) + "fc2.weight")[1];
    rule.rows.push_back({"fc1.weight", {{1}}});
    if (c_.enable_bias) rule.rows.push_back({"fc1.bias", {{1}}});
    return {rule};
  }

  nlohmann::json config_of_shapes(const ShapeFn& shape) const override {
    const int64_t f = shape(block_prefix(0) + "fc2.weight")[1];
    for (int64_t i = 1; i < c_.num_layers; ++i) {
      const int64_t fi = shape(block_prefix(i) + "fc2.weight")[1];
      ALPS_CHECK(fi == f, "block ", i, " has ", fi, " MLP neurons, block 0 ", f,
                 ": a config.json states one count for every block");
    }
    return f == c_.intermediate_size ? nlohmann::json::object() : nlohmann::json{{"ffn_dim", f}};
  }

  at::Tensor head(const WeightFn& w, const at::Tensor& hidden) const override {
    at::Tensor h = hidden;
    // transformers drops the decoder's final LayerNorm for post-LN models (OPT-350M).
    if (c_.do_layer_norm_before)
      h = layer_norm(h, w(kPrefix + "final_layer_norm.weight"), w(kPrefix + "final_layer_norm.bias"));
    if (project_) h = apply_linear(h, w(kPrefix + "project_out.weight"));
    return at::matmul(h, w(head_name()).t()).to(at::kFloat);
  }

 private:
  std::string head_name() const { return c_.tie_word_embeddings ? kPrefix + "embed_tokens.weight" : "lm_head.weight"; }

  at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) const {
    return at::layer_norm(x, {c_.hidden_size}, weight, bias, c_.norm_eps);
  }

  ModelConfig c_;
  bool project_;
};

}  // namespace

std::unique_ptr<Architecture> make_opt(const ModelConfig& config) { return std::make_unique<Opt>(config); }

void read_opt_config(const ConfigReader& r, ModelConfig& c) {
  read_sizes(r, "ffn_dim", 2048, c);
  c.num_kv_heads = c.num_heads;
  ALPS_CHECK(c.hidden_size % c.num_heads == 0, r.path().string(), ": hidden_size ", c.hidden_size,
             " is not divisible by num_attention_heads ", c.num_heads);
  c.head_dim = c.hidden_size / c.num_heads;
  c.norm_eps = 1e-5;  // OPT uses nn.LayerNorm's default
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", true);
  c.do_layer_norm_before = r.boolean("do_layer_norm_before", true);
  c.word_embed_proj_dim = r.optional_int("word_embed_proj_dim").value_or(c.hidden_size);
  r.check_positive(c.word_embed_proj_dim, "word_embed_proj_dim");
  c.enable_bias = r.boolean("enable_bias", true);
  c.activation = r.string("activation_function", "relu");
  ALPS_CHECK(c.activation == "relu", r.field("activation_function"), ": expected 'relu', got '", c.activation, "'");
  ALPS_CHECK(r.boolean("layer_norm_elementwise_affine", true), r.field("layer_norm_elementwise_affine"),
             ": false is not supported");
  ALPS_CHECK(!r.boolean("_remove_final_layer_norm", false), r.field("_remove_final_layer_norm"),
             ": true is not supported");
}

}  // namespace alps::model
