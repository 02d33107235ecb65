#include "run_end.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>

#include "alps/core/error.h"
#include "alps/core/interrupt.h"
#include "alps/core/log.h"
#include "alps/eval/evaluate.h"
#include "alps/io/safetensors.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/model_card.h"
#include "alps/pipeline/run_state.h"
#include "job_checks.h"

namespace alps::pipeline {

namespace fs = std::filesystem;

DenseEvaluation evaluate_input_model(const PruneJob& job, const RunPlan& plan, model::CausalLM& m,
                                     const tokenizer::Tokenizer& tok, Phases& phases) {
  const auto t0 = std::chrono::steady_clock::now();
  phases.set_step("evaluating the dense model");
  DenseEvaluation dense = evaluate_dense(job.model_dir, m, tok, eval::plan_evaluation(job.recipe.eval, job.data_dir),
                                         perplexity_options(job.recipe, plan), zeroshot_options(job.recipe));
  if (!dense.from_cache) phases.add("dense_eval", seconds_since(t0));
  return dense;
}

void add_dense_evaluation(report::RunReport& rep, const std::optional<DenseEvaluation>& dense) {
  if (!dense) return;
  rep.eval_dense = dense->results;
  rep.extra["dense_eval"] = {{"cache_file", dense->cache_file.string()}, {"from_cache", dense->from_cache}};
}

void evaluate_pruned(const PruneJob& job, const RunPlan& plan, model::CausalLM& m, const tokenizer::Tokenizer& tok,
                     Phases& phases, report::RunReport& rep) {
  const Recipe& r = job.recipe;
  if (r.eval.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  phases.set_step("evaluating the pruned model");
  try {
    m.load_all();
    for (const auto& res : eval::run_evaluation(m, tok, eval::plan_evaluation(r.eval, job.data_dir),
                                                perplexity_options(r, plan), zeroshot_options(r)))
      rep.eval.push_back(res);
  } catch (const Error& e) {
    ALPS_FAIL(e.what(), "\nevery block is pruned and saved: the same command with --resume continues from here (with "
              "another --eval, or none, to write the checkpoint)");
  }
  rep.phase_seconds["eval"] += seconds_since(t0);
}

void write_output(OutputDir& out, model::CausalLM& m, const std::map<std::string, at::Tensor>& input_orders,
                  report::RunReport& rep) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path staging = out.begin_staging();
  std::vector<std::string> written = m.write_files(staging);
  if (!input_orders.empty()) {
    io::save_safetensors(staging / kChannelOrdersFile, {input_orders.begin(), input_orders.end()},
                         {{"format", "alps channel orders"},
                          {"meaning", "for each weight named, its inputs read in this order (W[:, order]) are N:M"}});
    written.push_back(kChannelOrdersFile);
    rep.extra["channel_orders"] = {{"file", kChannelOrdersFile}, {"linears", input_orders.size()}};
  }
  note_pruning_in_model_card(staging, rep);
  if (std::find(written.begin(), written.end(), kModelCardFile) == written.end()) written.push_back(kModelCardFile);
  for (const auto& name : written)
    if (name != kReportFile)  // an input that is itself an alps output: its report is replaced below
      rep.files.push_back({{"name", name}, {"bytes", static_cast<int64_t>(fs::file_size(staging / name))}});
  rep.complete = true;
  rep.phase_seconds["save"] = seconds_since(t0);
  {
    std::ofstream f(staging / kReportFile);
    f << report::to_json(rep).dump(2) << "\n";
    ALPS_CHECK(f.good(), "write error on ", (staging / kReportFile).string());
  }
  out.commit();
  spdlog::info("wrote {} in {}", out.path().string(), format_duration(seconds_since(t0)));
}

void fail_out_of_memory(const c10::Error& e, const PruneJob& job, const RunPlan& plan, const std::string& step,
                        int64_t blocks_done) {
  std::string what = e.what();
  what = what.substr(0, what.find('\n'));
  const auto& r = job.recipe;
  ALPS_FAIL("out of memory on device ", r.device, " while ", step, ": ", what, "\nto fit, lower --batch-size (now ",
            r.batch_size, ")", plan.solve_streams > 1 ? ", solve one linear at a time (--solve-streams 1)" : "",
            plan.stats_on_host ? "" : ", add --stats-device cpu",
            plan.dtype == c10::kFloat ? ", or use --dtype bf16" : "", ", or choose another --device; ",
            blocks_done > 0 ? "the " + std::to_string(blocks_done) +
                                  " finished block(s) are saved: rerun with --resume (any device, any batch size)"
                            : "nothing was pruned yet");
}

void say_on_interrupt(int64_t blocks_saved, int64_t blocks_total) {
  set_interrupt_notice(
      blocks_saved == 0
          ? fmt::format("alps: interrupted before block 1/{} was pruned; the same command with --resume starts it "
                        "again", blocks_total)
      : blocks_saved < blocks_total
          ? fmt::format("alps: interrupted after block {}/{}; the same command with --resume continues", blocks_saved,
                        blocks_total)
          : fmt::format("alps: interrupted after the last block ({}/{}), before the checkpoint was written; the same "
                        "command with --resume evaluates and writes it", blocks_saved, blocks_total));
}

}  // namespace alps::pipeline
