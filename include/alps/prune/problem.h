#pragma once
// The layer problem (docs/algorithms.md): one linear layer's weights and its calibration statistics.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "alps/io/staged_path.h"

namespace alps::prune {

class SharedFactors;  // shared_factors.h
struct RowSplit;       // row_split.h

/// (W0, G, mean, T); the file form is safetensors `weight`, `gram`, optional `mean` and `sequence_mean_sq`,
/// metadata `tokens`, optional `sequences` and `name` (docs/formats.md).
struct LayerProblem {
  at::Tensor W0;    ///< [out, in] dense weights
  at::Tensor G;     ///< [in, in] sum_t x_t x_t^T (fp32 or fp64)
  at::Tensor mean;  ///< [in] mean input, or undefined
  int64_t tokens = 0;  ///< T, the number of calibration tokens behind G
  /// The calibration sequences those T tokens came in (0: unknown, taken as one). DSnoT's reference measures a
  /// row's expected output change over one sequence's tokens, so its threshold needs the sequence length.
  int64_t sequences = 0;
  /// [in] (1/T) sum_s L_s m_s^2 over the calibration sequences (L_s tokens, mean input m_s), or undefined:
  /// G_jj / T minus it is the variance within sequences that DSnoT's reference uses.
  at::Tensor sequence_mean_sq;
  std::string name;    ///< layer name when known, e.g. "model.layers.0.mlp.up_proj" (DSnoT's skip rule reads it)
  /// The caller already ran check_gram on this very G (linears that read one input share it): solve_layer skips
  /// the O(in^3) check.
  bool gram_checked = false;
  /// Shared by the problems of linears that read one input (same G), when the caller groups them; may be null.
  std::shared_ptr<SharedFactors> shared;
  /// Set when W0 holds only some rows of the weight and other processes solve the rest at once (row_split.h); the
  /// statistics are the whole layer's. Only methods whose splits_rows() is true accept such a problem.
  std::shared_ptr<const RowSplit> split;

  int64_t rows() const { return W0.size(0); }  ///< out (of this part, when split)
  int64_t total_rows() const;                   ///< out of the whole weight
  int64_t cols() const { return W0.size(1); }  ///< in
};

/// Reads the safetensors file form; every inconsistency (missing tensor, shapes, dtypes, tokens) names the file.
LayerProblem load_problem(const std::filesystem::path& path);
/// Writes the file form through a temporary name (alps::io::save_safetensors); metadata `tokens` and `name`.
void save_problem(const std::filesystem::path& path, const LayerProblem& problem,
                  io::ExistingFile existing = io::ExistingFile::kKeep);

/// Checks shapes (W0 [out,in], G [in,in], mean [in]), devices and that W0, G, mean are finite; `what` prefixes
/// the message (e.g. the method name).
void check_problem(const LayerProblem& problem, const std::string& what);
/// The part of check_problem about W0 alone (a non-empty finite [out, in] matrix), for methods that read nothing else.
void check_weight(const LayerProblem& problem, const std::string& what);

/// Refuses a gram that no rounding of a true Gram matrix sum_t x_t x_t^T explains: non-finite, asymmetric beyond
/// the rounding bound of `tokens` products in its dtype, or not positive semi-definite (Cholesky of G + tau I, the
/// eigenvalues only for the message). O(in^3): run it once per problem, outside timed regions. `what` (a file
/// name, say) is added to the message next to the layer name.
void check_gram(const LayerProblem& problem, const std::string& what = "");
/// gamma_{T+1} of G's dtype: the relative rounding bound of one entry of a Gram matrix of T tokens (infinite when
/// T is too large for any bound).
double gram_rounding_gamma(const LayerProblem& problem);

/// err(W) = tr((W - W0) G (W - W0)^T) / tr(W0 G W0^T) in fp64 with the undamped G (both traces summed over the
/// parts of a split problem: the whole layer's error, the same on every part). A non-finite result
/// or a negative one beyond the rounding bound is an alps::Error; a negative one within it is 0.
double relative_error(const LayerProblem& problem, const at::Tensor& W);

}  // namespace alps::prune
