#include "alps/core/device.h"

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>

#include <mutex>
#include <set>

#include "alps/core/error.h"

namespace alps {

c10::Device resolve_device(std::string_view name) {
  if (name == "auto") return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name.substr(0, 4) == "cuda") {
    ALPS_CHECK(torch::cuda::is_available(), "device '", name,
               "' requested but this libtorch build sees no CUDA device (use --device cpu or auto)");
    c10::Device device(c10::kCPU);
    try {
      device = c10::Device(std::string(name));
    } catch (const c10::Error&) {
      ALPS_USAGE_FAIL("unknown device '", name, "' (expected auto, cpu or cuda[:index])");
    }
    const int visible = static_cast<int>(torch::cuda::device_count());
    ALPS_CHECK(!device.has_index() || device.index() < visible, "device '", name, "' requested but only ", visible,
               " CUDA device(s) are visible (indices 0 to ", visible - 1, "; CUDA_VISIBLE_DEVICES renumbers them)");
    return device;
  }
  ALPS_USAGE_FAIL("unknown device '", name, "' (expected auto, cpu or cuda[:index])");
}

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) at::detail::getCUDAHooks().deviceSynchronize(device.has_index() ? device.index() : 0);
}

void warm_up(const c10::Device& device) {
  if (!device.is_cuda()) return;
  static std::mutex mutex;
  static std::set<int> done;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!done.insert(device.has_index() ? device.index() : 0).second) return;
  const at::Tensor a = at::eye(8, at::TensorOptions().device(device).dtype(at::kFloat));
  (void)at::mm(a, a);
  (void)at::linalg_eigh(a);
  (void)at::linalg_cholesky(a.to(at::kDouble));
  synchronize(device);
}

bool is_device_out_of_memory(const c10::Error& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return true;
  const std::string what = e.what();
  return what.find("CUBLAS_STATUS_ALLOC_FAILED") != std::string::npos ||
         what.find("CUSOLVER_STATUS_ALLOC_FAILED") != std::string::npos ||
         what.find("CUDA error: out of memory") != std::string::npos;
}

c10::ScalarType parse_dtype(std::string_view name) {
  if (name == "fp32" || name == "float32") return c10::kFloat;
  if (name == "fp16" || name == "float16" || name == "half") return c10::kHalf;
  if (name == "bf16" || name == "bfloat16") return c10::kBFloat16;
  if (name == "fp64" || name == "float64") return c10::kDouble;
  ALPS_USAGE_FAIL("unknown dtype '", name, "' (expected fp32, fp16, bf16 or fp64)");
}

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "fp32";
    case c10::kHalf: return "fp16";
    case c10::kBFloat16: return "bf16";
    case c10::kDouble: return "fp64";
    default: return c10::toString(t);
  }
}

}  // namespace alps
