#pragma once
// safetensors (https://github.com/huggingface/safetensors) reader and writer. Format: u64 little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}},
// then the data section; offsets are relative to the data section.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "alps/io/staged_path.h"

namespace alps::io {

/// One tensor's header entry.
struct TensorEntry {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  ///< byte offset in the data section
  uint64_t end = 0;
  int64_t numel() const;
};

/// "F32" <-> kFloat etc.; unknown names or types are errors.
c10::ScalarType dtype_from_safetensors(const std::string& name);
std::string dtype_to_safetensors(c10::ScalarType t);

/// A memory-mapped, validated safetensors file. Tensors are served as views of the mapping (copy-on-write,
/// so callers may modify them without touching the file); the mapping lives as long as any view does.
class SafetensorsFile {
 public:
  /// Maps and validates `path`; every problem is reported as alps::Error naming the file.
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;

  const std::filesystem::path& path() const { return path_; }
  /// Entries in data-offset order.
  const std::vector<TensorEntry>& entries() const { return entries_; }
  bool contains(const std::string& name) const;
  /// Throws "tensor 'x' not found in FILE" when absent.
  const TensorEntry& entry(const std::string& name) const;
  /// CPU tensor of the stored dtype viewing the mapping (no copy).
  at::Tensor tensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Mapping;
  std::filesystem::path path_;
  std::shared_ptr<Mapping> mapping_;
  uint64_t data_start_ = 0;
  std::vector<TensorEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

/// Streams tensors into a safetensors file: the header (names, dtypes, shapes) is fixed up front and the tensors
/// are then written one at a time in that order, so a multi-GB checkpoint never has to sit in memory at once.
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorEntry> layout,
                    const std::map<std::string, std::string>& metadata = {});
  /// Writes the next tensor of the layout (checked against its entry); converted to CPU/contiguous as needed.
  void write(const std::string& name, const at::Tensor& tensor);
  /// Checks every tensor was written and flushes; the file is complete only after this.
  void finish();

 private:
  std::filesystem::path path_;
  std::vector<TensorEntry> layout_;
  size_t next_ = 0;
  std::ofstream out_;
};

/// Writes `tensors` (in the given order) to `path`, through a temporary name renamed when complete.
void save_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {},
                      ExistingFile existing = ExistingFile::kKeep);

/// Header entry (dtype and shape) describing `t`, offsets left to the writer.
TensorEntry entry_for(const std::string& name, const at::Tensor& t);

}  // namespace alps::io
