#pragma once
// Calibration windows (docs/pipeline.md): `nsamples` windows of `seqlen` tokens drawn exactly like SparseGPT's get_c4:
// pick a random document whose tokenisation is longer than the window, then a random window inside it.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace alps::tokenizer {
class Tokenizer;
}

namespace alps::pipeline {

struct CalibrationOptions {
  std::string source = "c4";  ///< "c4" (the first C4 train shard under the data dir) or a path
  int64_t nsamples = 128;
  int64_t seqlen = 2048;
  uint64_t seed = 0;
};

/// Documents of a calibration source: JSON lines / a JSON array of objects with a "text" field (optionally
/// gzipped, .gz), or a plain text file, which is one document (as SparseGPT treats WikiText-2).
std::vector<std::string> read_documents(const std::filesystem::path& path);

/// "c4" -> <data_dir>/text/c4/c4-train.00000-of-01024.json(.gz) or the first-1000-docs jsonl shipped here;
/// anything else is taken as a path. Missing files are errors naming every place looked at.
std::filesystem::path resolve_calibration_source(const std::string& source, const std::filesystem::path& data_dir);

/// [nsamples, seqlen] int64 token ids. Throws when no document is longer than seqlen tokens.
at::Tensor sample_windows(const std::vector<std::string>& documents, const tokenizer::Tokenizer& tokenizer,
                          const CalibrationOptions& options);

}  // namespace alps::pipeline
