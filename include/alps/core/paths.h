#pragma once
#include <filesystem>
#include <string>

namespace alps {

/// The data directory (models/, text/, tokenizers/, eval/) and where that choice came from.
struct DataDir {
  std::filesystem::path path;
  std::string origin;  ///< "--data-dir", "$ALPS_DATA_DIR", "installed with alps" or "fixed when alps was built"
};

/// `flag` when given, else $ALPS_DATA_DIR, else <prefix>/share/alps/data beside an installed alps (bin/alps), else
/// the directory fixed when alps was built (the optional full data directory when it was configured and present,
/// else the data the repository ships). Never a path relative to the working directory.
DataDir find_data_dir(const std::string& flag = "");
/// find_data_dir(flag).path.
std::filesystem::path data_dir(const std::string& flag = "");
/// What to append to an error about a file missing from the data directory `dir`: which directory was searched and
/// how to name another.
std::string data_dir_hint(const std::filesystem::path& dir);

/// What --model names: a directory, else a model of the data directory (`data_dir`/models/NAME, such as the
/// stories260K-hf it ships); neither is an error naming both places, with the closest model's name.
std::filesystem::path resolve_model_dir(const std::string& model, const std::filesystem::path& data_dir);

/// Where alps and its scripts keep what they can rebuild (fetched models, evaluations of unpruned models):
/// $ALPS_CACHE_DIR, else $XDG_CACHE_HOME/alps, else $HOME/.cache/alps; empty when none of them is set.
std::filesystem::path cache_dir();

/// The directory of the running executable (empty if it cannot be read).
std::filesystem::path executable_dir();

/// Throws alps::Error unless `path` (after symlinks) is a regular file: "<what> <path> does not exist" or
/// "<what> <path> is a directory, expected a file" (or "is not a regular file" for devices, sockets, ...).
/// `what` says what the file is for ("calibration file", "tokenizer file"); empty gives "file".
void require_regular_file(const std::filesystem::path& path, const std::string& what = "");

}  // namespace alps
