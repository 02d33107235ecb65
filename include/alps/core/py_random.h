#pragma once
// Python's `random` module (MT19937 seeded by init_by_array, randint through rejection-sampled getrandbits), so
// that calibration windows are drawn exactly as SparseGPT's / ALPS's `get_c4` draws them for the same seed, and
// bootstrap resamples exactly as lm-evaluation-harness draws them.
#include <array>
#include <cstdint>

namespace alps {

class PyRandom {
 public:
  /// random.seed(seed) for a non-negative integer seed below 2^64.
  explicit PyRandom(uint64_t seed);
  /// random.getrandbits(k), 0 < k <= 64.
  uint64_t getrandbits(int k);
  /// random.randint(a, b): uniform on [a, b], both inclusive.
  int64_t randint(int64_t a, int64_t b);
  /// random.random(): a double in [0, 1) from 53 random bits (two 32-bit draws, 27 + 26 bits).
  double random();

 private:
  uint32_t next_u32();
  std::array<uint32_t, 624> mt_{};
  int index_ = 624;
};

}  // namespace alps
