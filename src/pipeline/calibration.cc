#include "alps/pipeline/calibration.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <unordered_map>

#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/core/py_random.h"
#include "alps/core/suggest.h"
#include "alps/io/text_files.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::pipeline {

namespace fs = std::filesystem;

std::vector<std::string> read_documents(const fs::path& path) {
  require_regular_file(path, "calibration file");
  std::vector<std::string> docs =
      io::is_json_records_name(path) ? io::read_text_records(path) : std::vector<std::string>{io::read_text_file(path)};
  size_t chars = 0;
  for (const auto& d : docs) chars += d.size();
  ALPS_CHECK(chars > 0, "calibration file ", path.string(), " holds no text");
  return docs;
}

fs::path resolve_calibration_source(const std::string& source, const fs::path& data_dir) {
  if (source != "c4") {
    // A bare word that names no file was meant as a dataset name: a usage error, with the closest name.
    const bool a_name = source.find_first_of("/.") == std::string::npos && !fs::exists(source);
    ALPS_USAGE_CHECK(!a_name, "--calib ", source, ": neither a calibration dataset (c4) nor a file",
                     did_you_mean(source, {"c4"}));
    require_regular_file(source, "calibration file");
    return source;
  }
  // The full shard SparseGPT reads, then the 1000-document prefix of it that ships with this project's data.
  const fs::path dir = data_dir / "text" / "c4";
  const fs::path candidates[] = {dir / "c4-train.00000-of-01024.json.gz", dir / "c4-train.00000-of-01024.json",
                                 dir / "c4-train.00000-of-01024.first1000.jsonl"};
  std::string looked;
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c)) return c;
    looked += " " + c.string();
  }
  ALPS_FAIL("calibration source c4: none of these files exists:", looked, data_dir_hint(data_dir),
            "; or pass --calib FILE");
}

at::Tensor sample_windows(const std::vector<std::string>& documents, const tokenizer::Tokenizer& tokenizer,
                          const CalibrationOptions& options) {
  ALPS_CHECK(options.nsamples > 0 && options.seqlen > 1, "calibration needs nsamples > 0 and seqlen > 1, got ",
             options.nsamples, " and ", options.seqlen);
  ALPS_CHECK(!documents.empty(), "calibration source ", options.source, " has no documents");
  // "The reference" in this file: get_c4 / get_wikitext2 / get_ptb in datautils.py of IST-DASLab/sparsegpt at commit
  // 147d215 (mazumder-lab/ALPS at commit 8af9e6b samples the same way).
  // Tokenise lazily, once per document: the reference re-tokenises on every draw, which gives the same ids.
  std::unordered_map<int64_t, std::vector<int64_t>> cache;
  auto ids_of = [&](int64_t doc) -> const std::vector<int64_t>& {
    auto it = cache.find(doc);
    if (it == cache.end()) {
      std::vector<int64_t> ids;
      try {
        ids = tokenizer.encode(documents[doc], true);
      } catch (const Error& e) {  // the tokenizer's own errors (invalid UTF-8 at byte N) do not know the file
        const std::string which = documents.size() > 1 ? fmt::format(" document {}", doc) : "";
        ALPS_FAIL("calibration source ", options.source, which, ": ", e.what());
      }
      it = cache.emplace(doc, std::move(ids)).first;
    }
    return it->second;
  };
  // The reference loops forever when no document is long enough; fail up front instead.
  bool any_long = false;
  for (int64_t d = 0; d < static_cast<int64_t>(documents.size()) && !any_long; ++d)
    any_long = static_cast<int64_t>(ids_of(d).size()) > options.seqlen;
  ALPS_CHECK(any_long, "calibration source ", options.source, ": no document is longer than seqlen = ", options.seqlen,
             " tokens; use a shorter --seqlen or a larger calibration text");

  PyRandom rng(options.seed);
  at::Tensor windows = at::empty({options.nsamples, options.seqlen}, at::kLong);
  auto* out = windows.data_ptr<int64_t>();
  const auto n_docs = static_cast<int64_t>(documents.size());
  for (int64_t s = 0; s < options.nsamples; ++s) {
    // One document (a plain text file) is sampled like the reference WikiText-2/PTB loaders, which draw only the
    // window start; drawing a document index first would consume random numbers and shift every window.
    const std::vector<int64_t>* ids = &ids_of(0);
    if (n_docs > 1) {
      do {
        ids = &ids_of(rng.randint(0, n_docs - 1));
      } while (static_cast<int64_t>(ids->size()) <= options.seqlen);
    }
    const int64_t start = rng.randint(0, static_cast<int64_t>(ids->size()) - options.seqlen - 1);
    std::copy(ids->begin() + start, ids->begin() + start + options.seqlen, out + s * options.seqlen);
  }
  return windows;
}

}  // namespace alps::pipeline
