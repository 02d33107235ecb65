#include "prune/b_update.h"

#include <ATen/ATen.h>

#include <optional>
#include <utility>

#include "alps/core/error.h"

namespace alps::prune::detail {

BUpdate::BUpdate(BForm form, const at::Tensor& Hn, at::Tensor L, at::Tensor Q, const at::Tensor& like,
                 Fp32Products products, double damp)
    : form_(form), Hn_(Hn), L_(std::move(L)), Q_(std::move(Q)), products_(products), damp_(damp) {
  if (form_ == BForm::cholesky) return;
  Qt_ = Q_.t().contiguous();
  L_min_ = L_.min().item<double>();
  if (form_ == BForm::explicit_inverse) {
    Minv_ = at::empty({Hn_.size(0), Hn_.size(0)}, Hn_.options());
    Qs_ = at::empty_like(Q_);
  } else {
    // Split products take the transpose as a view of Q's split.
    Qm_ = Fp32Matrix(Q_, products_);
    Qtm_ = products_ == Fp32Products::kNative ? Fp32Matrix(Qt_, products_) : Qm_.t();
    T_ = at::empty_like(like);
  }
}

void BUpdate::solve(const at::Tensor& R, double rho, at::Tensor& B) {
  switch (form_) {
    case BForm::cholesky:
      if (rho != rho_of_factor_) {
        factor_.reset();  // the old factor's memory before the new one's
        at::Tensor M = Hn_.clone();
        M.diagonal().add_(rho);
        // Factored by blocks whose products run as the solves' do (split TF32 on a GPU: the factorization's
        // n^3 / 3 flops on the tensor cores too), in M's storage.
        std::optional<CholeskySolver> f = CholeskySolver::factor(std::move(M), products_);
        ALPS_CHECK(f.has_value(), "alps: b_update=cholesky: Hn + rho I is not positive definite (rho ", rho, ", damp ",
                   damp_, "); use damp > 0 or b_update=eigenbasis");
        factor_ = std::make_unique<CholeskySolver>(std::move(*f));
        rho_of_factor_ = rho;
        ++factorizations_;
      }
      factor_->solve(R, B);
      return;
    case BForm::explicit_inverse:
      if (rho != rho_of_factor_) {
        if (L_min_ + rho > 0) {
          at::mul_out(Qs_, Q_, (L_ + rho).rsqrt_());
          syrk_lower(Minv_, Qs_, /*transpose_a=*/false, 0.0);
          mirror_lower(Minv_);
        } else {  // an indefinite Hn + rho I (rounding with damp = 0) has no real square root
          at::mul_out(Qs_, Q_, (L_ + rho).reciprocal_());
          at::mm_out(Minv_, Qs_, Qt_);
        }
        Minv_op_ = Fp32Matrix(Minv_, products_);
        rho_of_factor_ = rho;
      }
      Minv_op_.mm_out(B, R);
      return;
    case BForm::eigenbasis:
      Qtm_.mm_out(T_, R);
      T_.div_((L_ + rho).t());
      Qm_.mm_out(B, T_);
      return;
  }
}

void BUpdate::release() {
  factor_.reset();
  Minv_op_ = Fp32Matrix();
  Qm_ = Qtm_ = Fp32Matrix();
}

const char* BUpdate::name() const {
  switch (form_) {
    case BForm::cholesky:
      return "cholesky";
    case BForm::explicit_inverse:
      return "explicit";
    case BForm::eigenbasis:
      return "eigenbasis";
  }
  return "";
}

}  // namespace alps::prune::detail
