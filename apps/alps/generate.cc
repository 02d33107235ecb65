// `alps generate`: greedy decoding with a KV cache, the quickest sanity check of a (pruned) checkpoint.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <iterator>

#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/core/log.h"
#include "alps/model/causal_lm.h"
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
  model::CausalLM m = model::CausalLM::load(a.model);
  auto tok = tokenizer::load_tokenizer(a.model);
  m.set_compute(resolve_device(a.common.device), parse_dtype(a.dtype));
  m.load_all();

  std::vector<int64_t> ids = tok->encode(a.prompt, true);
  if (ids.empty()) {  // a tokenizer that adds nothing (GPT-2 style): start from the model's BOS
    const auto bos = tok->bos_id() ? tok->bos_id() : m.config().bos_token_id;
    ALPS_CHECK(bos.has_value(), "empty prompt and neither the tokenizer nor config.json defines a BOS token");
    ids.push_back(*bos);
  }
  const size_t prompt_len = ids.size();
  const int64_t max_length = m.config().max_sequence_length();
  const int64_t room = max_length - static_cast<int64_t>(prompt_len);
  ALPS_CHECK(a.max_tokens == 0 || room >= 1, "the prompt is ", prompt_len, " tokens and the model has ", max_length,
             " positions (max_position_embeddings in ", (m.dir() / "config.json").string(),
             "): no room for a new token; shorten the prompt");
  if (a.max_tokens > 0 && room < a.max_tokens)
    spdlog::warn("the prompt is {} tokens of the model's {} positions: at most {} new tokens, not {}", prompt_len,
                 max_length, room, a.max_tokens);
  const auto eos = tok->eos_id() ? tok->eos_id() : m.config().eos_token_id;
  at::NoGradGuard no_grad;
  const auto start = std::chrono::steady_clock::now();
  double prompt_seconds = 0;
  // Each step runs only the tokens the cache has not seen: the prompt first, then one token per step.
  model::KVCache cache;
  for (int64_t t = 0; t < a.max_tokens && static_cast<int64_t>(ids.size()) < max_length; ++t) {
    const int64_t n = static_cast<int64_t>(ids.size());
    if (!m.cache_exact(n)) cache = model::KVCache{};  // positions whose encoding changes with the length
    const std::vector<int64_t> fresh(ids.begin() + cache.length(), ids.end());
    const at::Tensor logits = m.forward(at::tensor(fresh, at::kLong).unsqueeze(0), &cache, true)[0][0];
    // argmax over NaN logits picks an arbitrary token; refuse instead of printing plausible-looking text.
    if (!at::isfinite(logits).all().item<bool>())
      m.check_finite_result(at::isnan(logits).any().item<bool>() ? NAN : INFINITY,
                            "generate: a logit of step " + std::to_string(t));
    const int64_t next = logits.argmax().item<int64_t>();
    ids.push_back(next);
    if (t == 0) prompt_seconds = seconds_since(start);
    if (eos && next == *eos && !a.ignore_eos) break;
  }
  const double seconds = seconds_since(start);
  const std::vector<int64_t> prompt_ids(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(prompt_len));
  const std::vector<int64_t> generated(ids.begin() + static_cast<std::ptrdiff_t>(prompt_len), ids.end());
  // The continuation's text depends on what precedes it (SentencePiece drops the space of a leading "▁" piece:
  // "Once upon" + "a time" would print "Once upona time"), so it is the whole decode minus the decoded prompt.
  // Should the prompt's decode not be a prefix (a multi-byte character split across the boundary), the
  // continuation decoded alone is the best left.
  // A model's embedding is often padded past the tokenizer's vocabulary (OPT, Qwen2), and a badly pruned one may
  // pick such an id: it has no text, so it is left out of the text (as transformers' fast tokenizers do) but kept in
  // the JSON ids, with a warning, rather than losing the whole output.
  const auto has_text = [&](int64_t id) { return id >= 0 && id < tok->vocab_size(); };
  const auto textual = [&](const std::vector<int64_t>& v) {
    std::vector<int64_t> kept;
    std::copy_if(v.begin(), v.end(), std::back_inserter(kept), has_text);
    return kept;
  };
  if (const auto missing = std::count_if(generated.begin(), generated.end(), [&](int64_t id) { return !has_text(id); }))
    spdlog::warn("{} of the {} generated ids are beyond the tokenizer's vocabulary of {} ids (the model has {}): they "
                 "have no text and are left out of it",
                 missing, generated.size(), tok->vocab_size(), m.config().vocab_size);
  const std::string prompt_text = tok->decode(prompt_ids), full_text = tok->decode(textual(ids));
  const std::string text = full_text.compare(0, prompt_text.size(), prompt_text) == 0
                               ? full_text.substr(prompt_text.size())
                               : tok->decode(textual(generated));
  // The first token costs the prompt's forward; each later one a single position's.
  const int64_t steps = static_cast<int64_t>(generated.size());
  const double decode_rate = steps > 1 ? static_cast<double>(steps - 1) / (seconds - prompt_seconds) : 0.0;
  spdlog::info("generated {} tokens in {:.2f}s: prompt of {} tokens and first token {:.3f}s, then {:.1f} tokens/s",
               steps, seconds, prompt_len, prompt_seconds, decode_rate);
  if (a.common.json) {
    print_json({{"model", a.model},
                {"prompt", a.prompt},
                {"prompt_ids", prompt_ids},
                {"ids", generated},
                {"text", text},
                {"seconds", seconds},
                {"first_token_seconds", prompt_seconds},
                {"decode_tokens_per_second", decode_rate}});
  } else {
    std::cout << a.prompt << text << std::endl;
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, Runner& runner) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Greedy continuation of a prompt (empty prompt: from BOS)");
  cmd->add_option("--model", a->model, "Hugging Face checkpoint directory (OPT or LLaMA)")->required();
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
