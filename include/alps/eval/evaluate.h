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

/// A dataset's text as token ids (docs/pipeline.md).
struct TokenizedDataset {
  Dataset dataset;
  std::vector<int64_t> ids;
};

/// Tokenises every dataset, failing (naming its file) where one is shorter than a window of `seqlen`.
std::vector<TokenizedDataset> tokenize_datasets(const std::vector<Dataset>& datasets,
                                                const tokenizer::Tokenizer& tokenizer, int64_t seqlen);

/// The perplexity of each tokenised dataset with `model` as it is placed.
std::vector<DatasetResult> evaluate(const model::CausalLM& model, const std::vector<TokenizedDataset>& datasets,
                                    const PerplexityOptions& options);

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
/// Adds `d` to the plan's datasets unless it is there already: a dataset named twice is evaluated once, as a task is.
void add_dataset(EvalPlan& plan, Dataset d);

/// Everything the evaluation reads, tokenised and built: every dataset and every task's requests.
struct PreparedEvaluation {
  std::vector<TokenizedDataset> datasets;
  std::vector<PreparedTask> tasks;
};
/// Reads and checks all of `plan` (a text shorter than a window, a bad task row: an error naming the file) before
/// any of it is scored. Work that comes before the evaluation (pruning) calls it first too, so that such a file stops
/// the run before that work, not after it.
PreparedEvaluation prepare_evaluation(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer,
                                      const EvalPlan& plan, int64_t seqlen, const ZeroShotOptions& zeroshot_options);

/// prepare_evaluation, then perplexity datasets and tasks; one JSON object each (to_json of DatasetResult, then of
/// TaskResult).
nlohmann::json run_evaluation(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer, const EvalPlan& plan,
                              const PerplexityOptions& perplexity_options, const ZeroShotOptions& zeroshot_options);

}  // namespace alps::eval
