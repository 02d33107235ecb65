#pragma once
// Private: CPU selection kernels (radix select on order-preserving keys, rank-by-count per N:M group), templates so
// that the fused ALPS iteration (admm_iterates_cpu.cc) can run them inside its own passes, and mask_cpu.cc on whole
// score matrices.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace alps::prune::detail {

/// Order-preserving map of a float to an unsigned key: a < b (as floats) iff key(a) < key(b).
inline uint32_t float_key(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// Where exactly `zeros` of n keys are cut off: keys below `key` are pruned, and of the keys equal to it the
/// first `ties` in index order.
struct KeyCut {
  uint32_t key = 0;
  int64_t ties = 0;
};

/// One level of a radix select: `count` is the histogram (`bins` bins) of one digit of the keys whose higher digits
/// equal the cut's, and `below` the keys under those digits. Returns the digit that holds the `zeros`-th key and adds
/// the keys of lower digits to `below`.
inline int64_t cut_digit(const int64_t* count, int64_t bins, int64_t zeros, int64_t& below) {
  int64_t digit = 0;
  while (below + count[digit] <= zeros && digit < bins - 1) below += count[digit++];
  return digit;
}

/// Two-level radix select, first level: given the histogram of the keys' high 16 bits (65536 bins), the bucket
/// holding the cut and how many keys lie in lower buckets.
struct CutBucket {
  uint32_t bucket = 0;
  int64_t below = 0;
};
inline CutBucket find_cut_bucket(const std::vector<int64_t>& high, int64_t zeros) {
  CutBucket c;
  c.bucket = static_cast<uint32_t>(cut_digit(high.data(), 65536, zeros, c.below));
  return c;
}
/// Second level: `low` is the histogram of the low 16 bits of the keys inside that bucket.
inline KeyCut find_cut_in_bucket(const std::vector<int64_t>& low, const CutBucket& c, int64_t zeros) {
  int64_t below = c.below;
  const auto bits = static_cast<uint32_t>(cut_digit(low.data(), 65536, zeros, below));
  return {(c.bucket << 16) | bits, zeros - below};
}
/// Both levels on one thread: `high` is filled by the caller's own pass; one more pass over `key_at(i)`,
/// i < n, histograms the low bits. Linear time, no sort. `high` is used as scratch.
template <class KeyAt>
KeyCut find_cut(std::vector<int64_t>& high, int64_t n, int64_t zeros, KeyAt key_at) {
  const CutBucket c = find_cut_bucket(high, zeros);
  std::vector<int64_t>& low = high;
  std::fill(low.begin(), low.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t key = key_at(i);
    if ((key >> 16) == c.bucket) ++low[key & 0xffffu];
  }
  return find_cut_in_bucket(low, c, zeros);
}

/// Of the keys equal to the cut, prunes the first `cut.ties` in index order; `keep` must already hold
/// key_at(i) >= cut.key (a branch-free pass the caller may split over threads).
template <class KeyAt>
void prune_ties(bool* keep, int64_t n, KeyCut cut, KeyAt key_at) {
  for (int64_t i = 0; cut.ties > 0 && i < n; ++i) {
    if (key_at(i) == cut.key) {
      keep[i] = false;
      --cut.ties;
    }
  }
}

/// N:M on the CPU straight on a (possibly transposed) [rows, cols] fp32 view (value of (r, c) at
/// z[r * s0 + c * s1]); `kAbs` ranks |z| instead of z. Writes keep (strides k0, k1): the n largest of every group
/// of m consecutive columns of a row, ties keeping the earlier column as a stable sort would. O(m^2) per group,
/// innermost loop over the index with the smaller stride so that every stream is read sequentially.
template <bool kAbs>
void keep_top_n_of_m(const float* z, int64_t s0, int64_t s1, bool* keep, int64_t k0, int64_t k1, int64_t rows,
                     int64_t cols, int64_t n, int64_t m) {
  auto value = [](float v) { return kAbs ? std::fabs(v) : v; };
  // Entry a of a group is beaten by b when z_b > z_a, or z_b == z_a and b comes first; bitwise, not ||, so that
  // nothing branches on data.
  auto beats = [](float zb, float za, bool earlier) { return (zb > za) | ((zb == za) & earlier); };
  if (s0 == 1 && k0 == 1) {
    // Rows adjacent in memory (ALPS's transposed [in, out] iterates): every row at once per (group, a, b),
    // which vectorises.
    std::vector<int32_t> beaten_by(static_cast<size_t>(rows));
    for (int64_t g = 0; g < cols / m; ++g) {
      for (int64_t a = 0; a < m; ++a) {
        const float* za = z + (g * m + a) * s1;
        std::fill(beaten_by.begin(), beaten_by.end(), 0);
        for (int64_t b = 0; b < m; ++b) {
          const float* zb = z + (g * m + b) * s1;
          const bool earlier = b < a;
          for (int64_t r = 0; r < rows; ++r) beaten_by[r] += beats(value(zb[r]), value(za[r]), earlier);
        }
        bool* ka = keep + (g * m + a) * k1;
        for (int64_t r = 0; r < rows; ++r) ka[r] = beaten_by[r] < n;
      }
    }
    return;
  }
  auto one_group = [&](int64_t r, int64_t g) {
    const float* zg = z + r * s0 + g * m * s1;
    bool* kg = keep + r * k0 + g * m * k1;
    for (int64_t a = 0; a < m; ++a) {
      const float za = value(zg[a * s1]);
      int64_t beaten_by = 0;
      for (int64_t b = 0; b < m; ++b) beaten_by += beats(value(zg[b * s1]), za, b < a);
      kg[a * k1] = beaten_by < n;
    }
  };
  // Innermost loop over the index with the smaller stride, so that every stream is read sequentially.
  if (s0 <= s1) {
    for (int64_t g = 0; g < cols / m; ++g)
      for (int64_t r = 0; r < rows; ++r) one_group(r, g);
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < cols / m; ++g) one_group(r, g);
  }
}

}  // namespace alps::prune::detail
