#include "alps/tokenizer/tokenizer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>

#include "alps/core/error.h"
#include "alps/tokenizer/bpe.h"
#include "alps/tokenizer/sentencepiece.h"
#include "alps/tokenizer/special_tokens.h"

namespace alps::tokenizer {

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir) {
  namespace fs = std::filesystem;
  ALPS_CHECK(fs::is_directory(model_dir), "model directory ", model_dir.string(), " does not exist");
  const SpecialTokenConfig config = read_special_token_config(model_dir);
  const fs::path json = model_dir / "tokenizer.json", vocab = model_dir / "vocab.json",
                 merges = model_dir / "merges.txt", sp_model = model_dir / "tokenizer.model";
  const bool has_json = fs::exists(json), has_files = fs::exists(vocab) && fs::exists(merges),
             has_sp = fs::exists(sp_model);
  // The slow LlamaTokenizer class reads tokenizer.model even when a tokenizer.json sits next to it.
  const bool prefers_sp = config.tokenizer_class == "LlamaTokenizer" || config.tokenizer_class == "CodeLlamaTokenizer";

  std::unique_ptr<Tokenizer> tokenizer;
  if (has_sp && (prefers_sp || (has_json && tokenizer_json_model_type(json) != "BPE"))) {
    // A tokenizer.json alps cannot run (a Unigram model) next to the SentencePiece model it was converted from.
    tokenizer = load_sentencepiece(sp_model, config);
  } else if (has_json) {
    tokenizer = make_bpe(read_tokenizer_json(json, config));
  } else if (has_files) {
    tokenizer = make_bpe(read_vocab_merges(vocab, merges, config));
  } else if (has_sp) {
    tokenizer = load_sentencepiece(sp_model, config);
  } else {
    ALPS_FAIL("no tokenizer in ", model_dir.string(),
              ": expected tokenizer.json, vocab.json + merges.txt, or tokenizer.model");
  }
  spdlog::debug("tokenizer {} from {}: {} ids, bos {}, eos {}", tokenizer->kind(), model_dir.string(),
                tokenizer->vocab_size(), tokenizer->bos_id().value_or(-1), tokenizer->eos_id().value_or(-1));
  return tokenizer;
}

std::string continuation_text(const Tokenizer& tok, const std::vector<int64_t>& prompt,
                              const std::vector<int64_t>& generated) {
  const auto has_text = [&](int64_t id) { return id >= 0 && id < tok.vocab_size(); };
  const auto textual = [&](const std::vector<int64_t>& v) {
    std::vector<int64_t> kept;
    std::copy_if(v.begin(), v.end(), std::back_inserter(kept), has_text);
    return kept;
  };
  if (const auto missing = std::count_if(generated.begin(), generated.end(), [&](int64_t id) { return !has_text(id); }))
    spdlog::warn("{} of the {} generated ids are beyond the tokenizer's vocabulary of {} ids: they have no text and "
                 "are left out of it", missing, generated.size(), tok.vocab_size());
  std::vector<int64_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  const std::string prompt_text = tok.decode(textual(prompt)), full_text = tok.decode(textual(all));
  return full_text.compare(0, prompt_text.size(), prompt_text) == 0 ? full_text.substr(prompt_text.size())
                                                                    : tok.decode(textual(generated));
}

}  // namespace alps::tokenizer
