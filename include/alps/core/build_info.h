#pragma once
#include <string>

namespace alps {

/// What a user needs to see at once to explain a slow or odd run (`alps --version`, reports).
struct BuildInfo {
  std::string alps_version;
  std::string torch_version;
  bool cuda_available = false;
  int cuda_devices = 0;
  std::string blas;  ///< shared BLAS library actually loaded (resolved path), or what libtorch was built with
  int threads = 0;   ///< intra-op threads libtorch uses
};

BuildInfo build_info();
/// Multi-line human form of build_info().
std::string build_info_text(const BuildInfo& info);

}  // namespace alps
