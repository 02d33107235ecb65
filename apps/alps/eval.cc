// `alps eval`: perplexity of a checkpoint on standard datasets (SPEC §6). The library does the work
// (alps/eval/perplexity.h, datasets.h); this file maps flags to options and prints the table or JSON.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>

#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/eval/datasets.h"
#include "alps/eval/evaluate.h"
#include "alps/eval/perplexity.h"
#include "alps/model/causal_lm.h"
#include "alps/tokenizer/tokenizer.h"
#include "commands.h"

namespace alps::cli {

namespace {

struct EvalArgs {
  CommonOptions common;
  std::string model, ppl = "wikitext2", data_dir, dtype = "fp32";
  int64_t seqlen = 0, max_windows = 0, batch_size = 1;
};

int run_eval(const EvalArgs& a) {
  const std::vector<std::string> specs = split_list(a.ppl);
  ALPS_USAGE_CHECK(!specs.empty(), "--ppl: expected a comma-separated list of datasets, got '", a.ppl, "'");
  model::CausalLM m = model::CausalLM::load(a.model);
  const int64_t positions = m.config().max_positions;
  const int64_t seqlen = a.seqlen > 0 ? a.seqlen : std::min<int64_t>(2048, positions);
  ALPS_CHECK(seqlen <= positions, "--seqlen ", seqlen, " exceeds the model's ", positions,
             " positions (max_position_embeddings in ", (m.dir() / "config.json").string(), ")");
  const auto data = data_dir(a.data_dir);
  // Resolve every dataset before the slow part so a typo fails at once.
  std::vector<eval::Dataset> datasets;
  for (const std::string& s : specs) datasets.push_back(eval::resolve_dataset(s, data));
  auto tok = tokenizer::load_tokenizer(a.model);

  m.set_compute(resolve_device(a.common.device), parse_dtype(a.dtype));
  m.load_all();
  eval::PerplexityOptions opt;
  opt.seqlen = seqlen;
  opt.max_windows = a.max_windows;
  opt.batch_size = a.batch_size;

  nlohmann::json results = nlohmann::json::array();
  for (const eval::DatasetResult& r : eval::evaluate(m, *tok, datasets, opt)) results.push_back(eval::to_json(r));
  if (a.common.json) {
    print_json({{"model", a.model},
                {"architecture", m.config().architecture},
                {"device", m.compute_device().str()},
                {"dtype", dtype_name(m.compute_dtype())},
                {"seqlen", seqlen},
                {"results", results}});
  } else {
    std::cout << fmt::format("{:<14} {:>8} {:>10} {:>12} {:>9}\n", "dataset", "windows", "tokens", "perplexity",
                             "seconds");
    for (const auto& r : results)
      std::cout << fmt::format("{:<14} {:>8} {:>10} {:>12.4f} {:>9.2f}\n", r["dataset"].get<std::string>(),
                               r["windows"].get<int64_t>(), r["tokens"].get<int64_t>(), r["perplexity"].get<double>(),
                               r["seconds"].get<double>());
  }
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app, Runner& runner) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval", "Perplexity of a checkpoint on wikitext2, ptb, c4 or text files (SPEC §6)");
  cmd->add_option("--model", a->model, "Hugging Face checkpoint directory (OPT or LLaMA)")->required();
  cmd->add_option("--ppl", a->ppl,
                  "Comma-separated datasets: wikitext2, ptb, c4, tinystories, c4=FILE.jsonl, or a .txt/.jsonl[.gz] path")
      ->capture_default_str();
  cmd->add_option("--seqlen", a->seqlen, "Tokens per window, >= 2 (default 0: min(2048, max_position_embeddings))")
      ->check(seqlen_or_default());
  cmd->add_option("--data-dir", a->data_dir, "Data directory (default $ALPS_DATA_DIR, else ../shared/data)");
  cmd->add_option("--dtype", a->dtype, "Compute dtype: fp32, or fp16/bf16 on CUDA")->capture_default_str();
  cmd->add_option("--max-windows", a->max_windows, "Score at most N windows per dataset (0 = all)")
      ->capture_default_str()
      ->check(int_at_least(0));
  cmd->add_option("--batch-size", a->batch_size, "Windows per forward pass")->capture_default_str()->check(int_at_least(1));
  add_common_flags(cmd, a->common);
  cmd->callback([a, &runner] { runner = [a] { return run_eval(*a); }; });
}

}  // namespace alps::cli
