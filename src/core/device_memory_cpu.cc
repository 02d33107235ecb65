// A CPU-only libtorch has no device allocator to ask.
#include "alps/core/device_memory.h"

namespace alps {

void reset_device_peak(const c10::Device&) {}

std::optional<int64_t> device_peak_bytes(const c10::Device&) { return std::nullopt; }

}  // namespace alps
