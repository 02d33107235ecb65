#pragma once
// ALPS's B-update (paper eq. 4): B = (Hn + rho I)^-1 R for the ADMM's right-hand side R = Y - V + rho D, in one of
// three forms that trade work per rho against work per iteration (rho only changes at a support check):
//   eigenbasis  B = Q (Q^T R / (L + rho)) from Hn = Q diag(L) Q^T: two [in, in] x [in, out] products per iteration;
//   explicit    (Hn + rho I)^-1 = (Q diag^1/2)(Q diag^1/2)^T formed once per rho (a syrk), then one product;
//   cholesky    Hn + rho I = C C^T factored once per rho, two triangular solves per iteration, no eigendecomposition.
// alps_admm.cc chooses the form and makes the eigendecomposition the first two read.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "alps/core/linalg.h"
#include "alps/core/products.h"

namespace alps::prune::detail {

enum class BForm { eigenbasis, explicit_inverse, cholesky };

class BUpdate {
 public:
  /// Hn [in, in]; L [1, in] and Q [in, in] its eigendecomposition (undefined for cholesky); `like` a tensor of B's
  /// shape [in, out]. `damp` only names the cause when Hn + rho I is not positive definite.
  BUpdate(BForm form, const at::Tensor& Hn, at::Tensor L, at::Tensor Q, const at::Tensor& like, Fp32Products products,
          double damp);
  /// B = (Hn + rho I)^-1 R; a rho other than the previous call's forms the inverse or factor anew (explicit,
  /// cholesky).
  void solve(const at::Tensor& R, double rho, at::Tensor& B);
  /// Cholesky factorizations made so far.
  int64_t factorizations() const { return factorizations_; }
  /// Frees the operands, so that what comes after the ADMM has their memory.
  void release();
  const char* name() const;

 private:
  BForm form_;
  at::Tensor Hn_, L_, Q_, Qt_;
  Fp32Products products_;
  double damp_;
  double L_min_ = 0;
  double rho_of_factor_ = 0;  // the rho of Minv_op_ or factor_; 0: none yet
  int64_t factorizations_ = 0;
  Fp32Matrix Qm_, Qtm_;   // eigenbasis: Q and Q^T as product operands
  at::Tensor T_;          // eigenbasis: Q^T R
  at::Tensor Minv_, Qs_;  // explicit: the inverse and Q diag^1/2
  Fp32Matrix Minv_op_;    // explicit: Minv as a product operand (split once per rho)
  std::unique_ptr<CholeskySolver> factor_;
};

}  // namespace alps::prune::detail
