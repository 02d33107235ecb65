#pragma once
// C interface of the alps_sentencepiece_shim module (sentencepiece_shim.cc), loaded with dlopen by sentencepiece.cc.
//
// Why a separate module: Debian's libsentencepiece carries its own copy of protobuf 3.14 with exported symbols,
// while libtorch loads the system libprotobuf 3.21. Linked into one executable the two interpose each other and the
// process crashes while loading (or aborts in protobuf's version check). The shim links libsentencepiece and is
// opened with RTLD_LOCAL | RTLD_DEEPBIND, so it binds to its own protobuf and libtorch to the system one.
#include <cstddef>

extern "C" {
using alps_spm_ids_sink = void (*)(void* context, const int* ids, size_t count);
using alps_spm_bytes_sink = void (*)(void* context, const char* data, size_t size);

/// Returns a processor, or null with the message written to `error`. With `no_dummy_prefix`, the model's normalizer
/// does not prepend a space to the text (what transformers' LlamaTokenizer loads when `legacy` is false).
void* alps_spm_load(const char* model_file, int no_dummy_prefix, alps_spm_bytes_sink error, void* error_context);
void alps_spm_free(void* processor);
/// 0 on success; on failure the message goes to `error`.
int alps_spm_encode(const void* processor, const char* text, size_t size, alps_spm_ids_sink out, void* context,
                    alps_spm_bytes_sink error, void* error_context);
int alps_spm_decode(const void* processor, const int* ids, size_t count, alps_spm_bytes_sink out, void* context,
                    alps_spm_bytes_sink error, void* error_context);
int alps_spm_piece_size(const void* processor);
int alps_spm_bos_id(const void* processor);
int alps_spm_eos_id(const void* processor);
/// -1 when `piece` is not in the vocabulary.
int alps_spm_piece_id(const void* processor, const char* piece, size_t size);
/// The piece's text ("\xe2\x96\x81Hello"); empty for an id outside the vocabulary.
void alps_spm_id_to_piece(const void* processor, int id, alps_spm_bytes_sink out, void* context);
/// Bit 0: control piece (<s>, </s>); bit 1: the unknown piece.
int alps_spm_piece_flags(const void* processor, int id);
}
