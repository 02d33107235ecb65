#include "alps/pipeline/dense_evaluation.h"

#include <spdlog/spdlog.h>

#include <fstream>

#include "alps/core/build_info.h"
#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/io/fingerprint.h"
#include "alps/io/staged_path.h"
#include "alps/io/text_files.h"
#include "alps/model/causal_lm.h"

namespace alps::pipeline {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Everything the results depend on. The device is not in it: it changes rounding only.
json cache_key(const fs::path& model_dir, const model::CausalLM& m, const eval::EvalPlan& plan,
               const eval::PerplexityOptions& perplexity, const eval::ZeroShotOptions& zeroshot) {
  json datasets = json::array(), tasks = json::array();
  for (const auto& d : plan.datasets) datasets.push_back({d.name, io::fingerprint_file(d.path)});
  for (const auto& t : plan.tasks) tasks.push_back({t.spec->name, io::fingerprint_file(t.file)});
  return {{"model", io::fingerprint_checkpoint_dir(model_dir)},
          {"datasets", datasets},
          {"tasks", tasks},
          {"seqlen", perplexity.seqlen},
          {"max_windows", perplexity.max_windows},
          {"limit", zeroshot.limit},
          {"dtype", dtype_name(m.compute_dtype())},
          {"alps", build_info().source_revision}};
}

}  // namespace

DenseEvaluation evaluate_dense(const fs::path& model_dir, model::CausalLM& m, const tokenizer::Tokenizer& tok,
                               const eval::EvalPlan& plan, const eval::PerplexityOptions& perplexity,
                               const eval::ZeroShotOptions& zeroshot) {
  DenseEvaluation out;
  const json key = cache_key(model_dir, m, plan, perplexity, zeroshot);
  if (const fs::path dir = cache_dir(); !dir.empty())
    out.cache_file = dir / "dense-eval" / (io::fingerprint_text(key.dump()) + ".json");
  if (!out.cache_file.empty() && fs::is_regular_file(out.cache_file)) {
    try {
      const json cached = io::read_json_file(out.cache_file);
      if (cached.at("key") == key) {
        out.results = cached.at("results");
        out.from_cache = true;
        spdlog::info("dense model's evaluation: from {}", out.cache_file.string());
        return out;
      }
    } catch (const std::exception& e) {
      spdlog::warn("ignoring the unreadable cached evaluation {} ({})", out.cache_file.string(), e.what());
    }
  }
  spdlog::info("evaluating the dense model (its results are kept in {} for later runs)",
               out.cache_file.empty() ? std::string("no cache directory") : out.cache_file.string());
  m.load_all();
  out.results = eval::run_evaluation(m, tok, plan, perplexity, zeroshot);
  m.unload_all();
  if (out.cache_file.empty()) return out;
  try {
    fs::create_directories(out.cache_file.parent_path());
    // The cache is alps's own: an entry written meanwhile by another run holds the same results.
    io::write_text_staged(out.cache_file, json{{"key", key}, {"results", out.results}}.dump(1) + "\n",
                          io::ExistingFile::kReplace);
  } catch (const std::exception& e) {
    spdlog::warn("the dense model's evaluation could not be cached in {} ({}); the run goes on",
                 out.cache_file.string(), e.what());
  }
  return out;
}

}  // namespace alps::pipeline
