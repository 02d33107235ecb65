#include "alps/core/device.h"
#include "alps/core/device_streams.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <mutex>
#include <set>

#include "alps/core/error.h"

namespace alps {

namespace {
struct DtypeName {
  const char* name;
  c10::ScalarType type;
};
constexpr DtypeName kDtypeNames[] = {{"fp32", c10::kFloat},      {"float32", c10::kFloat},  {"fp16", c10::kHalf},
                                     {"float16", c10::kHalf},    {"half", c10::kHalf},      {"bf16", c10::kBFloat16},
                                     {"bfloat16", c10::kBFloat16}, {"fp64", c10::kDouble}, {"float64", c10::kDouble}};

bool is_cuda_name(std::string_view name) {
  if (name.substr(0, 4) != "cuda") return false;
  try {
    return c10::Device(std::string(name)).is_cuda();
  } catch (const c10::Error&) {
    return false;
  }
}
}  // namespace

std::string device_name_problem(std::string_view name) {
  if (name == "auto" || name == "cpu" || is_cuda_name(name)) return "";
  return "unknown device '" + std::string(name) + "' (expected auto, cpu or cuda[:index])";
}

c10::Device resolve_device(std::string_view name) {
  ALPS_USAGE_CHECK(device_name_problem(name).empty(), device_name_problem(name));
  if (name == "auto") return torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (name == "cpu") return c10::Device(c10::kCPU);
  ALPS_CHECK(torch::cuda::is_available(), "device '", name,
             "' requested but this libtorch build sees no CUDA device (use --device cpu or auto)");
  const c10::Device device(std::string{name});
  const int visible = static_cast<int>(torch::cuda::device_count());
  ALPS_CHECK(!device.has_index() || device.index() < visible, "device '", name, "' requested but only ", visible,
             " CUDA device(s) are visible (indices 0 to ", visible - 1, "; CUDA_VISIBLE_DEVICES renumbers them)");
  return device;
}

at::Tensor to_host(const at::Tensor& value, c10::ScalarType dtype) {
  const at::Tensor stored = value.detach().to(dtype);
  if (!stored.is_cuda()) {
    at::Tensor host = stored.contiguous();
    return host.is_alias_of(value) ? host.clone() : host;
  }
  // The page-locked buffer goes back to libtorch's cache for the next.
  const at::Tensor staged = at::empty(stored.sizes(), stored.options().device(at::kCPU).pinned_memory(true));
  staged.copy_(stored);
  at::Tensor host = at::empty(stored.sizes(), stored.options().device(at::kCPU));
  host.copy_(staged);
  return host;
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
  for (const DtypeName& d : kDtypeNames)
    if (name == d.name) return d.type;
  ALPS_USAGE_FAIL(dtype_name_problem(name));
}

std::string dtype_name_problem(std::string_view name) { return dtype_name_problem(name, {}); }

std::string dtype_name_problem(std::string_view name, std::string_view also) {
  if (!also.empty() && name == also) return "";
  for (const DtypeName& d : kDtypeNames)
    if (name == d.name) return "";
  return "unknown dtype '" + std::string(name) + "' (expected " + (also.empty() ? "" : std::string(also) + ", ") +
         "fp32, fp16, bf16 or fp64)";
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
