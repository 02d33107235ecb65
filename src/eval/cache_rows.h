#pragma once
// How many rows of fp32 logits the CPU handles at once after the head's product.
#include <algorithm>
#include <cstdint>

namespace alps::eval {

/// Rows of a [*, vocab] fp32 logits tensor in about 512 KiB: a core's cache keeps them from the first of the passes
/// over them (max, exponentials, sum, look-ups) to the last, where a whole slice of the head's output would be read
/// from memory again by each pass.
inline int64_t cache_rows(int64_t vocab) { return std::max<int64_t>(1, (int64_t{512} << 10) / (4 * vocab)); }

}  // namespace alps::eval
