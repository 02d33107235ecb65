#pragma once
// Memory that tensors hold on a compute device, as libtorch's caching allocator counts it: what reports compare with
// the estimate printed before a run. Only a CUDA build can count (device_memory_gpu.cc); a CPU-only build
// (device_memory_cpu.cc) reports nothing, and host memory is the process's peak resident set.
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>

namespace alps {

/// Restarts the peak count of `device` (nothing for the CPU).
void reset_device_peak(const c10::Device& device);

/// The most bytes tensors held at once on a CUDA `device` since the last reset, or nullopt for the CPU.
std::optional<int64_t> device_peak_bytes(const c10::Device& device);

}  // namespace alps
