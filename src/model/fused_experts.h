#pragma once
// transformers 5's fused experts: a mixture layer's experts as two 3D tensors, `mlp.experts.gate_up_proj`
// [experts, 2 x intermediate, hidden] (each expert's gate rows, then its up rows) and `mlp.experts.down_proj`
// [experts, hidden, intermediate], the layout transformers 5 computes with and writes when asked to
// (save_pretrained(save_original_format=False); by default it writes the published one, a 2D tensor per expert and
// projection). alps holds a fused checkpoint's experts as the published layout's tensors, views of the mapped file,
// and writes them back fused: the output keeps the layout it read (docs/moe.md).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "alps/io/safetensors.h"
#include "model/stored_weights.h"

namespace alps::model {

/// Replaces each fused experts tensor of `w` by its experts' 2D tensors (PREFIX{e}.gate_proj.weight, up_proj,
/// down_proj under the fused tensor's PREFIX "model.layers.3.mlp.experts."), in its place in the order, and records
/// it in w.fused and w.sliced. Returns the name of the first fused tensor, empty when there is none. Errors name the
/// tensor and its file.
std::string unfuse_experts(StoredWeights& w);

/// One tensor of the output: a held one, or a fused one made from its experts' held tensors when it is written.
struct OutputTensor {
  io::TensorEntry entry;  ///< name, dtype, shape
  int64_t bytes = 0;
  std::function<at::Tensor()> value;
};

/// The tensors written for `w`, in its order, each fused tensor in the place of its first expert's tensor.
std::vector<OutputTensor> output_tensors(const StoredWeights& w);

}  // namespace alps::model
