#pragma once
// The end of an `alps prune` run (pipeline/sequential.cc): the evaluations of the dense and the pruned model, the
// checkpoint and its report written into the output directory at once, and what the run says when it stops early.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "alps/pipeline/dense_evaluation.h"
#include "alps/pipeline/output_dir.h"
#include "alps/pipeline/prune_job.h"
#include "alps/pipeline/run_plan.h"
#include "alps/report/report.h"

namespace alps::model {
class CausalLM;
}
namespace alps::tokenizer {
class Tokenizer;
}

namespace alps::pipeline {

class Phases;

/// The evaluation of the input model as --eval will evaluate the pruned one (or from the cache), while no block is
/// pruned yet.
DenseEvaluation evaluate_input_model(const PruneJob& job, const RunPlan& plan, model::CausalLM& m,
                                     const tokenizer::Tokenizer& tok, Phases& phases);
/// Its results beside the pruned model's in `rep`.
void add_dense_evaluation(report::RunReport& rep, const std::optional<DenseEvaluation>& dense);
/// The pruned model as it is in memory, evaluated before the checkpoint is written so that the report holds the
/// result; a failure says that every block is saved and how to go on.
void evaluate_pruned(const PruneJob& job, const RunPlan& plan, model::CausalLM& m, const tokenizer::Tokenizer& tok,
                     Phases& phases, report::RunReport& rep);

/// The finished checkpoint and its report, written into a staging directory and swapped in at once.
void write_output(OutputDir& out, model::CausalLM& m, const std::map<std::string, at::Tensor>& input_orders,
                  report::RunReport& rep);

/// Running out of GPU memory is for the user to fix: says what did not fit, what to change, and that the blocks
/// finished so far are kept.
[[noreturn]] void fail_out_of_memory(const c10::Error& e, const PruneJob& job, const RunPlan& plan,
                                     const std::string& step, int64_t blocks_done);

/// What Ctrl-C or SIGTERM leaves behind at this point of the run, said when it arrives.
void say_on_interrupt(int64_t blocks_saved, int64_t blocks_total);

}  // namespace alps::pipeline
