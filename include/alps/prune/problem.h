#pragma once
// The layer problem of SPEC §1: one linear layer's weights and its calibration statistics.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace alps::prune {

/// (W0, G, mean, T) of SPEC §1; the file form is safetensors `weight`, `gram`, optional `mean`, metadata `tokens`.
struct LayerProblem {
  at::Tensor W0;    ///< [out, in] dense weights
  at::Tensor G;     ///< [in, in] sum_t x_t x_t^T (fp32 or fp64)
  at::Tensor mean;  ///< [in] mean input, or undefined
  int64_t tokens = 0;  ///< T, the number of calibration tokens behind G
  std::string name;    ///< layer name when known, e.g. "model.layers.0.mlp.up_proj" (DSnoT's skip rule reads it)

  int64_t rows() const { return W0.size(0); }  ///< out
  int64_t cols() const { return W0.size(1); }  ///< in
};

/// Reads the safetensors file form; every inconsistency (missing tensor, shapes, dtypes, tokens) names the file.
LayerProblem load_problem(const std::filesystem::path& path);
/// Writes the file form through a temporary name (alps::io::save_safetensors); metadata `tokens` and `name`.
void save_problem(const std::filesystem::path& path, const LayerProblem& problem);

/// Checks shapes (W0 [out,in], G [in,in], mean [in]), devices and that W0, G, mean are finite; `what` prefixes
/// the message (e.g. the method name).
void check_problem(const LayerProblem& problem, const std::string& what);

/// err(W) = tr((W - W0) G (W - W0)^T) / tr(W0 G W0^T) in fp64 with the undamped G (SPEC §1).
double relative_error(const LayerProblem& problem, const at::Tensor& W);

}  // namespace alps::prune
