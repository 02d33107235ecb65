#pragma once
// Shared test helpers: tensor comparison, fixture directories, the data directory and running the CLI.
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace alps::test {

/// |a - b| <= atol + rtol |b| elementwise (fp64 comparison), with the worst element in the failure message.
::testing::AssertionResult all_close(const at::Tensor& a, const at::Tensor& b, double atol, double rtol);
#define EXPECT_ALL_CLOSE(a, b, atol, rtol) EXPECT_TRUE(::alps::test::all_close((a), (b), (atol), (rtol)))

/// Tolerance for two evaluations of one quantity in a dtype of unit roundoff `u` (2^-24 for fp32) that differ only
/// in rounding: the blocking of sums, the vector width (AVX2 vs AVX-512), the batch shape. Each lies within
/// gamma_n = n u / (1 - n u) of the exact value relative to `scale`, the magnitude of the terms behind it, where n
/// is the number of roundings along its longest chain of accumulations; their difference is at most twice that.
double rounding_bound(double n, double scale, double u = 0x1p-24);

/// The same difference under the probabilistic model of rounding errors (independent, mean-zero relative errors of
/// at most u each; Higham and Mary 2019): each evaluation lies within gamma~_n = exp(lambda sqrt(n) u + n u^2 /
/// (1 - u)) - 1 of the exact value relative to `scale`, except with probability at most 2 n exp(-lambda^2 (1 - u)^2
/// / 2), below 1e-16 for lambda = 10 and n up to 10^6. For deep networks, where n runs to 10^5 and the worst case of
/// rounding_bound allows errors as large as the result, this is the bound to use.
double probabilistic_rounding_bound(double n, double scale, double lambda = 10, double u = 0x1p-24);

/// ../shared/data as configured at build time ($ALPS_DATA_DIR overrides).
std::filesystem::path data_dir();
/// The repository root (for configs/ and scripts/).
std::filesystem::path source_dir();

/// SmolLM2-135M-Instruct (fp32) where scripts/get_smollm2.sh puts it by default: $ALPS_SMOLLM2_DIR, else
/// $ALPS_CACHE_DIR/models/SmolLM2-135M-Instruct, else $XDG_CACHE_HOME/alps/..., else ~/.cache/alps/....
std::filesystem::path smollm2_dir();
/// Skips the calling test, saying how to get the model, unless smollm2_dir() holds a complete conversion.
#define ALPS_REQUIRE_SMOLLM2()                                                                                \
  do {                                                                                                         \
    if (!std::filesystem::exists(::alps::test::smollm2_dir() / ".alps-smollm2.json"))                          \
      GTEST_SKIP() << "SmolLM2-135M-Instruct not found in " << ::alps::test::smollm2_dir().string()           \
                   << "; run scripts/get_smollm2.sh to fetch it (about 1 minute, 93 MB download)";             \
  } while (0)

/// The whole content of a file (empty if it cannot be read).
std::string slurp(const std::filesystem::path& path);

/// A fresh directory removed when the object goes out of scope.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

struct CliResult {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};
/// Where and with what environment run_cli starts the executable.
struct CliContext {
  std::filesystem::path cwd;     ///< empty: the test's working directory
  std::vector<std::string> env;  ///< "NAME=value" added to the environment
};
/// Runs the built `alps` executable with `args` (each shell-quoted) and captures both streams.
CliResult run_cli(const std::vector<std::string>& args, const CliContext& context = {});

}  // namespace alps::test
