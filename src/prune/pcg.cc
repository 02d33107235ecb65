#include "pcg.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "alps/core/parallel.h"

namespace alps::prune::detail {

namespace {

// One CG step per column j of the [in, out] iterates, given AP = Hn P:
//   alpha_j = rz_j / (p_j . Ap_j);  b_j += alpha_j p_j;  r_j = (r_j - alpha_j Ap_j) on the support
//   rz'_j = r_j . r_j;  beta_j = rz'_j / rz_j;  p_j = r_j + beta_j p_j
// Column j of a row-major [in, out] matrix is strided, so each dot product is accumulated row by row into
// per-column sums.
class CgVectors {
 public:
  virtual ~CgVectors() = default;
  /// Updates B and R with alpha from AP; returns sum_j rz'_j.
  virtual double step(at::Tensor& B, at::Tensor& R, const at::Tensor& P, const at::Tensor& AP) = 0;
  /// P = R + beta P.
  virtual void next_direction(at::Tensor& P, const at::Tensor& R) = 0;
};

// A converged column has P = 0 and pAp = 0 (or rz = 0): it gets alpha = 0 (beta = 0) instead of 0/0.
class AtenCg final : public CgVectors {
 public:
  AtenCg(const at::Tensor& R, const at::Tensor& keep) : keep_(keep), T_(at::empty_like(R)) {
    const int64_t out = R.size(1);
    rz_ = at::empty({out}, R.options());
    rz_next_ = at::empty({out}, R.options());
    pAp_ = at::empty({out}, R.options());
    at::sum_out(rz_, at::mul_out(T_, R, R), 0);
  }
  double step(at::Tensor& B, at::Tensor& R, const at::Tensor& P, const at::Tensor& AP) override {
    at::sum_out(pAp_, at::mul_out(T_, P, AP), 0);
    const at::Tensor alpha = at::where(pAp_ > 0, rz_ / pAp_.clamp_min(1e-30), at::zeros_like(pAp_)).unsqueeze(0);
    B.addcmul_(P, alpha);
    R.addcmul_(AP, alpha, -1).mul_(keep_);
    at::sum_out(rz_next_, at::mul_out(T_, R, R), 0);
    return rz_next_.sum().item<double>();
  }
  void next_direction(at::Tensor& P, const at::Tensor& R) override {
    const at::Tensor beta = at::where(rz_ > 0, rz_next_ / rz_.clamp_min(1e-30), at::zeros_like(rz_)).unsqueeze(0);
    P.mul_(beta).add_(R);
    std::swap(rz_, rz_next_);
  }

 private:
  at::Tensor keep_, T_, rz_, rz_next_, pAp_;
};

// The same step in three passes over [in, out] (p.Ap; the B/R update with r.r; the new direction) instead of
// about ten ATen passes: at in = 768 the vector work took as long as the product. Rows are split over threads,
// each with its own fp64 column sums.
class FusedCpuCg final : public CgVectors {
 public:
  FusedCpuCg(const at::Tensor& R, const at::Tensor& keep)
      : in_(R.size(0)), out_(R.size(1)), threads_(parallel_threads(R.numel())), keep_(keep.to(at::kBool).contiguous()),
        rz_(out_), rz_next_(out_), coef_(out_), sums_(threads_, std::vector<double>(out_)) {
    const float* r = R.data_ptr<float>();
    column_sums(rz_, [&](int64_t i, std::vector<double>& s) {
      for (int64_t j = 0; j < out_; ++j) s[j] += double(r[i * out_ + j]) * r[i * out_ + j];
    });
  }
  double step(at::Tensor& B, at::Tensor& R, const at::Tensor& P, const at::Tensor& AP) override {
    const float* p = P.data_ptr<float>();
    const float* ap = AP.data_ptr<float>();
    std::vector<double> pAp(out_);
    column_sums(pAp, [&](int64_t i, std::vector<double>& s) {
      for (int64_t j = 0; j < out_; ++j) s[j] += double(p[i * out_ + j]) * ap[i * out_ + j];
    });
    for (int64_t j = 0; j < out_; ++j) coef_[j] = pAp[j] > 0 ? static_cast<float>(rz_[j] / pAp[j]) : 0.0f;
    float* b = B.data_ptr<float>();
    float* r = R.data_ptr<float>();
    const bool* k = keep_.data_ptr<bool>();
    column_sums(rz_next_, [&](int64_t i, std::vector<double>& s) {
      const int64_t row = i * out_;
      for (int64_t j = 0; j < out_; ++j) {
        const float alpha = coef_[j];
        b[row + j] += alpha * p[row + j];
        const float rn = (r[row + j] - alpha * ap[row + j]) * static_cast<float>(k[row + j]);  // no branch
        r[row + j] = rn;
        s[j] += double(rn) * rn;
      }
    });
    return std::accumulate(rz_next_.begin(), rz_next_.end(), 0.0);
  }
  void next_direction(at::Tensor& P, const at::Tensor& R) override {
    for (int64_t j = 0; j < out_; ++j) coef_[j] = rz_[j] > 0 ? static_cast<float>(rz_next_[j] / rz_[j]) : 0.0f;
    float* p = P.data_ptr<float>();
    const float* r = R.data_ptr<float>();
    parallel_chunks(in_, threads_, [&](int64_t i0, int64_t i1, int) {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = 0; j < out_; ++j) p[i * out_ + j] = r[i * out_ + j] + coef_[j] * p[i * out_ + j];
    });
    std::swap(rz_, rz_next_);
  }

 private:
  // total[j] = sum over rows i of what row(i, sums) adds to sums[j], each thread into its own sums.
  template <class Row>
  void column_sums(std::vector<double>& total, Row row) {
    parallel_chunks(in_, threads_, [&](int64_t i0, int64_t i1, int t) {
      std::vector<double>& sums = sums_[t];
      std::fill(sums.begin(), sums.end(), 0.0);
      for (int64_t i = i0; i < i1; ++i) row(i, sums);
    });
    std::fill(total.begin(), total.end(), 0.0);
    for (const auto& s : sums_)
      for (int64_t j = 0; j < out_; ++j) total[j] += s[j];
  }
  int64_t in_, out_;
  int threads_;
  at::Tensor keep_;
  std::vector<double> rz_, rz_next_;
  std::vector<float> coef_;
  std::vector<std::vector<double>> sums_;  // per-thread column sums
};

}  // namespace

PcgResult pcg_masked(const at::Tensor& Hn, const at::Tensor& Y, const at::Tensor& keep, const at::Tensor& B_init,
                     int64_t iterations, double tolerance, bool fused) {
  // Every iterate lives in a buffer allocated once and is updated in place.
  at::Tensor B = (B_init * keep).contiguous();    // [in, out]
  at::Tensor R = at::empty_like(B);               // masked residual
  at::mm_out(R, Hn, B);
  R.sub_(Y).neg_().mul_(keep);
  const double target = tolerance * (Y * keep).norm().item<double>();
  PcgResult result{B, 0};
  if (R.norm().item<double>() <= target) return result;
  at::Tensor P = R.clone();
  at::Tensor AP = at::empty_like(B);
  const bool cpu_fp32 = B.device().is_cpu() && B.scalar_type() == at::kFloat;
  std::unique_ptr<CgVectors> cg;
  if (fused && cpu_fp32) {
    cg = std::make_unique<FusedCpuCg>(R, keep);
  } else {
    cg = std::make_unique<AtenCg>(R, keep);
  }
  for (int64_t k = 0; k < iterations; ++k) {
    at::mm_out(AP, Hn, P);  // the one [in,in] x [in,out] product per iteration
    const double rz_next = cg->step(B, R, P, AP);
    result.iterations = k + 1;
    if (std::sqrt(rz_next) <= target) break;
    cg->next_direction(P, R);
  }
  return result;
}

}  // namespace alps::prune::detail
