#include "model/rope.h"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "alps/core/error.h"
#include "model/architecture.h"

namespace alps::model {

namespace {

// A list of `n` positive finite numbers (longrope's per-frequency factors).
std::vector<double> read_factors(const ConfigReader& s, const char* key, size_t n) {
  ALPS_CHECK(s.has(key), s.field(key), " is required for rope_type 'longrope'");
  const nlohmann::json& v = s.raw().at(key);
  ALPS_CHECK(v.is_array() && v.size() == n, s.field(key), ": expected a list of ", n,
             " numbers (one per rotated frequency: int(head_dim * partial_rotary_factor) / 2), got ", v.dump());
  std::vector<double> factors;
  for (const nlohmann::json& x : v) {
    ALPS_CHECK(x.is_number() && std::isfinite(x.get<double>()) && x.get<double>() > 0, s.field(key),
               ": every factor must be a positive number, got ", x.dump());
    factors.push_back(x.get<double>());
  }
  return factors;
}

// LongRoPE (Phi-3): frequencies divided by short_factor up to original_max_position_embeddings positions and by
// long_factor beyond, cos and sin multiplied by attention_factor, which defaults to sqrt(1 + ln(factor) /
// ln(original)) with factor = max_position_embeddings / original unless given.
void read_longrope(const ConfigReader& s, const ConfigReader& r, const ConfigReader& original_from,
                   const ModelConfig& c, double partial_rotary_factor, RopeScaling& sc) {
  const int64_t dim = rotary_dim(c.head_dim, partial_rotary_factor);
  sc.short_factor = read_factors(s, "short_factor", static_cast<size_t>(dim / 2));
  sc.long_factor = read_factors(s, "long_factor", static_cast<size_t>(dim / 2));
  ALPS_CHECK(original_from.has("original_max_position_embeddings"), s.field("original_max_position_embeddings"),
             " is required for rope_type 'longrope'");
  sc.original_max_position_embeddings = original_from.required_int("original_max_position_embeddings");
  original_from.check_positive(sc.original_max_position_embeddings, "original_max_position_embeddings");
  sc.factor = s.number("factor",
                       static_cast<double>(c.max_positions) / static_cast<double>(sc.original_max_position_embeddings));
  ALPS_CHECK(sc.factor > 0, r.path().string(), ": longrope ", s.prefix(), "factor must be positive, got ", sc.factor);
  const double by_factor =
      sc.factor <= 1
          ? 1.0
          : std::sqrt(1 + std::log(sc.factor) / std::log(static_cast<double>(sc.original_max_position_embeddings)));
  sc.attention_factor = s.number("attention_factor", by_factor);
  ALPS_CHECK(sc.attention_factor > 0, s.field("attention_factor"), " must be positive, got ", sc.attention_factor);
}

// partial_rotary_factor: the rope object's, else the top level's; refused unless 1 where not `allowed`.
double read_partial_rotary(const ConfigReader& s, const ConfigReader& r, const ModelConfig& c, bool allowed) {
  if (!allowed) {
    // A LLaMA block rotates whole heads; transformers fails on a partial rotary factor here too.
    for (const ConfigReader* from : {&s, &r}) {
      const double partial = from->number("partial_rotary_factor", 1.0);
      ALPS_CHECK(partial == 1.0, from->field("partial_rotary_factor"),
                 ": only 1 (RoPE on whole heads) is supported, got ", partial);
    }
    return 1.0;
  }
  const ConfigReader& from = s.has("partial_rotary_factor") ? s : r;
  const double partial = from.number("partial_rotary_factor", 1.0);
  const int64_t dim = rotary_dim(c.head_dim, partial);
  ALPS_CHECK(partial > 0 && partial <= 1 && dim > 0 && dim % 2 == 0, from.field("partial_rotary_factor"), ": ", partial,
             " rotates int(head_dim ", c.head_dim, " * factor) = ", dim,
             " dimensions of each head; RoPE needs an even number from 2 to head_dim");
  return partial;
}

// llama3: long wavelengths divided by `factor`, short ones kept, a blend between low_freq_factor and
// high_freq_factor over original_max_position_embeddings (`original_from`'s, else max_position_embeddings).
void read_llama3(const ConfigReader& s, const ConfigReader& r, const ConfigReader& original_from, const ModelConfig& c,
                 RopeScaling& sc) {
  const std::string& where = s.prefix();
  sc.low_freq_factor = s.number("low_freq_factor", 1.0);
  sc.high_freq_factor = s.number("high_freq_factor", 4.0);
  sc.original_max_position_embeddings =
      original_from.optional_int("original_max_position_embeddings").value_or(c.max_positions);
  // The llama3 rule divides the original length by both frequency factors and blends between them.
  ALPS_CHECK(sc.low_freq_factor > 0, r.path().string(), ": llama3 ", where, "low_freq_factor must be positive, got ",
             sc.low_freq_factor);
  ALPS_CHECK(sc.high_freq_factor > sc.low_freq_factor, r.path().string(), ": llama3 ", where,
             "high_freq_factor must exceed low_freq_factor, got ", sc.high_freq_factor, " and ", sc.low_freq_factor);
  original_from.check_positive(sc.original_max_position_embeddings, "original_max_position_embeddings");
}

}  // namespace

RopeParameters read_rope_parameters(const ConfigReader& s, const ConfigReader& r, double default_theta,
                                    const ModelConfig& c, bool partial_allowed) {
  const std::string& where = s.prefix();
  RopeParameters p;
  // inv_freq = theta^(-2i/d): theta <= 0 gives NaN or infinite frequencies.
  p.theta = s.number("rope_theta", default_theta);
  ALPS_CHECK(p.theta > 0, r.path().string(), ": ", s.has("rope_theta") ? where : std::string(),
             "rope_theta must be positive, got ", p.theta);
  p.partial_rotary_factor = read_partial_rotary(s, r, c, partial_allowed);
  const char* type_key = s.has("rope_type") ? "rope_type" : "type";
  const std::string type = s.string(type_key, "default");
  // transformers 4.x lets "type" overwrite "rope_type", 5.x the other way round: two names for one rule are only
  // unambiguous when they agree.
  if (s.has("rope_type") && s.has("type"))
    ALPS_CHECK(s.string("type", "") == type, s.field("type"), " is '", s.string("type", ""), "' but '", where,
               "rope_type' is '", type, "': transformers 4.x runs the first and 5.x the second; keep one");
  if (type == "default") return p;
  ALPS_CHECK(type == "linear" || type == "dynamic" || type == "llama3" || type == "longrope", s.field(type_key),
             ": expected one of default, linear, dynamic, llama3, longrope, got '", type, "'");
  RopeScaling sc;
  sc.type = type;
  // transformers takes a top-level original_max_position_embeddings first, then the rope dict's, then
  // max_position_embeddings.
  const ConfigReader& original_from = r.has("original_max_position_embeddings") ? r : s;
  if (type == "longrope") {
    read_longrope(s, r, original_from, c, p.partial_rotary_factor, sc);
    p.scaling = sc;
    return p;
  }
  ALPS_CHECK(s.has("factor"), s.field("factor"), " is required for rope_type '", type, "'");
  sc.factor = s.number("factor", 1.0);
  // Every rule divides a frequency or a length by the factor.
  ALPS_CHECK(sc.factor > 0, r.path().string(), ": ", type, " ", where, "factor must be positive, got ", sc.factor);
  if (type == "dynamic")  // the base is raised to head_dim / (head_dim - 2)
    ALPS_CHECK(c.head_dim > 2, r.path().string(), ": dynamic RoPE scaling needs head_dim > 2, got ", c.head_dim);
  if (type == "llama3") read_llama3(s, r, original_from, c, sc);
  p.scaling = sc;
  return p;
}

void read_rope(const ConfigReader& r, ModelConfig& c, bool partial_allowed) {
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
  // A top-level rope_theta is transformers 4.x's; inside rope_parameters it is 5.x's.
  const RopeParameters p = read_rope_parameters(s, r, r.number("rope_theta", 10000.0), c, partial_allowed);
  c.rope_theta = p.theta;
  c.rope_scaling = p.scaling;
  c.partial_rotary_factor = p.partial_rotary_factor;
}

int64_t RopeTables::table_of_length(int64_t T) const {
  if (!p_.scaling) return 0;
  if (p_.scaling->type == "dynamic") return T > max_positions_ ? T : 0;
  if (p_.scaling->type == "longrope") return T > p_.scaling->original_max_position_embeddings ? 1 : 0;
  return 0;
}

// Dynamic scaling computes every position's rotation from the sequence's whole length once it passes
// max_position_embeddings, and longrope switches to its long factors past original_max_position_embeddings, so keys
// cached at a shorter length would be rotated differently.
bool RopeTables::cache_exact(int64_t length) const { return table_of_length(length) == 0; }

// inv_freq_j = theta^(-2j/D) for a forward over T positions, then the scaling, each computed as transformers'
// rope initialisers compute it (fp32 tensors, the same operations in the same order).
at::Tensor RopeTables::inv_freq(int64_t T) const {
  const int64_t D = dim_;
  const at::Tensor exponent = at::arange(0, D, 2, at::kLong).to(at::kFloat) / static_cast<double>(D);
  if (!p_.scaling) return 1.0 / at::pow(p_.theta, exponent);
  const RopeScaling& s = *p_.scaling;
  if (s.type == "longrope") {
    const std::vector<double>& f = table_of_length(T) != 0 ? s.long_factor : s.short_factor;
    const at::Tensor ext = at::tensor(f, at::kDouble).to(at::kFloat);
    return 1.0 / (ext * at::pow(p_.theta, exponent));
  }
  // linear: positions divided by the factor, applied to the frequencies instead (the same products).
  if (s.type == "linear") return 1.0 / at::pow(p_.theta, exponent) / s.factor;
  if (s.type == "dynamic") return dynamic_inv_freq(T, exponent);
  // llama3: long wavelengths divided by `factor`, short ones kept, a linear blend in between.
  at::Tensor inv = 1.0 / at::pow(p_.theta, exponent);
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
at::Tensor RopeTables::dynamic_inv_freq(int64_t T, const at::Tensor& exponent) const {
  const double factor = p_.scaling->factor, power = dim_ / static_cast<double>(dim_ - 2);
  const int64_t M = max_positions_;
  if (T <= M) {
    const double base =
        p_.theta * std::pow((factor * static_cast<double>(M) / static_cast<double>(M)) - (factor - 1), power);
    return 1.0 / at::pow(base, exponent);
  }
  const at::Tensor length = at::scalar_tensor(T, at::kLong);
  const at::Tensor base = p_.theta * (factor * length / M - (factor - 1)).pow(power);
  return 1.0 / at::pow(base, exponent);
}

std::pair<at::Tensor, at::Tensor> RopeTables::tables(const Placement& at, int64_t T, c10::Device device,
                                                     c10::ScalarType dtype) const {
  // Made on the device: a blocking upload from the host would make every block of a GPU forward wait for the GPU.
  const at::Tensor positions = at.positions.defined()
                                   ? at.positions.to(device)
                                   : at::arange(at.past, at.past + T, at::TensorOptions(at::kLong).device(device));
  const at::Tensor inv = device_inv_freq(at.sequence_length(T), device);
  const at::Tensor freqs = (positions.to(at::kFloat).unsqueeze(-1) * inv).view({-1, 1, T, dim_ / 2});
  if (p_.scaling && p_.scaling->type == "longrope") {
    const double a = p_.scaling->attention_factor;
    return {(freqs.cos() * a).to(dtype), (freqs.sin() * a).to(dtype)};
  }
  return {freqs.cos().to(dtype), freqs.sin().to(dtype)};
}

// inv_freq on `device`, computed on the host as transformers computes it and uploaded once per device and length
// that changes it (only dynamic scaling past max_position_embeddings does).
at::Tensor RopeTables::device_inv_freq(int64_t T, c10::Device device) const {
  const std::pair<std::string, int64_t> key{device.str(), table_of_length(T)};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = on_device_.find(key);
  if (it == on_device_.end()) {
    if (on_device_.size() > 64) on_device_.clear();  // dynamic lengths: keep the map small
    it = on_device_.emplace(key, inv_freq(T).to(device)).first;
  }
  return it->second;
}

}  // namespace alps::model
