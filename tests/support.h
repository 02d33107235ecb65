#pragma once
// Shared test helpers: tensor comparison, fixture directories, the data directory and running the CLI.
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
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

/// The real data committed with the tests, tests/data/real: stories260K, the GPT-2 tokenizer and the
/// texts the tests read, laid out as in the data directory (models/, tokenizers/, text/), so that it can be passed
/// as one. Always there: tests that can run on it use it.
std::filesystem::path committed_data_dir();

/// The optional data directory, for what is too large to commit (the zero-shot task sets under eval/): ../shared/data
/// as configured at build time ($ALPS_DATA_DIR overrides). May be absent: reach it through ALPS_REQUIRE_DATA.
std::filesystem::path data_dir();

/// Every skip for absent data starts its message with this marker. When $ALPS_MISSING_DATA_LOG names a file, such a
/// skip also appends a line to it (the test and what is missing), so that CI can refuse to lose coverage quietly.
inline constexpr const char* kMissingDataMarker = "missing test data:";
/// Appends "<test>: <what>" to $ALPS_MISSING_DATA_LOG when it is set; returns the skip message: the marker, what is
/// missing and how to get it.
std::string note_missing_data(const std::string& what, const std::string& how_to_get_it);

/// What `f` is refused with: the message of the alps::Error it throws, or "no error" when it returns (so that a
/// check for the expected words fails, showing that nothing was refused). Other exceptions pass through.
std::string error_message(const std::function<void()>& f);

/// Skips the calling test unless data_dir() / `relative` exists, saying what is missing and how to get it.
#define ALPS_REQUIRE_DATA(relative)                                                                                    \
  do {                                                                                                                 \
    const std::filesystem::path alps_required_ = ::alps::test::data_dir() / (relative);                                \
    if (!std::filesystem::exists(alps_required_))                                                                      \
      GTEST_SKIP() << ::alps::test::note_missing_data(                                                                 \
          alps_required_.string(),                                                                                     \
          "set $ALPS_DATA_DIR to the optional data directory (README.md, \"Install, build, test\")");                  \
  } while (0)

/// The repository root (for configs/ and scripts/).
std::filesystem::path source_dir();

/// SmolLM2-135M-Instruct (fp32) where scripts/get_smollm2.sh puts it by default: $ALPS_SMOLLM2_DIR, else
/// $ALPS_CACHE_DIR/models/SmolLM2-135M-Instruct, else $XDG_CACHE_HOME/alps/..., else ~/.cache/alps/....
std::filesystem::path smollm2_dir();
/// Skips the calling test, saying how to get the model, unless smollm2_dir() holds a complete conversion.
#define ALPS_REQUIRE_SMOLLM2()                                                                                         \
  do {                                                                                                                 \
    if (!std::filesystem::exists(::alps::test::smollm2_dir() / ".alps-smollm2.json"))                                  \
      GTEST_SKIP() << ::alps::test::note_missing_data(                                                                 \
          "SmolLM2-135M-Instruct in " + ::alps::test::smollm2_dir().string(),                                          \
          "run scripts/get_smollm2.sh to fetch it (about 1 minute, 93 MB download)");                                  \
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
/// A context whose alps reads data_dir() as its data directory (the zero-shot tasks under eval/); pair it with
/// ALPS_REQUIRE_DATA.
CliContext with_data_dir();
/// Runs the built `alps` executable with `args` (each shell-quoted) and captures both streams. Its data directory
/// ($ALPS_DATA_DIR) is committed_data_dir() unless `context.env` sets another.
CliResult run_cli(const std::vector<std::string>& args, const CliContext& context = {});

/// `alps eval --ppl FILE` on a text that is not UTF-8 exits 1 with an error naming FILE and the byte offset,
/// whichever tokenizer `model` has.
void expect_invalid_utf8_names_the_file(const std::filesystem::path& model);

}  // namespace alps::test
