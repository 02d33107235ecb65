#include <ATen/ATen.h>

#include <limits>

#include "architecture.h"

namespace alps::model {

at::Tensor causal_mask(int64_t seq, c10::ScalarType dtype, c10::Device device) {
  return at::full({seq, seq}, -std::numeric_limits<double>::infinity(), at::TensorOptions().dtype(dtype).device(device))
      .triu(1);
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), KV = k.size(1);
  const int64_t rep = H / KV;
  // Query head h = g * rep + r reads KV head g (transformers' repeat_kv order), so [B, H, T, D] viewed as
  // [B, KV, rep * T, D] lines each group's queries up against its own K and V.
  at::Tensor scores = at::matmul(q.contiguous().view({B, KV, rep * T, D}), k.transpose(-1, -2));  // [B, KV, rep*T, T]
  scores.mul_(scale);
  scores.view({B, KV, rep, T, T}).add_(causal_mask(T, scores.scalar_type(), scores.device()));
  // Softmax in fp32 even for half compute, as transformers does.
  at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  scores.reset();
  at::Tensor out = at::matmul(probs, v);  // [B, KV, rep*T, D]
  return out.view({B, H, T, D}).transpose(1, 2).reshape({B, T, H * D});
}

at::Tensor apply_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return bias.defined() ? at::linear(x, weight, bias) : at::matmul(x, weight.t());
}

}  // namespace alps::model
