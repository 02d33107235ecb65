#pragma once
#include <string>

#include "alps/core/threads.h"

namespace alps {

/// What a user needs to see at once to explain a slow or odd run (`alps --version`, reports).
struct BuildInfo {
  std::string alps_version;
  /// The checkout it was built from: its commit, "-dirty" when tracked files differed from it, or "unknown" when
  /// built outside a git checkout (cmake/source_revision.cmake).
  std::string source_revision;
  std::string torch_version;
  /// CUDA toolkit this binary was built with ("13.0"), empty for a CPU-only build (Debian's libtorch). A CUDA build
  /// still runs without a GPU; cuda_available says whether one is visible now.
  std::string cuda_build;
  bool cuda_available = false;
  int cuda_devices = 0;
  std::string blas;  ///< shared BLAS library actually loaded (resolved path), or what libtorch was built with
  ThreadSettings threads;  ///< the cores alps uses and each thread pool's share
  std::string data_dir;         ///< the data directory used without --data-dir (alps::find_data_dir)
  std::string data_dir_origin;  ///< why that one
};

BuildInfo build_info();
/// Multi-line human form of build_info().
std::string build_info_text(const BuildInfo& info);

}  // namespace alps
