#pragma once
#include <filesystem>
#include <string>

namespace alps {

/// The data directory (models/, text/, tokenizers/): `flag` when given, else $ALPS_DATA_DIR, else ../shared/data
/// relative to the working directory (the repository root in this project's layout).
std::filesystem::path data_dir(const std::string& flag = "");

}  // namespace alps
