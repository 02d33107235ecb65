// The CUDA caching allocator's own counters: bytes handed to tensors, not what the driver reserved for its cache.
#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "alps/core/device_memory.h"

namespace alps {

namespace {
c10::DeviceIndex index_of(const c10::Device& device) { return device.has_index() ? device.index() : 0; }

// The allocator's counters exist once CUDA is initialised, which libtorch does on first use; a run asks for them
// before its first tensor reaches the device ("did you call init?" otherwise).
void init_cuda() { at::globalContext().lazyInitDevice(c10::kCUDA); }
}  // namespace

void reset_device_peak(const c10::Device& device) {
  if (!device.is_cuda()) return;
  init_cuda();
  c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(device));
}

std::optional<int64_t> device_peak_bytes(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  init_cuda();
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device));
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}

}  // namespace alps
