#include "alps/io/text_files.h"

#include <zlib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/core/strings.h"

namespace alps::io {

namespace fs = std::filesystem;

namespace {

// zlib reads gzip and plain files alike, so every format shares one reader.
class GzReader {
 public:
  // The kind is checked before gzopen, which opens a directory and fails only at the first read with an errno
  // message that does not say what is wrong.
  explicit GzReader(const fs::path& path) : path_(path), file_(open(path), &gzclose) {
    ALPS_CHECK(file_ != nullptr, "cannot open ", path.string());
  }
  /// Next line without its '\n'; false at the end of the file.
  bool line(std::string& out) {
    out.clear();
    char buf[1 << 16];
    while (gzgets(file_.get(), buf, sizeof buf) != nullptr) {
      out += buf;
      if (!out.empty() && out.back() == '\n') {
        out.pop_back();
        return true;
      }
    }
    check();
    return !out.empty();
  }
  std::string rest() {
    std::string out;
    char buf[1 << 16];
    int n = 0;
    while ((n = gzread(file_.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    check();
    return out;
  }

 private:
  void check() {
    int err = Z_OK;
    const char* msg = gzerror(file_.get(), &err);
    ALPS_CHECK(err == Z_OK || err == Z_STREAM_END, path_.string(), ": read error (", msg != nullptr ? msg : "", ")");
  }
  static gzFile open(const fs::path& path) {
    require_regular_file(path);
    return gzopen(path.c_str(), "rb");
  }
  fs::path path_;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file_;
};

std::string text_of(const nlohmann::json& record, const fs::path& path, int64_t number) {
  ALPS_CHECK(record.is_object() && record.contains("text") && record["text"].is_string(), path.string(), ": record ",
             number, " has no string field \"text\"");
  return record["text"].get<std::string>();
}

}  // namespace

std::string read_text_file(const fs::path& path) { return GzReader(path).rest(); }

nlohmann::json read_json_file(const fs::path& path, JsonDialect dialect) {
  const std::string text = read_text_file(path);
  const bool recipe = dialect == JsonDialect::kRecipe;
  // The keys seen in each object being parsed, innermost last.
  std::vector<std::set<std::string>> open_objects;
  const nlohmann::json::parser_callback_t unique_keys = [&](int, nlohmann::json::parse_event_t event,
                                                            nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end) open_objects.pop_back();
    if (event == Event::key)
      ALPS_CHECK(open_objects.back().insert(parsed.get<std::string>()).second, path.string(), ": key '",
                 parsed.get<std::string>(), "' appears twice in one object (the second would silently replace the "
                 "first); keep one");
    return true;
  };
  try {
    return nlohmann::json::parse(text, recipe ? unique_keys : nullptr, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/recipe);
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number too large for a double ("1e400") is an out_of_range error.
    ALPS_FAIL(path.string(), ": not valid JSON (", e.what(), ")");
  }
}

bool is_json_records_name(const fs::path& path) {
  std::string name = path.filename().string();
  if (ends_with(name, ".gz")) name.resize(name.size() - 3);
  return ends_with(name, ".jsonl") || ends_with(name, ".json");
}

std::vector<std::string> read_text_records(const fs::path& path, int64_t limit) {
  GzReader reader(path);
  std::vector<std::string> out;
  std::string line;
  int64_t number = 0;
  while ((limit < 0 || static_cast<int64_t>(out.size()) < limit) && reader.line(line)) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    if (number == 0 && line[first] == '[') {  // a JSON array of records rather than JSON lines
      nlohmann::json array;
      try {
        array = nlohmann::json::parse(line + "\n" + reader.rest());
      } catch (const nlohmann::json::exception& e) {
        ALPS_FAIL(path.string(), ": invalid JSON (", e.what(), ")");
      }
      for (const auto& record : array) {
        if (limit >= 0 && static_cast<int64_t>(out.size()) >= limit) break;
        out.push_back(text_of(record, path, ++number));
      }
      break;
    }
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      ALPS_FAIL(path.string(), ": record ", number + 1, " is not valid JSON (", e.what(), ")");
    }
    out.push_back(text_of(record, path, ++number));
  }
  return out;
}

}  // namespace alps::io
