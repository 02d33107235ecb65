#pragma once
// Rotary position embedding's frequencies: how config.json states them (rope_theta and rope_scaling in transformers
// 4.x, rope_parameters in 5.x, per layer type where layers rotate differently) and the cos/sin tables of a forward,
// computed as transformers' rope initialisers compute them. The rotation itself is apply_rotary (rotary.h).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "alps/model/config.h"
#include "model/config_reader.h"

namespace alps::model {

struct Placement;

/// One kind of layer's rotation: its base, its scaling and the share of each head it rotates.
struct RopeParameters {
  double theta = 10000.0;
  std::optional<RopeScaling> scaling;
  double partial_rotary_factor = 1.0;
};

/// The RoPE object `rope` (read with `s`, which names it in messages; `r` is the whole config.json, for the
/// top-level fields transformers falls back on): rope_theta (default `default_theta`), partial_rotary_factor (refused
/// unless 1 where not `partial_allowed`), rope_type (or type) and the type's fields. `c` gives head_dim and
/// max_position_embeddings.
RopeParameters read_rope_parameters(const ConfigReader& s, const ConfigReader& r, double default_theta,
                                    const ModelConfig& c, bool partial_allowed = false);
/// c.rope_theta, c.rope_scaling and c.partial_rotary_factor from rope_theta / rope_scaling (transformers 4.x) or
/// rope_parameters (5.x; when both are present rope_scaling wins, as in transformers). Parameters per layer type
/// are refused.
void read_rope(const ConfigReader& r, ModelConfig& c, bool partial_allowed = false);

/// The cos/sin tables of one kind of layer, cached per device (and, with dynamic scaling past
/// max_position_embeddings, per length; with longrope, per side of original_max_position_embeddings).
class RopeTables {
 public:
  /// `rotary_dim`: the dimensions of a head that rotate (ModelConfig::rotary_dim).
  RopeTables(RopeParameters p, int64_t rotary_dim, int64_t max_positions)
      : p_(std::move(p)), dim_(rotary_dim), max_positions_(max_positions) {}
  /// cos and sin for the T new tokens placed at `at` ([1, 1, T, R/2] for R = rotary_dim, or [B, 1, T, R/2] with
  /// positions per sequence: transformers' tables repeat these halves), computed in fp32 like transformers (times
  /// longrope's attention factor), then cast to `dtype`.
  std::pair<at::Tensor, at::Tensor> tables(const Placement& at, int64_t T, c10::Device device,
                                           c10::ScalarType dtype) const;
  /// Whether keys rotated at a shorter length are rotated as a forward over `length` positions rotates them.
  bool cache_exact(int64_t length) const;

 private:
  /// Which table a forward over T positions takes (0: the one of every length).
  int64_t table_of_length(int64_t T) const;
  at::Tensor inv_freq(int64_t T) const;
  at::Tensor dynamic_inv_freq(int64_t T, const at::Tensor& exponent) const;
  at::Tensor device_inv_freq(int64_t T, c10::Device device) const;

  RopeParameters p_;
  int64_t dim_, max_positions_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<std::string, int64_t>, at::Tensor> on_device_;
};

}  // namespace alps::model
