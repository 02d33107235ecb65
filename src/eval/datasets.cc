#include "alps/eval/datasets.h"

#include <sstream>

#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/io/text_files.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::eval {

namespace fs = std::filesystem;

namespace {

fs::path require_file(const fs::path& path, const std::string& what) {
  require_regular_file(path, what + ": file");
  return path;
}

}  // namespace

Dataset resolve_dataset(const std::string& spec, const fs::path& data_dir) {
  ALPS_CHECK(!spec.empty(), "empty dataset name");
  const fs::path text = data_dir / "text";
  if (spec == "wikitext2")
    return {spec, require_file(text / "wikitext2" / "wikitext-2-raw-v1.test.hf_joined.txt", "dataset wikitext2"),
            DatasetKind::kText};
  if (spec == "ptb")
    return {spec, require_file(text / "ptb" / "ptb.test.txt", "dataset ptb"), DatasetKind::kJoinedLines};
  if (spec == "tinystories")
    return {spec, require_file(text / "tinystories" / "tinystories.valid.txt", "dataset tinystories"),
            DatasetKind::kText};
  if (spec == "c4") {
    const fs::path base = text / "c4" / "c4-validation.00000-of-00008.json";
    for (const fs::path& p : {base, fs::path(base.string() + ".gz")})
      if (fs::is_regular_file(p)) return {spec, p, DatasetKind::kC4};
    ALPS_FAIL("dataset c4: the C4 validation shard is missing: expected ", base.string(), " or ", base.string(),
              ".gz (allenai/c4 en/c4-validation.00000-of-00008.json.gz); or pass c4=PATH to a jsonl file with the "
              "same documents");
  }
  if (spec.rfind("c4=", 0) == 0) return {"c4", require_file(spec.substr(3), "dataset c4"), DatasetKind::kC4};
  const fs::path path(spec);
  ALPS_CHECK(!fs::is_directory(path), "dataset ", spec, " is a directory, expected a file");
  ALPS_CHECK(fs::is_regular_file(path), "unknown dataset '", spec,
             "': not one of wikitext2, ptb, c4, tinystories, and no such file");
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
