// The fused CPU form of a masked CG step (pcg.h): the same arithmetic as the ATen form, in three passes.
#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "alps/core/parallel.h"
#include "prune/kernels/cpu_kernels.h"

namespace alps::prune::detail {

namespace {

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

std::unique_ptr<CgVectors> make_fused_cpu_cg(const at::Tensor& R, const at::Tensor& keep) {
  return std::make_unique<FusedCpuCg>(R, keep);
}

}  // namespace alps::prune::detail
