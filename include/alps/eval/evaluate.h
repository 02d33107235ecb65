#pragma once
// Perplexity of one model on several datasets, and zero-shot tasks, as `alps eval` reports them and
// `alps prune --eval` records them.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "alps/eval/datasets.h"
#include "alps/eval/perplexity.h"
#include "alps/eval/zeroshot.h"

namespace alps::model {
class CausalLM;
}
namespace alps::tokenizer {
class Tokenizer;
}

namespace alps::eval {

struct DatasetResult {
  Dataset dataset;
  int64_t seqlen = 0;
  int64_t dataset_tokens = 0;  ///< tokens in the tokenised text (before windowing)
  PerplexityResult result;
};

/// Tokenises each dataset (docs/pipeline.md) and computes its perplexity with `model` as it is placed.
std::vector<DatasetResult> evaluate(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer,
                                    const std::vector<Dataset>& datasets, const PerplexityOptions& options);

/// {"dataset", "path", "seqlen", "windows", "tokens", "dataset_tokens", "nll", "perplexity", "seconds",
///  "tokens_per_second"}
nlohmann::json to_json(const DatasetResult& r);

/// One evaluation list split by kind: zero-shot task names (and "all") become tasks with their default files under
/// `data_dir`/eval, everything else a perplexity dataset. Resolving checks every file, before any work.
struct EvalPlan {
  std::vector<Dataset> datasets;
  std::vector<TaskInput> tasks;
};
EvalPlan plan_evaluation(const std::vector<std::string>& specs, const std::filesystem::path& data_dir);

/// Tokenises every dataset of `plan` and fails, naming its file, where one is shorter than a window of `seqlen`:
/// for work that comes before the evaluation (pruning), so that such a text stops the run before it, not after.
void check_dataset_lengths(const EvalPlan& plan, const tokenizer::Tokenizer& tokenizer, int64_t seqlen);

/// Perplexity datasets then tasks; one JSON object each (to_json of DatasetResult, then of TaskResult).
nlohmann::json run_evaluation(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer, const EvalPlan& plan,
                              const PerplexityOptions& perplexity_options, const ZeroShotOptions& zeroshot_options);

}  // namespace alps::eval
