#pragma once
// What the end-to-end `alps prune` tests (tests/pipeline/prune_*_test.cc) share: the real stories260K checkpoint with
// TinyStories calibration text, and the command line around a test's own flags.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace alps::test_prune {

// The committed stories260K checkpoint (models/stories260K-hf of the committed data).
std::filesystem::path model_dir();

// The committed TinyStories calibration text.
std::string calib();

// A copy under `dir` of the model fixture `fixture` (tests/data/model) with stories260K's tokenizer files beside it:
// the fixtures of vocabulary 512 were sized for it.
std::filesystem::path fixture_with_tokenizer(const std::string& fixture, const std::filesystem::path& dir);

// `alps prune` of model_dir() into `out`, calibrated on 8 windows of 128 tokens of calib(), on the CPU, with the
// report as JSON on stdout; `extra` follows. Tests edit the result by position: [2] is --model's, [6] is --calib's.
std::vector<std::string> prune_args(const std::filesystem::path& out, std::vector<std::string> extra);

// The run of `args` stopped after 2 blocks in dir/resumed and resumed there gives dir/whole's checkpoint, byte for
// byte (checked); returns the resumed run's report.
nlohmann::json stopped_and_resumed(const std::filesystem::path& dir, const std::vector<std::string>& args);

// The mean over the layers of two reports of one job (in layer order) of |e - e_ref| / e_ref for their errors e.
double mean_relative_difference(const nlohmann::json& report, const nlohmann::json& ref);

}  // namespace alps::test_prune
