// The fused CPU form of the ALPS iterates (admm_iterates.h): the same arithmetic as the ATen form, in four passes
// over [in, out] per iteration.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "alps/core/parallel.h"
#include "prune/kernels/cpu_kernels.h"
#include "prune/kernels/select_cpu.h"

namespace alps::prune::detail {

namespace {

// The same iterates in a compact form. After a projection with penalty rho_v, D = Z * keep and
// V = V + rho_v (B - D) = rho_v (Z - D), so both follow from Z and the kept mask:
//   D = keep ? Z : 0,   V = keep ? 0 : rho_v Z        (rho_v = 0 encodes V = 0: the start and a restart)
//   R = Y - V + rho D = keep ? Y + rho Z : Y - rho_v Z
//   Z' = B + V / rho  = keep ? B : B + (rho_v / rho) Z
// An iteration is then: rhs (read Y, Z, keep; write R), the Z update fused with the histogram of the radix select
// (read B, Z, keep; write Z), the second radix pass (read Z) and the mask (read Z; write keep).
class FusedCpuIterates final : public AdmmIterates {
  // float_key(|v|) without a branch: clearing the sign bit and then setting it (float_key of a non-negative
  // float) is setting it.
  static uint32_t abs_key(float v) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u | 0x80000000u;
  }

 public:
  FusedCpuIterates(const at::Tensor& Y, const at::Tensor& B0, const Pattern& pattern)
      : Y_(Y.contiguous()), B0_(B0.contiguous()), pattern_(pattern) {
    in_ = B0.size(0);
    out_ = B0.size(1);
    n_ = in_ * out_;
    threads_ = parallel_threads(n_);
    hist_.assign(static_cast<size_t>(threads_), std::vector<int64_t>(65536));
    zeros_ = pattern.zeros_total(out_, in_);
    keep0_ = project_keep(B0_, pattern).contiguous();
    keep_ = keep0_.clone();
    keep_check_ = keep0_.clone();
    Z_ = B0_.clone();
    R_ = at::empty_like(B0_);
  }

  const at::Tensor& rhs(double rho) override {
    const float* y = Y_.data_ptr<float>();
    const float* z = Z_.data_ptr<float>();
    const bool* k = keep_.data_ptr<bool>();
    float* r = R_.data_ptr<float>();
    // Branch-free (the mask is unpredictable): factor = -rho_v + (rho + rho_v) * keep.
    const float pruned = static_cast<float>(-rho_v_), step = static_cast<float>(rho + rho_v_);
    parallel_chunks(n_, threads_, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) r[i] = y[i] + (pruned + step * static_cast<float>(k[i])) * z[i];
    });
    return R_;
  }

  void project_and_update_dual(const at::Tensor& B, double rho) override {
    const at::Tensor Bc = B.contiguous();
    const float* b = Bc.data_ptr<float>();
    float* z = Z_.data_ptr<float>();
    bool* k = keep_.data_ptr<bool>();
    const float carry = static_cast<float>(rho_v_ / rho);
    rho_v_ = rho;
    auto update_z = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) z[i] = b[i] + carry * static_cast<float>(!k[i]) * z[i];
    };
    if (pattern_.is_n_m()) {
      // Groups run along `in` for each output: in the [in, out] layout that is the transposed view, and a chunk
      // of whole groups is a chunk of rows.
      const int64_t m = pattern_.m();
      parallel_chunks(in_ / m, threads_, [&](int64_t g0, int64_t g1, int) {
        update_z(g0 * m * out_, g1 * m * out_);
        keep_top_n_of_m<true>(z + g0 * m * out_, 1, out_, k + g0 * m * out_, 1, out_, out_, (g1 - g0) * m,
                              pattern_.n(), m);
      });
      return;
    }
    // Unstructured: the Z update and the radix select's first histogram in one sweep, tile by tile so that the
    // histogram reads Z from cache; one histogram per thread.
    parallel_chunks(n_, threads_, [&](int64_t begin, int64_t end, int t) {
      std::vector<int64_t>& high = hist_[t];
      std::fill(high.begin(), high.end(), 0);
      constexpr int64_t kTile = 4096;
      for (int64_t i0 = begin; i0 < end; i0 += kTile) {
        const int64_t i1 = std::min(end, i0 + kTile);
        update_z(i0, i1);
        for (int64_t i = i0; i < i1; ++i) ++high[abs_key(z[i]) >> 16];
      }
    });
    merge_histograms();
    const CutBucket bucket = find_cut_bucket(hist_[0], zeros_);
    parallel_chunks(n_, threads_, [&](int64_t begin, int64_t end, int t) {
      std::vector<int64_t>& low = hist_[t];
      std::fill(low.begin(), low.end(), 0);
      for (int64_t i = begin; i < end; ++i) {
        const uint32_t key = abs_key(z[i]);
        if ((key >> 16) == bucket.bucket) ++low[key & 0xffffu];
      }
    });
    merge_histograms();
    const KeyCut cut = find_cut_in_bucket(hist_[0], bucket, zeros_);
    parallel_chunks(n_, threads_, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) k[i] = abs_key(z[i]) >= cut.key;
    });
    // Of the entries at the cut, the first `ties` in memory order are pruned too (as keep_largest does).
    prune_ties(k, n_, cut, [z](int64_t i) { return abs_key(z[i]); });
  }

  int64_t support_changes() override {
    const bool* k = keep_.data_ptr<bool>();
    bool* c = keep_check_.data_ptr<bool>();
    int64_t changed = 0;
    for (int64_t i = 0; i < n_; ++i) {
      changed += k[i] != c[i];
      c[i] = k[i];
    }
    return changed;
  }

  void restart() override {
    Z_.copy_(B0_);
    keep_.copy_(keep0_);
    rho_v_ = 0;
  }

 private:
  // Sums the per-thread radix histograms into hist_[0].
  void merge_histograms() {
    for (size_t t = 1; t < hist_.size(); ++t)
      for (size_t i = 0; i < 65536; ++i) hist_[0][i] += hist_[t][i];
  }

  at::Tensor Y_, B0_;
  Pattern pattern_;
  int64_t in_ = 0, out_ = 0, n_ = 0, zeros_ = 0;
  int threads_ = 1;
  at::Tensor keep0_, keep_, keep_check_, Z_, R_;
  double rho_v_ = 0;
  std::vector<std::vector<int64_t>> hist_;  // radix histograms (65536 bins), one per thread
};

}  // namespace

std::unique_ptr<AdmmIterates> make_fused_cpu_iterates(const at::Tensor& Y, const at::Tensor& B0,
                                                      const Pattern& pattern) {
  return std::make_unique<FusedCpuIterates>(Y, B0, pattern);
}

}  // namespace alps::prune::detail
