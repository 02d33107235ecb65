#include "alps/tokenizer/tokenizer.h"

#include <spdlog/spdlog.h>

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

}  // namespace alps::tokenizer
