#pragma once
// Perplexity of one model on several datasets, as `alps eval` reports it and `alps prune --eval` records it.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "alps/eval/datasets.h"
#include "alps/eval/perplexity.h"

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

/// Tokenises each dataset (SPEC §6) and computes its perplexity with `model` as it is placed.
std::vector<DatasetResult> evaluate(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer,
                                    const std::vector<Dataset>& datasets, const PerplexityOptions& options);

/// {"dataset", "path", "seqlen", "windows", "tokens", "dataset_tokens", "nll", "perplexity", "seconds",
///  "tokens_per_second"}
nlohmann::json to_json(const DatasetResult& r);

}  // namespace alps::eval
