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

struct StoredWeights {
  std::vector<std::string> file_names;          // the weight files, relative to the directory
  std::vector<io::SafetensorsFile> files;       // open (memory-mapped), in file_names order
  std::map<std::string, at::Tensor> host;       // checkpoint dtype, CPU (mapping views until replaced)
  std::map<std::string, std::string> file_of;   // tensor -> file name inside the directory
  std::vector<std::string> order;               // input order: file by file, data-offset order
  std::map<std::string, std::string> metadata;  // __metadata__ of the first file
  std::map<std::string, std::string> renamed;   // tensor -> its name in its file, where the two differ

  /// The tensor `from` is called `to` from now on (its file still calls it `from`), in `from`'s place in the order;
  /// `to` must be free.
  void rename(const std::string& from, const std::string& to);
  /// The tensor is no longer part of the checkpoint.
  void erase(const std::string& name);
  /// The tensor's name in its file.
  const std::string& name_in_file(const std::string& name) const;
};

/// Opens the weight files of `dir`. Errors name the file and the tensor: a shard outside the directory, a tensor
/// in two files or where the index does not place it, an indexed tensor that is missing.
StoredWeights read_weights(const std::filesystem::path& dir);

/// Writes `w` into the existing directory `dir` (in input order, split into model-0000i-of-0000n.safetensors
/// shards plus an index above `max_shard_bytes`) with the files of `source` that are not weights (config,
/// generation config, tokenizer); `config_fields` replace those of config.json (a structured run's smaller sizes),
/// its other fields kept in their order. Returns the names of the files written.
std::vector<std::string> write_weights(const std::filesystem::path& source, const std::filesystem::path& dir,
                                       const StoredWeights& w, int64_t max_shard_bytes,
                                       const nlohmann::json& config_fields = nlohmann::json::object());

}  // namespace alps::model
