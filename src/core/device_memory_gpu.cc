// The CUDA caching allocator's own counters: bytes handed to tensors, not what the driver reserved for its cache.
#include <c10/cuda/CUDACachingAllocator.h>

#include "alps/core/device_memory.h"

namespace alps {

namespace {
c10::DeviceIndex index_of(const c10::Device& device) { return device.has_index() ? device.index() : 0; }
}  // namespace

void reset_device_peak(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(device));
}

std::optional<int64_t> device_peak_bytes(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}

}  // namespace alps
