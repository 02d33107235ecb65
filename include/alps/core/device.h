#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <string_view>

namespace alps {

/// "auto" picks CUDA when libtorch sees a GPU, else CPU; "cpu" and "cuda[:i]" are taken as given
/// (asking for CUDA without a GPU is an error, not a silent fallback).
c10::Device resolve_device(std::string_view name);

/// "fp32|float32", "fp16|float16|half", "bf16|bfloat16", "fp64|float64" -> ScalarType; anything else is an error.
c10::ScalarType parse_dtype(std::string_view name);

/// Short name used in reports and safetensors ("F32", ...): see io/safetensors.h for the file form.
std::string dtype_name(c10::ScalarType t);

}  // namespace alps
