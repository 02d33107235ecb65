#pragma once
// Durable file-system steps for outputs that must survive a crash or a power loss: data reaches the disk before the
// rename that makes it visible, and the rename itself is made durable by syncing the directory that holds it.
#include <filesystem>

namespace alps::io {

/// fsync of one file or directory.
void sync_path(const std::filesystem::path& path);

/// fsync of every file below `dir`, then of every directory bottom-up, `dir` itself last.
void sync_tree(const std::filesystem::path& dir);

/// Atomically swaps two existing paths (renameat2 with RENAME_EXCHANGE). Returns false, changing nothing, where the
/// file system or kernel cannot exchange; throws alps::Error on any other failure.
bool exchange_paths(const std::filesystem::path& a, const std::filesystem::path& b);

/// rename(2) with an error naming both paths.
void rename_path(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace alps::io
