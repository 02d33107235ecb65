#pragma once
// The tensor names a checkpoint directory holds, read from its files as any loader reads them: the shards its
// model.safetensors.index.json names, else model.safetensors.
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "alps/io/safetensors.h"
#include "alps/io/text_files.h"

namespace alps::test {

inline std::vector<std::string> checkpoint_tensor_names(const std::filesystem::path& dir) {
  std::set<std::string> files;
  if (std::filesystem::exists(dir / "model.safetensors.index.json")) {
    const nlohmann::json index = io::read_json_file(dir / "model.safetensors.index.json");
    for (const auto& [name, file] : index.at("weight_map").items()) files.insert(file.get<std::string>());
  } else {
    files.insert("model.safetensors");
  }
  std::vector<std::string> names;
  for (const auto& f : files) {
    const io::SafetensorsFile file(dir / f);
    for (const auto& e : file.entries()) names.push_back(e.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace alps::test
