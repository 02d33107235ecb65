#pragma once
#include <filesystem>
#include <string>

namespace alps {

/// The data directory (models/, text/, tokenizers/): `flag` when given, else $ALPS_DATA_DIR, else ../shared/data
/// relative to the working directory (the repository root in this project's layout).
std::filesystem::path data_dir(const std::string& flag = "");

/// Throws alps::Error unless `path` (after symlinks) is a regular file: "<what> <path> does not exist" or
/// "<what> <path> is a directory, expected a file" (or "is not a regular file" for devices, sockets, ...).
/// `what` says what the file is for ("calibration file", "tokenizer file"); empty gives "file".
void require_regular_file(const std::filesystem::path& path, const std::string& what = "");

}  // namespace alps
