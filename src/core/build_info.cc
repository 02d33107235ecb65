#include "alps/core/build_info.h"

#include <ATen/Context.h>
#include <torch/version.h>
#include <link.h>
#include <torch/cuda.h>

#include <filesystem>
#include <sstream>
#include <vector>

#include "alps/core/paths.h"
#include "alps/source_revision.h"  // generated at build time (cmake/source_revision.cmake)

#ifndef ALPS_VERSION
#define ALPS_VERSION "0.0.0"
#endif
#ifndef ALPS_CUDA_VERSION
#define ALPS_CUDA_VERSION ""
#endif

namespace alps {

namespace {

// libtorch calls sgemm through whatever libblas.so.3 the dynamic linker found (Debian's alternatives system), so
// the loaded libraries, not the build configuration, tell whether matrix products run on OpenBLAS or the reference.
int collect_blas(struct dl_phdr_info* info, size_t, void* out) {
  std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  const auto base = std::filesystem::path(name).filename().string();
  const bool host_blas = base.find("blas") != std::string::npos || base.find("mkl") != std::string::npos;
  if (host_blas && base.find("cublas") == std::string::npos) {  // cuBLAS serves CUDA tensors only
    std::error_code ec;
    auto real = std::filesystem::canonical(name, ec);
    static_cast<std::vector<std::string>*>(out)->push_back(ec ? name : real.string());
  }
  return 0;
}

}  // namespace

BuildInfo build_info() {
  BuildInfo info;
  info.alps_version = ALPS_VERSION;
  info.source_revision = ALPS_SOURCE_REVISION;
  info.torch_version = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                       std::to_string(TORCH_VERSION_PATCH);
  info.cuda_build = ALPS_CUDA_VERSION;
  info.cuda_available = torch::cuda::is_available();
  info.cuda_devices = info.cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
  std::vector<std::string> libs;
  dl_iterate_phdr(collect_blas, &libs);
  for (const auto& l : libs) info.blas += (info.blas.empty() ? "" : ", ") + l;
  // PyPI's libtorch links MKL statically: ATen's products run on it, alps's direct LAPACK calls on the library above.
  if (at::hasMKL()) info.blas += std::string(info.blas.empty() ? "" : ", ") + "MKL inside libtorch (ATen's products)";
  if (info.blas.empty()) info.blas = "none loaded as a shared library (statically linked inside libtorch)";
  info.threads = thread_settings();
  const DataDir data = find_data_dir();
  info.data_dir = data.path.string();
  info.data_dir_origin = data.origin;
  return info;
}

std::string build_info_text(const BuildInfo& info) {
  std::ostringstream os;
  os << "alps " << info.alps_version << " (source " << info.source_revision << ")\n"
     << "libtorch " << info.torch_version << "\n"
     << "cuda build: " << (info.cuda_build.empty() ? "no (CPU-only libtorch)" : "yes, CUDA " + info.cuda_build) << "\n"
     << "cuda devices: "
     << (info.cuda_available ? std::to_string(info.cuda_devices) + " visible" : "none visible") << "\n"
     << "blas: " << info.blas << "\n"
     << "threads: " << thread_settings_text(info.threads) << "\n"
     << "data directory: " << info.data_dir << " (" << info.data_dir_origin << ")\n";
  return os.str();
}

}  // namespace alps
