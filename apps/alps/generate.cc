// `alps generate`: greedy decoding with a KV cache, the quickest sanity check of a (pruned) checkpoint.
#include <spdlog/spdlog.h>

#include <iostream>

#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/model/causal_lm.h"
#include "alps/model/generate.h"
#include "alps/tokenizer/tokenizer.h"
#include "commands.h"

namespace alps::cli {

namespace {

struct GenerateArgs {
  CommonOptions common;
  std::string model, prompt, dtype = "fp32";
  int64_t max_tokens = 32;
  bool ignore_eos = false;
};

int run_generate(const GenerateArgs& a) {
  const std::filesystem::path model = resolve_model_dir(a.model, data_dir());
  model::CausalLM m = model::CausalLM::load(model);
  auto tok = tokenizer::load_tokenizer(model);
  m.set_compute(resolve_device(a.common.device), parse_dtype(a.dtype));
  m.load_all();

  std::vector<int64_t> prompt_ids = tok->encode(a.prompt, true);
  if (prompt_ids.empty()) {  // a tokenizer that adds nothing (GPT-2 style): start from the model's BOS
    const auto bos = tok->bos_id() ? tok->bos_id() : m.config().bos_token_id;
    ALPS_CHECK(bos.has_value(), "empty prompt and neither the tokenizer nor config.json defines a BOS token");
    prompt_ids.push_back(*bos);
  }
  model::GreedyOptions options;
  options.max_tokens = a.max_tokens;
  options.eos = tok->eos_id() ? tok->eos_id() : m.config().eos_token_id;
  options.ignore_eos = a.ignore_eos;
  const model::Generation g = model::greedy_decode(m, prompt_ids, options);
  const std::string text = tokenizer::continuation_text(*tok, prompt_ids, g.ids);
  spdlog::info("generated {} tokens in {:.2f}s: prompt of {} tokens and first token {:.3f}s, then {:.1f} tokens/s",
               g.ids.size(), g.seconds, prompt_ids.size(), g.first_token_seconds, g.decode_tokens_per_second());
  if (a.common.json) {
    print_json({{"model", a.model},
                {"prompt", a.prompt},
                {"prompt_ids", prompt_ids},
                {"ids", g.ids},
                {"text", text},
                {"seconds", g.seconds},
                {"first_token_seconds", g.first_token_seconds},
                {"decode_tokens_per_second", g.decode_tokens_per_second()}});
  } else {
    std::cout << a.prompt << text << std::endl;
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, Runner& runner) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Greedy continuation of a prompt (empty prompt: from BOS)");
  cmd->add_option("--model", a->model, model_flag_help())->required();
  cmd->add_option("--prompt", a->prompt, "Text to continue (default empty: start from BOS)");
  cmd->add_option("--max-tokens", a->max_tokens,
                  "Tokens to generate (stops early at EOS or the model's positions; 0 only tokenizes the prompt)")
      ->capture_default_str()
      ->check(int_at_least(0));
  cmd->add_option("--dtype", a->dtype, "Compute dtype: fp32 (fp64 for checks), or fp16/bf16 on CUDA")
      ->capture_default_str()
      ->check(known_name(dtype_name_problem, "DTYPE"));
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Keep generating after EOS (for timing a fixed number of tokens)");
  add_common_flags(cmd, a->common);
  cmd->callback([a, &runner] { runner = [a] { return run_generate(*a); }; });
}

}  // namespace alps::cli
