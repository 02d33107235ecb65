#pragma once
// SentencePiece `tokenizer.model` (LLaMA-1/2 family) through libsentencepiece, kept entirely in the .cc file.
#include <filesystem>
#include <memory>

#include "alps/tokenizer/special_tokens.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::tokenizer {

/// BOS is added unless `config.add_bos_token` is false; EOS only when `config.add_eos_token` is true (LlamaTokenizer).
std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file,
                                              const SpecialTokenConfig& config);

}  // namespace alps::tokenizer
