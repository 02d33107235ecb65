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

/// Sets libtorch's intra-op (OpenMP) thread count, and the cap on alps's own CPU passes (core/parallel.h), when `n`
/// is positive; otherwise leaves libtorch's default (and the passes use one thread per core).
/// Matrix products run on the BLAS library's own threads, and on a small CPU a second pool of spinning OpenMP
/// threads competes with them: on the 2-core development machine ALPS on a 768x768 layer took 1.34 s with 2
/// OpenMP threads and 0.76 s with Debian libtorch's default of 1 (docs/benchmarks.md).
void configure_threads(int n);

/// Short name used in reports and safetensors ("F32", ...): see io/safetensors.h for the file form.
std::string dtype_name(c10::ScalarType t);

}  // namespace alps
