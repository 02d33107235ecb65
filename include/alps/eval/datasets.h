#pragma once
// Evaluation datasets by name or path (docs/pipeline.md). Names resolve under the data directory (--data-dir, else
// $ALPS_DATA_DIR, else the directory alps was built or installed with: alps::data_dir):
//   wikitext2    text/wikitext2/wikitext-2-raw-v1.test.hf_joined.txt (the HF test rows joined with "\n\n")
//   ptb          text/ptb/ptb.test.txt, lines stripped and joined with " " (HF ptb_text_only + " ".join)
//   c4           text/c4/c4-validation.00000-of-00008.json[.gz]: the first 1100 documents joined with " ", then the
//                first 256 * seqlen tokens; "c4=PATH" applies the same protocol to any jsonl file
//   tinystories  text/tinystories/tinystories.valid.txt
//   PATH         a .txt file as is, or a .jsonl / .json (optionally .gz) file: every "text" field joined with " "
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace alps::tokenizer {
class Tokenizer;
}

namespace alps::eval {

enum class DatasetKind { kText, kJoinedLines, kJsonl, kC4 };

struct Dataset {
  std::string name;  ///< as the user wrote it (reports)
  std::filesystem::path path;
  DatasetKind kind = DatasetKind::kText;
};

/// The dataset names resolve_dataset knows.
std::vector<std::string> dataset_names();
/// Names the file a dataset spec refers to; a missing file is an error naming the path that was expected (and the
/// data directory it was looked for in); a spec that is neither a name nor a file is a usage error.
Dataset resolve_dataset(const std::string& spec, const std::filesystem::path& data_dir);
/// The evaluation text (empty text is an error).
std::string load_dataset_text(const Dataset& dataset);
/// Tokenised once with the tokenizer's special-token rule (BOS as it adds it), C4 cut to 256 * seqlen tokens.
std::vector<int64_t> dataset_tokens(const Dataset& dataset, const tokenizer::Tokenizer& tokenizer, int64_t seqlen);

/// C4 protocol sizes (SparseGPT's get_c4 validation set).
constexpr int64_t kC4Documents = 1100;
constexpr int64_t kC4Windows = 256;

}  // namespace alps::eval
