#include "support.h"

#include <ATen/ATen.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "alps/core/error.h"

namespace alps::test {

namespace fs = std::filesystem;

::testing::AssertionResult all_close(const at::Tensor& a, const at::Tensor& b, double atol, double rtol) {
  if (a.sizes() != b.sizes())
    return ::testing::AssertionFailure() << "shape " << a.sizes() << " vs " << b.sizes();
  at::Tensor x = a.detach().cpu().to(at::kDouble);
  at::Tensor y = b.detach().cpu().to(at::kDouble);
  at::Tensor excess = (x - y).abs() - (atol + rtol * y.abs());
  if (x.numel() == 0 || excess.max().item<double>() <= 0) return ::testing::AssertionSuccess();
  const int64_t i = excess.flatten().argmax().item<int64_t>();
  return ::testing::AssertionFailure() << "worst element " << i << ": " << x.flatten()[i].item<double>() << " vs "
                                       << y.flatten()[i].item<double>() << " (atol " << atol << ", rtol " << rtol
                                       << ", max |diff| " << (x - y).abs().max().item<double>() << ")";
}

double rounding_bound(double n, double scale, double u) {
  EXPECT_LT(n * u, 0.5) << "no rounding bound for " << n << " roundings";
  return 2 * n * u / (1 - n * u) * scale;
}

double probabilistic_rounding_bound(double n, double scale, double lambda, double u) {
  const double gamma = std::exp(lambda * std::sqrt(n) * u + n * u * u / (1 - u)) - 1;  // Higham and Mary's gamma~
  return 2 * gamma * scale;
}

fs::path committed_data_dir() { return fs::path(ALPS_SOURCE_DIR) / "tests" / "data" / "real"; }

fs::path data_dir() {
  if (const char* env = std::getenv("ALPS_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return ALPS_TEST_DATA_DIR;
}

fs::path source_dir() { return ALPS_SOURCE_DIR; }

std::string note_missing_data(const std::string& what, const std::string& how_to_get_it) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = test != nullptr ? std::string(test->test_suite_name()) + "." + test->name() : "?";
  if (const char* log = std::getenv("ALPS_MISSING_DATA_LOG"); log != nullptr && *log != '\0')
    std::ofstream(log, std::ios::app) << name << ": " << what << "\n";
  return std::string(kMissingDataMarker) + " " + what + "; " + how_to_get_it;
}

fs::path smollm2_dir() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
  };
  if (!env("ALPS_SMOLLM2_DIR").empty()) return env("ALPS_SMOLLM2_DIR");
  fs::path cache;
  if (!env("ALPS_CACHE_DIR").empty()) {
    cache = env("ALPS_CACHE_DIR");
  } else if (!env("XDG_CACHE_HOME").empty()) {
    cache = fs::path(env("XDG_CACHE_HOME")) / "alps";
  } else {
    cache = fs::path(env("HOME")) / ".cache" / "alps";
  }
  return cache / "models" / "SmolLM2-135M-Instruct";
}

TempDir::TempDir() {
  std::random_device rd;
  path_ = fs::temp_directory_path() / ("alps-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

namespace {
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliContext with_data_dir() { return {{}, {"ALPS_DATA_DIR=" + data_dir().string()}}; }

CliResult run_cli(const std::vector<std::string>& args, const CliContext& context) {
#ifndef ALPS_CLI_PATH
  ADD_FAILURE() << "this test suite was not built with the CLI (ALPS_CLI_PATH undefined)";
  return {};
#else
  TempDir tmp;
  std::string cmd;
  if (!context.cwd.empty()) cmd += "cd " + quote(context.cwd.string()) + " && ";
  cmd += "env " + quote("ALPS_DATA_DIR=" + committed_data_dir().string()) + " ";  // a later setting wins
  for (const auto& e : context.env) cmd += quote(e) + " ";
  cmd += quote(ALPS_CLI_PATH);
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " >" + quote((tmp / "out").string()) + " 2>" + quote((tmp / "err").string());
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(tmp / "out");
  r.err = slurp(tmp / "err");
  return r;
#endif
}

std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const alps::Error& e) {
    return e.what();
  }
  return "no error";
}

void expect_invalid_utf8_names_the_file(const std::filesystem::path& model) {
  TempDir tmp;
  const std::string file = (tmp / "bad.txt").string();
  std::ofstream(file) << "Hello \xff world and more words here";
  const auto r = run_cli({"eval", "--model", model.string(), "--ppl", file, "--seqlen", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("dataset " + file + ": text to tokenize is not valid UTF-8 (byte offset 6)"), std::string::npos)
      << r.err;
}

}  // namespace alps::test
