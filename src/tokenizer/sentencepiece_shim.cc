// The only translation unit that sees libsentencepiece; built as the alps_sentencepiece_shim module (see
// sentencepiece_shim.h for why it is not linked into the library directly).
#include "tokenizer/sentencepiece_shim.h"

#include <sentencepiece_processor.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define ALPS_SHIM_EXPORT __attribute__((visibility("default")))

namespace {

using sentencepiece::SentencePieceProcessor;

const SentencePieceProcessor& sp(const void* processor) {
  return *static_cast<const SentencePieceProcessor*>(processor);
}

void report(const sentencepiece::util::Status& status, alps_spm_bytes_sink error, void* context) {
  const std::string message = status.ToString();
  error(context, message.data(), message.size());
}

}  // namespace

extern "C" {

ALPS_SHIM_EXPORT void* alps_spm_load(const char* model_file, int no_dummy_prefix, alps_spm_bytes_sink error,
                                     void* error_context) {
  auto* processor = new SentencePieceProcessor();
  sentencepiece::util::Status status;
  if (no_dummy_prefix == 0) {
    status = processor->Load(model_file);
  } else {
    std::ifstream in(model_file, std::ios::binary);
    std::string proto((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      status = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound, "cannot read the file");
    } else {
      // Protobuf merges repeated occurrences of a message field, so appending ModelProto field 3 (normalizer_spec)
      // holding only NormalizerSpec field 3 (add_dummy_prefix) = false overrides that one flag and keeps the rest,
      // without the protobuf headers libsentencepiece does not install.
      proto += std::string("\x1a\x02\x18\x00", 4);
      status = processor->LoadFromSerializedProto(proto);
    }
  }
  if (!status.ok()) {
    report(status, error, error_context);
    delete processor;
    return nullptr;
  }
  return processor;
}

ALPS_SHIM_EXPORT void alps_spm_free(void* processor) { delete static_cast<SentencePieceProcessor*>(processor); }

ALPS_SHIM_EXPORT int alps_spm_encode(const void* processor, const char* text, size_t size, alps_spm_ids_sink out,
                                     void* context, alps_spm_bytes_sink error, void* error_context) {
  std::vector<int> ids;
  const auto status = sp(processor).Encode(std::string_view(text, size), &ids);
  if (!status.ok()) {
    report(status, error, error_context);
    return 1;
  }
  out(context, ids.data(), ids.size());
  return 0;
}

ALPS_SHIM_EXPORT int alps_spm_decode(const void* processor, const int* ids, size_t count, alps_spm_bytes_sink out,
                                     void* context, alps_spm_bytes_sink error, void* error_context) {
  std::string text;
  const auto status = sp(processor).Decode(std::vector<int>(ids, ids + count), &text);
  if (!status.ok()) {
    report(status, error, error_context);
    return 1;
  }
  out(context, text.data(), text.size());
  return 0;
}

ALPS_SHIM_EXPORT int alps_spm_piece_size(const void* processor) { return sp(processor).GetPieceSize(); }
ALPS_SHIM_EXPORT int alps_spm_bos_id(const void* processor) { return sp(processor).bos_id(); }
ALPS_SHIM_EXPORT int alps_spm_eos_id(const void* processor) { return sp(processor).eos_id(); }

ALPS_SHIM_EXPORT int alps_spm_piece_id(const void* processor, const char* piece, size_t size) {
  const std::string token(piece, size);
  const int id = sp(processor).PieceToId(token);
  return id >= 0 && sp(processor).IdToPiece(id) == token ? id : -1;
}

ALPS_SHIM_EXPORT void alps_spm_id_to_piece(const void* processor, int id, alps_spm_bytes_sink out, void* context) {
  if (id < 0 || id >= sp(processor).GetPieceSize()) return;
  const std::string& piece = sp(processor).IdToPiece(id);
  out(context, piece.data(), piece.size());
}

ALPS_SHIM_EXPORT int alps_spm_piece_flags(const void* processor, int id) {
  return (sp(processor).IsControl(id) ? 1 : 0) | (sp(processor).IsUnknown(id) ? 2 : 0);
}

}  // extern "C"
