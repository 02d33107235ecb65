#include "prune/admm_iterates.h"

#include <ATen/ATen.h>


#include "alps/prune/row_split.h"
#include "prune/kernels/cpu_kernels.h"
#include "prune/mask.h"

namespace alps::prune::detail {

at::Tensor project_keep(const at::Tensor& Z, const Pattern& pattern, const RowSplit* split) {
  at::Tensor absZ = Z.abs();
  if (pattern.is_n_m()) return keep_mask_layer(absZ.t(), pattern).t();
  if (split != nullptr) return keep_largest_parts(absZ, pattern.zeros_total(split->total_rows, Z.size(0)), *split);
  return keep_largest(absZ, pattern.zeros_total(Z.size(1), Z.size(0)));
}

namespace {

// The spec's iterates as they are written: D, V and R held explicitly, one ATen operation per term.
class AtenIterates final : public AdmmIterates {
 public:
  AtenIterates(const at::Tensor& Y, const at::Tensor& B0, const Pattern& pattern, const RowSplit* split)
      : Y_(Y), pattern_(pattern), split_(split), keep_check_(project_keep(B0, pattern, split)) {
    D0_ = B0 * keep_check_;
    // Buffers allocated once: a fresh [in, out] tensor per operation costs page faults and an extra pass.
    D_ = D0_.clone();
    V_ = at::zeros_like(B0);
    R_ = at::empty_like(B0);
    Z_ = at::empty_like(B0);
  }
  const at::Tensor& rhs(double rho) override {
    at::sub_out(R_, Y_, V_).add_(D_, rho);
    return R_;
  }
  void project_and_update_dual(const at::Tensor& B, double rho) override {
    at::add_out(Z_, B, V_, 1.0 / rho);
    keep_ = project_keep(Z_, pattern_, split_);
    at::mul_out(D_, Z_, keep_);
    V_.add_(B, rho).sub_(D_, rho);
  }
  int64_t support_changes() override {
    const int64_t changed = keep_.ne(keep_check_).sum().item<int64_t>();
    keep_check_ = keep_;
    return changed;
  }
  void restart() override {
    D_.copy_(D0_);
    V_.zero_();
  }

 private:
  at::Tensor Y_;
  Pattern pattern_;
  const RowSplit* split_;
  at::Tensor keep_check_, keep_, D0_, D_, V_, R_, Z_;
};

}  // namespace

std::unique_ptr<AdmmIterates> make_admm_iterates(const at::Tensor& Y, const at::Tensor& B0, const Pattern& pattern,
                                                 bool fused, const RowSplit* split) {
  const bool cpu_fp32 = Y.device().is_cpu() && B0.device().is_cpu() && Y.scalar_type() == at::kFloat &&
                        B0.scalar_type() == at::kFloat;
  // The fused radix select needs its cut strictly inside the layer; pruning nothing or everything goes to ATen.
  const int64_t zeros = pattern.zeros_total(B0.size(1), B0.size(0));
  const bool cut_inside = pattern.is_n_m() || (zeros > 0 && zeros < B0.numel());
  // The fused kernels select within this part; a part of an unstructured layer selects across the parts.
  const bool local = split == nullptr || pattern.is_n_m();
  if (fused && cpu_fp32 && cut_inside && local) return make_fused_cpu_iterates(Y, B0, pattern);
  return std::make_unique<AtenIterates>(Y, B0, pattern, split);
}

}  // namespace alps::prune::detail
