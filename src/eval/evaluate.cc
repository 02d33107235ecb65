#include "alps/eval/evaluate.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/core/suggest.h"
#include "alps/model/causal_lm.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::eval {

namespace {
std::vector<int64_t> tokens_of(const Dataset& d, const tokenizer::Tokenizer& tokenizer, int64_t seqlen) {
  const std::string file = d.path.string(), shown = d.name == file ? file : d.name + " (" + file + ")";
  std::vector<int64_t> ids;
  try {
    ids = dataset_tokens(d, tokenizer, seqlen);
  } catch (const Error& e) {  // the tokenizer's own errors (invalid UTF-8 at byte N) do not know the file
    ALPS_FAIL("dataset ", shown, ": ", e.what());
  }
  ALPS_CHECK(static_cast<int64_t>(ids.size()) >= seqlen, "dataset ", shown, ": ", ids.size(),
             " tokens are fewer than one window of ", seqlen, " (use a shorter window or a longer text)");
  return ids;
}
}  // namespace

std::vector<TokenizedDataset> tokenize_datasets(const std::vector<Dataset>& datasets,
                                                const tokenizer::Tokenizer& tokenizer, int64_t seqlen) {
  std::vector<TokenizedDataset> out;
  for (const Dataset& d : datasets) {
    out.push_back({d, tokens_of(d, tokenizer, seqlen)});
    spdlog::info("{}: {} tokens from {}", d.name, out.back().ids.size(), d.path.string());
  }
  return out;
}

std::vector<DatasetResult> evaluate(const model::CausalLM& model, const std::vector<TokenizedDataset>& datasets,
                                    const PerplexityOptions& options) {
  std::vector<DatasetResult> out;
  for (const auto& [d, ids] : datasets) {
    DatasetResult r{d, options.seqlen, static_cast<int64_t>(ids.size()), perplexity(model, ids, options)};
    spdlog::info("{}: ppl {:.4f} over {} windows of {} ({:.1f}s, {:.0f} tokens/s)", d.name, r.result.ppl,
                 r.result.windows, options.seqlen, r.result.seconds,
                 static_cast<double>(r.result.tokens) / std::max(r.result.seconds, 1e-9));
    out.push_back(std::move(r));
  }
  return out;
}

nlohmann::json to_json(const DatasetResult& r) {
  return {{"dataset", r.dataset.name},
          {"path", r.dataset.path.string()},
          {"seqlen", r.seqlen},
          {"windows", r.result.windows},
          {"tokens", r.result.tokens},
          {"dataset_tokens", r.dataset_tokens},
          {"nll", r.result.nll},
          {"window_nll", r.result.window_nll},
          {"perplexity", r.result.ppl},
          {"seconds", r.result.seconds},
          {"tokens_per_second", static_cast<double>(r.result.tokens) / std::max(r.result.seconds, 1e-9)}};
}

void add_dataset(EvalPlan& plan, Dataset d) {
  const bool again = std::any_of(plan.datasets.begin(), plan.datasets.end(),
                                 [&](const Dataset& e) { return e.name == d.name && e.path == d.path; });
  if (!again) plan.datasets.push_back(std::move(d));
}

EvalPlan plan_evaluation(const std::vector<std::string>& specs, const std::filesystem::path& data_dir) {
  EvalPlan plan;
  std::vector<std::string> tasks;
  for (const std::string& s : specs) {
    if (s == "all" || find_task(s) != nullptr)
      tasks.push_back(s);
    else
      try {
        add_dataset(plan, resolve_dataset(s, data_dir));
      } catch (const UsageError&) {
        // Neither a dataset's name, nor a file, nor a task: one error, with suggestions from both lists.
        std::vector<std::string> names = dataset_names();
        std::string datasets;
        for (const auto& n : names) datasets += n + ", ";
        for (const TaskSpec& t : task_registry()) names.push_back(t.name);
        ALPS_USAGE_FAIL("unknown dataset '", s, "': not one of ", datasets, "and no such file; nor a zero-shot task (",
                        task_names(), ")", did_you_mean(s, names));
      }
  }
  if (!tasks.empty()) plan.tasks = resolve_tasks(tasks, data_dir / "eval");
  return plan;
}

PreparedEvaluation prepare_evaluation(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer,
                                      const EvalPlan& plan, int64_t seqlen, const ZeroShotOptions& zeroshot_options) {
  return {tokenize_datasets(plan.datasets, tokenizer, seqlen),
          prepare_tasks(model, tokenizer, plan.tasks, zeroshot_options)};
}

nlohmann::json run_evaluation(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer, const EvalPlan& plan,
                              const PerplexityOptions& perplexity_options, const ZeroShotOptions& zeroshot_options) {
  PreparedEvaluation prepared = prepare_evaluation(model, tokenizer, plan, perplexity_options.seqlen, zeroshot_options);
  nlohmann::json out = nlohmann::json::array();
  for (const DatasetResult& r : evaluate(model, prepared.datasets, perplexity_options)) out.push_back(to_json(r));
  for (const TaskResult& r : evaluate_tasks(model, std::move(prepared.tasks), zeroshot_options))
    out.push_back(to_json(r));
  return out;
}

}  // namespace alps::eval
