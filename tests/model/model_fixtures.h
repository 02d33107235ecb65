#pragma once
// Helpers of the model tests: the committed fixtures under tests/data/model and writable copies of them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "alps/core/error.h"
#include "alps/io/safetensors.h"
#include "alps/model/causal_lm.h"
#include "support.h"

namespace alps::model {

namespace fs = std::filesystem;

inline fs::path fixture(const std::string& name) { return test::source_dir() / "tests" / "data" / "model" / name; }

/// Every fixture that has golden logits (scripts/make_model_fixtures.py writes NAME/ and NAME.golden.safetensors),
/// sorted: a fixture added there is tested without a list to extend.
inline std::vector<std::string> golden_fixtures() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(fixture(""))) {
    const std::string file = e.path().filename().string(), suffix = ".golden.safetensors";
    if (file.size() > suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        fs::is_directory(fixture(file.substr(0, file.size() - suffix.size()))))
      names.push_back(file.substr(0, file.size() - suffix.size()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A writable copy of a fixture under a fresh name in `tmp`.
inline fs::path copy_fixture(const std::string& name, const test::TempDir& tmp) {
  static int counter = 0;
  const fs::path dir = tmp / (name + "-" + std::to_string(counter++));
  fs::copy(fixture(name), dir, fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(dir))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  return dir;
}

// Rewrites dir/model.safetensors with `edit` applied to its tensor list.
template <typename Edit>
inline void rewrite_weights(const fs::path& dir, Edit edit) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  {
    io::SafetensorsFile f(dir / "model.safetensors");
    for (const auto& e : f.entries()) tensors.emplace_back(e.name, f.tensor(e.name).clone());
  }
  edit(tensors);
  io::save_safetensors(dir / "model.safetensors", tensors, {}, io::ExistingFile::kReplace);
}

inline void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j;
  std::ifstream(dir / "config.json") >> j;
  edit(j);
  std::ofstream(dir / "config.json") << j.dump(2);
}

// A fixture, its config.json edited, and a phrase the refusal to load it must contain.
using ConfigCase = std::tuple<const char*, std::function<void(nlohmann::json&)>, std::string>;

// Each case must fail to load with a message that names its config.json and contains the phrase.
inline void expect_config_refusals(const std::vector<ConfigCase>& cases, const test::TempDir& tmp) {
  for (const auto& [fixture_name, edit, expected] : cases) {
    const fs::path dir = copy_fixture(fixture_name, tmp);
    edit_config(dir, edit);
    const std::string msg = test::error_message([&] { CausalLM::load(dir); });
    EXPECT_NE(msg.find((dir / "config.json").string() + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find(expected), std::string::npos) << expected << " | " << msg;
  }
}

}  // namespace alps::model
