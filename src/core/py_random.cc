#include "alps/core/py_random.h"

#include <vector>

#include "alps/core/error.h"

namespace alps {

namespace {
constexpr int kN = 624;
constexpr int kM = 397;
}  // namespace

PyRandom::PyRandom(uint64_t seed) {
  // CPython: the seed's absolute value split into 32-bit words, least significant first ([0] for 0), fed to
  // MT's init_by_array after init_genrand(19650218).
  std::vector<uint32_t> key;
  do {
    key.push_back(static_cast<uint32_t>(seed & 0xffffffffu));
    seed >>= 32;
  } while (seed != 0);

  mt_[0] = 19650218u;
  for (int i = 1; i < kN; ++i) mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  int i = 1;
  size_t j = 0;
  const int key_len = static_cast<int>(key.size());
  for (int k = kN > key_len ? kN : key_len; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;
  index_ = kN;
}

uint32_t PyRandom::next_u32() {
  if (index_ >= kN) {
    for (int k = 0; k < kN; ++k) {
      const uint32_t y = (mt_[k] & 0x80000000u) | (mt_[(k + 1) % kN] & 0x7fffffffu);
      mt_[k] = mt_[(k + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint64_t PyRandom::getrandbits(int k) {
  ALPS_CHECK(k > 0 && k <= 64, "getrandbits(", k, ") supports 1..64 bits");
  if (k <= 32) return next_u32() >> (32 - k);
  // CPython fills 32-bit words from the least significant end; the last word keeps its top bits.
  const uint64_t low = next_u32();
  const uint64_t high = next_u32() >> (64 - k);
  return low | (high << 32);
}

int64_t PyRandom::randint(int64_t a, int64_t b) {
  ALPS_CHECK(a <= b, "randint(", a, ", ", b, "): empty range");
  const uint64_t n = static_cast<uint64_t>(b - a) + 1;
  int k = 0;
  while (k < 64 && (n >> k) != 0) ++k;  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);  // CPython's _randbelow_with_getrandbits
  return a + static_cast<int64_t>(r);
}

double PyRandom::random() {
  const uint32_t a = next_u32() >> 5, b = next_u32() >> 6;
  return (static_cast<double>(a) * 67108864.0 + static_cast<double>(b)) * (1.0 / 9007199254740992.0);
}

}  // namespace alps
