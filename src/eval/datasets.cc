#include "alps/eval/datasets.h"

#include <zlib.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "alps/core/error.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::eval {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_jsonl_name(const std::string& name) {
  for (const char* ext : {".jsonl", ".json", ".jsonl.gz", ".json.gz"})
    if (ends_with(name, ext)) return true;
  return false;
}

// zlib reads gzip and plain files alike, so .json and .json.gz share one path.
class LineReader {
 public:
  explicit LineReader(const fs::path& path) : path_(path), file_(gzopen(path.c_str(), "rb"), &gzclose) {
    ALPS_CHECK(file_ != nullptr, "cannot open dataset file ", path.string());
  }
  bool next(std::string& line) {
    line.clear();
    char buf[1 << 16];
    while (gzgets(file_.get(), buf, sizeof buf) != nullptr) {
      line += buf;
      if (!line.empty() && line.back() == '\n') {
        line.pop_back();
        return true;
      }
    }
    int err = 0;
    const char* msg = gzerror(file_.get(), &err);
    ALPS_CHECK(err == Z_OK || err == Z_STREAM_END, "reading ", path_.string(), ": ", msg);
    return !line.empty();
  }

 private:
  fs::path path_;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file_;
};

// The "text" fields of the first `limit` documents (limit < 0: all), joined with " ".
std::string join_jsonl(const fs::path& path, int64_t limit) {
  LineReader reader(path);
  std::string line, out;
  int64_t docs = 0, line_no = 0;
  while ((limit < 0 || docs < limit) && reader.next(line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      ALPS_FAIL(path.string(), " line ", line_no, ": invalid JSON: ", e.what());
    }
    ALPS_CHECK(doc.is_object() && doc.contains("text") && doc["text"].is_string(), path.string(), " line ", line_no,
               ": expected an object with a string field \"text\"");
    if (docs++ > 0) out += ' ';
    out += doc["text"].get<std::string>();
  }
  return out;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  ALPS_CHECK(in.good(), "cannot open dataset file ", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path require_file(const fs::path& path, const std::string& what) {
  ALPS_CHECK(fs::is_regular_file(path), what, ": expected file ", path.string(), " does not exist");
  return path;
}

}  // namespace

Dataset resolve_dataset(const std::string& spec, const fs::path& data_dir) {
  ALPS_CHECK(!spec.empty(), "empty dataset name");
  const fs::path text = data_dir / "text";
  if (spec == "wikitext2")
    return {spec, require_file(text / "wikitext2" / "wikitext-2-raw-v1.test.hf_joined.txt", "dataset wikitext2"),
            DatasetKind::kText};
  if (spec == "ptb") return {spec, require_file(text / "ptb" / "ptb.test.txt", "dataset ptb"), DatasetKind::kJoinedLines};
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
  ALPS_CHECK(fs::is_regular_file(path), "unknown dataset '", spec,
             "': not one of wikitext2, ptb, c4, tinystories, and no such file");
  return {spec, path, is_jsonl_name(path.filename().string()) ? DatasetKind::kJsonl : DatasetKind::kText};
}

std::string load_dataset_text(const Dataset& d) {
  std::string text;
  switch (d.kind) {
    case DatasetKind::kText:
      text = read_file(d.path);
      break;
    case DatasetKind::kJoinedLines: {
      std::istringstream in(read_file(d.path));
      std::string line;
      for (bool first = true; std::getline(in, line); first = false) {
        const size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
        if (!first) text += ' ';
        if (b != std::string::npos) text += line.substr(b, e - b + 1);
      }
      break;
    }
    case DatasetKind::kJsonl:
      text = join_jsonl(d.path, -1);
      break;
    case DatasetKind::kC4:
      text = join_jsonl(d.path, kC4Documents);
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
