// Replays the committed fuzz inputs through the same entry points as the libFuzzer harnesses, under the ordinary
// build: tests/fuzz/corpus/<target>/ (seeds) and tests/fuzz/regressions/<target>/ (inputs that once crashed).
// Every input must load or fail with alps::Error; a reproducer with a sibling NAME.expect must fail with a message
// containing that file's first line.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "fuzz_targets.h"
#include "support.h"

namespace alps::fuzz {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> inputs(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() != ".expect") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The outcome of one input, with anything but alps::Error turned into a test failure naming the file.
std::optional<std::string> replay(const Target& target, const fs::path& file, bool* escaped) {
  const std::string bytes = slurp(file);
  *escaped = false;
  try {
    return run(target, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  } catch (const std::exception& e) {
    ADD_FAILURE() << file.string() << ": escaped as " << typeid(e).name() << ": " << e.what();
  } catch (...) {
    ADD_FAILURE() << file.string() << ": escaped as a non-std exception";
  }
  *escaped = true;
  return std::nullopt;
}

class FuzzCorpus : public ::testing::TestWithParam<std::string> {
 protected:
  const Target& target_ = fuzz::target(GetParam());
  const fs::path root_ = test::source_dir() / "tests" / "fuzz";
};

// The seeds include valid files: a target whose seeds all fail would leave the fuzzer outside the loader.
TEST_P(FuzzCorpus, SeedsLoadOrFailWithAlpsError) {
  const auto files = inputs(root_ / "corpus" / GetParam());
  ASSERT_FALSE(files.empty()) << "no seed corpus in " << (root_ / "corpus" / GetParam()).string();
  int loaded = 0;
  for (const fs::path& file : files) {
    bool escaped = false;
    if (!replay(target_, file, &escaped) && !escaped) ++loaded;
  }
  EXPECT_GT(loaded, 0) << "no seed of target " << GetParam() << " loads";
}

TEST_P(FuzzCorpus, RegressionsFailWithTheirMessage) {
  for (const fs::path& file : inputs(root_ / "regressions" / GetParam())) {
    bool escaped = false;
    const std::optional<std::string> error = replay(target_, file, &escaped);
    if (escaped) continue;
    fs::path expect = file;
    expect += ".expect";
    if (!fs::exists(expect)) continue;
    std::string wanted;
    std::getline(std::ifstream(expect), wanted);
    ASSERT_TRUE(error.has_value()) << file.string() << " loads, expected an error containing '" << wanted << "'";
    EXPECT_NE(error->find(wanted), std::string::npos) << file.string() << ": " << *error;
  }
}

std::vector<std::string> target_names() {
  std::vector<std::string> names;
  for (const Target& t : targets()) names.push_back(t.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzCorpus, ::testing::ValuesIn(target_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace alps::fuzz
