#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <string>
#include <string_view>

namespace alps {

/// "auto" picks CUDA when libtorch sees a GPU, else CPU; "cpu" and "cuda[:i]" are taken as given
/// (asking for CUDA without a GPU is an error, not a silent fallback).
c10::Device resolve_device(std::string_view name);

/// What is wrong with a device name, "" when it is one resolve_device reads (auto, cpu, cuda, cuda:N), whether or not
/// the machine has that device: flags and recipes are checked with it before any work.
std::string device_name_problem(std::string_view name);

/// Runs one small matrix product and eigendecomposition on `device` the first time it is asked for it, so that the
/// one-time creation of cuBLAS / cuSOLVER handles and workspaces is not counted in the timing of the first solve, and
/// libtorch's lazily loaded CUDA linear algebra library, whose first use two threads must not race for, is loaded.
/// Nothing on the CPU.
void warm_up(const c10::Device& device);

/// Whether a libtorch error means a device ran out of memory: the caching allocator's OutOfMemoryError, or cuBLAS /
/// cuSOLVER failing to allocate a handle or a workspace, which they report with their own status codes.
bool is_device_out_of_memory(const c10::Error& e);

/// `value` as a host tensor of `dtype` that aliases nothing else, converted where it is: a GPU's fp32 result goes down
/// as fp16, half the bytes. A GPU tensor goes down at the link's rate into a page-locked buffer, then into pageable
/// memory by the host's parallel copy (a download straight into pageable memory goes through the driver's staging
/// buffer on one thread: an H100 run measured 25-80 ms per 7B-shaped weight).
at::Tensor to_host(const at::Tensor& value, c10::ScalarType dtype);

/// "fp32|float32", "fp16|float16|half", "bf16|bfloat16", "fp64|float64" -> ScalarType; anything else is an error.
c10::ScalarType parse_dtype(std::string_view name);

/// What is wrong with a dtype name, "" when parse_dtype reads it.
std::string dtype_name_problem(std::string_view name);
/// The same where one more value (e.g. "auto") is accepted, which the caller resolves itself.
std::string dtype_name_problem(std::string_view name, std::string_view also);

/// Short name used in reports and safetensors ("F32", ...): see io/safetensors.h for the file form.
std::string dtype_name(c10::ScalarType t);

}  // namespace alps
