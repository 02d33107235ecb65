#include "alps/eval/datasets.h"

#include <sstream>

#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/core/suggest.h"
#include "alps/io/text_files.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::eval {

namespace fs = std::filesystem;

namespace {

// The named datasets, where they lie under the data directory's text/, and how their text is read. C4's validation
// shard is found as .json or .json.gz.
struct NamedDataset {
  const char* name;
  const char* file;
  DatasetKind kind;
};
constexpr NamedDataset kNamed[] = {
    {"wikitext2", "wikitext2/wikitext-2-raw-v1.test.hf_joined.txt", DatasetKind::kText},
    {"ptb", "ptb/ptb.test.txt", DatasetKind::kJoinedLines},
    {"c4", "c4/c4-validation.00000-of-00008.json", DatasetKind::kC4},
    {"tinystories", "tinystories/tinystories.valid.txt", DatasetKind::kText},
};

}  // namespace

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const NamedDataset& d : kNamed) names.emplace_back(d.name);
  return names;
}

Dataset resolve_dataset(const std::string& spec, const fs::path& data_dir) {
  ALPS_USAGE_CHECK(!spec.empty(), "empty dataset name");
  for (const NamedDataset& d : kNamed) {
    if (spec != d.name) continue;
    const fs::path path = data_dir / "text" / d.file;
    if (d.kind == DatasetKind::kC4) {
      for (const fs::path& p : {path, fs::path(path.string() + ".gz")})
        if (fs::is_regular_file(p)) return {spec, p, d.kind};
      ALPS_FAIL("dataset c4: the C4 validation shard is missing: expected ", path.string(), " or ", path.string(),
                ".gz (allenai/c4 en/c4-validation.00000-of-00008.json.gz); or pass c4=PATH to a jsonl file with the "
                "same documents", data_dir_hint(data_dir));
    }
    ALPS_CHECK(fs::exists(path), "dataset ", spec, ": file ", path.string(), " does not exist",
               data_dir_hint(data_dir));
    require_regular_file(path, "dataset " + spec + ": file");
    return {spec, path, d.kind};
  }
  if (spec.rfind("c4=", 0) == 0) {
    require_regular_file(spec.substr(3), "dataset c4: file");
    return {"c4", spec.substr(3), DatasetKind::kC4};
  }
  const fs::path path(spec);
  ALPS_CHECK(!fs::is_directory(path), "dataset ", spec, " is a directory, expected a file");
  ALPS_USAGE_CHECK(fs::is_regular_file(path), "unknown dataset '", spec, "': not one of ", join_names(dataset_names()),
                   ", and no such file", did_you_mean(spec, dataset_names()));
  return {spec, path, io::is_json_records_name(path) ? DatasetKind::kJsonl : DatasetKind::kText};
}

std::string load_dataset_text(const Dataset& d) {
  std::string text;
  switch (d.kind) {
    case DatasetKind::kText:
      text = io::read_text_file(d.path);
      break;
    case DatasetKind::kJoinedLines: {
      std::istringstream in(io::read_text_file(d.path));
      std::string line;
      for (bool first = true; std::getline(in, line); first = false) {
        const size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
        if (!first) text += ' ';
        if (b != std::string::npos) text += line.substr(b, e - b + 1);
      }
      break;
    }
    case DatasetKind::kJsonl:
    case DatasetKind::kC4:
      // Documents joined with " " (SparseGPT's C4 protocol, applied to any JSON records file).
      for (const std::string& doc : io::read_text_records(d.path, d.kind == DatasetKind::kC4 ? kC4Documents : -1)) {
        if (!text.empty()) text += ' ';
        text += doc;
      }
      break;
  }
  ALPS_CHECK(text.find_first_not_of(" \t\r\n") != std::string::npos, "dataset ", d.name, " (", d.path.string(),
             ") is empty");
  return text;
}

std::vector<int64_t> dataset_tokens(const Dataset& d, const tokenizer::Tokenizer& tokenizer, int64_t seqlen) {
  std::vector<int64_t> ids = tokenizer.encode(load_dataset_text(d), true);
  if (d.kind == DatasetKind::kC4 && static_cast<int64_t>(ids.size()) > kC4Windows * seqlen)
    ids.resize(kC4Windows * seqlen);
  return ids;
}

}  // namespace alps::eval
