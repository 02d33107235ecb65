#pragma once
// The evaluation of the unpruned input model (`alps prune --eval-dense`), shown beside the pruned model's in the
// summary and the report. It depends only on the model files, the evaluation files and windows, the compute dtype and
// the alps build, so it is kept in the cache directory under a hash of those and reused by every run that shares them
// (a sweep evaluates its dense model once).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "alps/eval/evaluate.h"

namespace alps::model {
class CausalLM;
}
namespace alps::tokenizer {
class Tokenizer;
}

namespace alps::pipeline {

struct DenseEvaluation {
  nlohmann::json results = nlohmann::json::array();  ///< as eval::run_evaluation gives them
  std::filesystem::path cache_file;                  ///< where it is kept (empty: no cache directory)
  bool from_cache = false;
};

/// Evaluates `m`, which must still hold the input's weights, as the pruned model will be evaluated, or reads the
/// cached results of an identical evaluation. A cache that cannot be written is a warning, not an error.
DenseEvaluation evaluate_dense(const std::filesystem::path& model_dir, model::CausalLM& m,
                               const tokenizer::Tokenizer& tok, const eval::EvalPlan& plan,
                               const eval::PerplexityOptions& perplexity, const eval::ZeroShotOptions& zeroshot);

}  // namespace alps::pipeline
