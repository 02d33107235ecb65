#pragma once
// The weight files of a Hugging Face checkpoint directory: model.safetensors, or the shards that
// model.safetensors.index.json names. CausalLM keeps what read_weights returns and saves through write_weights;
// what the tensors mean (names, shapes per architecture) is its business, not this file's.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "alps/io/safetensors.h"

namespace alps::model {

/// A tensor of the weight files that alps holds as several: transformers 5's fused experts (fused_experts.h), one
/// [experts, rows, cols] tensor held as one 2D tensor per expert and projection, written back fused.
struct FusedTensor {
  std::string name;                ///< in the file: "model.layers.3.mlp.experts.gate_up_proj"
  std::string experts;             ///< the held tensors' prefix: "model.layers.3.mlp.experts."
  std::vector<std::string> parts;  ///< each expert's projections, stacked along the rows: {"gate_proj", "up_proj"}
};

/// Where a held tensor lies in its file when it is part of a fused one: rows [row, row + rows) of index `index`.
struct FileSlice {
  std::string tensor;  ///< the fused tensor's name in the file
  int64_t index = 0, row = 0, rows = 0;
  /// This slice of the fused tensor.
  at::Tensor of(const at::Tensor& fused) const { return fused.select(0, index).narrow(0, row, rows); }
};

struct StoredWeights {
  std::vector<std::string> file_names;          // the weight files, relative to the directory
  std::vector<io::SafetensorsFile> files;       // open (memory-mapped), in file_names order
  std::map<std::string, at::Tensor> host;       // checkpoint dtype, CPU (mapping views until replaced)
  std::map<std::string, std::string> file_of;   // tensor -> file name inside the directory
  std::vector<std::string> order;               // input order: file by file, data-offset order
  std::map<std::string, std::string> metadata;  // __metadata__ of the first file
  std::map<std::string, std::string> renamed;   // tensor -> its name in its file, where the two differ
  std::vector<FusedTensor> fused;               // the file's fused tensors, in file order
  std::map<std::string, FileSlice> sliced;      // tensor -> its place in a fused tensor of its file

  /// The tensor `from` is called `to` from now on (its file still calls it `from`), in `from`'s place in the order;
  /// `to` must be free.
  void rename(const std::string& from, const std::string& to);
  /// The tensor is no longer part of the checkpoint.
  void erase(const std::string& name);
  /// The tensor's name in its file.
  const std::string& name_in_file(const std::string& name) const;
  /// The tensor as its file holds it (a view of the mapped file), whatever replaced it since.
  at::Tensor file_tensor(const std::string& name) const;
};

/// Opens the weight files of `dir`. Errors name the file and the tensor: a shard outside the directory, a tensor
/// in two files or where the index does not place it, an indexed tensor that is missing.
StoredWeights read_weights(const std::filesystem::path& dir);

/// Writes `w` into the existing directory `dir` (in input order, split into model-0000i-of-0000n.safetensors
/// shards plus an index above `max_shard_bytes`) with the files of `source` that are not weights (config,
/// generation config, tokenizer); `config_fields` are merged into config.json (a structured run's smaller sizes; a
/// nested object such as text_config merged key by key), its other fields kept in their order. Returns the names of
/// the files written.
std::vector<std::string> write_weights(const std::filesystem::path& source, const std::filesystem::path& dir,
                                       const StoredWeights& w, int64_t max_shard_bytes,
                                       const nlohmann::json& config_fields = nlohmann::json::object());

}  // namespace alps::model
