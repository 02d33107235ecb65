#include "alps/tokenizer/sentencepiece.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/core/utf8.h"
#include "tokenizer/regex.h"
#include "tokenizer/sentencepiece_shim.h"
#include "tokenizer/slow_split.h"

namespace alps::tokenizer {
namespace {

// libsentencepiece is reached through the alps_sentencepiece_shim module (sentencepiece_shim.h says why).
struct Shim {
  decltype(&alps_spm_load) load;
  decltype(&alps_spm_free) free;
  decltype(&alps_spm_encode) encode;
  decltype(&alps_spm_decode) decode;
  decltype(&alps_spm_piece_size) piece_size;
  decltype(&alps_spm_bos_id) bos_id;
  decltype(&alps_spm_eos_id) eos_id;
  decltype(&alps_spm_piece_id) piece_id;
  decltype(&alps_spm_piece_flags) piece_flags;
  decltype(&alps_spm_id_to_piece) id_to_piece;
};

template <typename F>
void bind(void* handle, const char* name, F& f, const std::string& path) {
  f = reinterpret_cast<F>(dlsym(handle, name));
  ALPS_CHECK(f != nullptr, path, " has no symbol ", name);
}

// Where to find the module: $ALPS_SENTENCEPIECE_SHIM, lib/alps beside an installed bin/alps (CMakeLists.txt's
// install rules), the build tree that compiled this library, then the directory of the running executable.
std::vector<std::string> shim_candidates() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("ALPS_SENTENCEPIECE_SHIM"); env != nullptr && *env != '\0') paths.push_back(env);
  const std::filesystem::path exe = executable_dir();
  const std::string module = "libalps_sentencepiece_shim.so";
  if (!exe.empty()) paths.push_back((exe.parent_path() / "lib" / "alps" / module).string());
#ifdef ALPS_SENTENCEPIECE_SHIM_PATH
  paths.push_back(ALPS_SENTENCEPIECE_SHIM_PATH);
#endif
  if (!exe.empty()) paths.push_back((exe / module).string());
  return paths;
}

#if defined(__SANITIZE_ADDRESS__)
#define ALPS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALPS_ASAN 1
#endif
#endif

// AddressSanitizer's dlopen interceptor aborts the process on RTLD_DEEPBIND (a deep-bound library could reach libc's
// malloc instead of the sanitizer's). The module cannot do without it (protobuf, above), and its allocations still
// reach the sanitizer's malloc through libstdc++'s operator new, so sanitized builds call glibc's own dlopen. The
// sanitizer then sees the module's new/delete pairs as malloc/delete (tests/fuzz/harness.cc turns that check off).
void* open_module(const char* path, int flags) {
#ifdef ALPS_ASAN
  using DlopenFn = void* (*)(const char*, int);
  static const auto real_dlopen = [] {
    void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    return libc != nullptr ? reinterpret_cast<DlopenFn>(dlsym(libc, "dlopen")) : nullptr;
  }();
  if (real_dlopen != nullptr) return real_dlopen(path, flags);
#endif
  return dlopen(path, flags);
}

const Shim& shim() {
  static Shim instance;
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    std::string tried;
    for (const auto& path : shim_candidates()) {
      // DEEPBIND: the module and libsentencepiece resolve protobuf symbols to their own copy first.
      void* handle = open_module(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle == nullptr) {
        tried += "\n  " + path + ": " + dlerror();
        continue;
      }
      bind(handle, "alps_spm_load", instance.load, path);
      bind(handle, "alps_spm_free", instance.free, path);
      bind(handle, "alps_spm_encode", instance.encode, path);
      bind(handle, "alps_spm_decode", instance.decode, path);
      bind(handle, "alps_spm_piece_size", instance.piece_size, path);
      bind(handle, "alps_spm_bos_id", instance.bos_id, path);
      bind(handle, "alps_spm_eos_id", instance.eos_id, path);
      bind(handle, "alps_spm_piece_id", instance.piece_id, path);
      bind(handle, "alps_spm_piece_flags", instance.piece_flags, path);
      bind(handle, "alps_spm_id_to_piece", instance.id_to_piece, path);
      spdlog::debug("SentencePiece module: {}", path);
      return;
    }
    failure = "cannot load the SentencePiece module libalps_sentencepiece_shim.so (set ALPS_SENTENCEPIECE_SHIM to "
              "its path); tried:" + tried;
  });
  ALPS_CHECK(failure.empty(), failure);
  return instance;
}

void append_bytes(void* context, const char* data, size_t size) {
  static_cast<std::string*>(context)->append(data, size);
}
void append_ids(void* context, const int* ids, size_t count) {
  static_cast<std::vector<int64_t>*>(context)->insert(static_cast<std::vector<int64_t>*>(context)->end(), ids,
                                                        ids + count);
}

constexpr std::string_view kMetaSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's visible space

// transformers' LlamaTokenizer (the slow class that the perplexity scripts of IST-DASLab/sparsegpt at commit 147d215
// load; lm-eval's fast one agrees with it in legacy mode): the text is cut at added tokens (<unk>, <s>, </s> among
// them, so their text in a data set becomes their ids), and libsentencepiece encodes each stretch between them. With
// `legacy: false`, the model loses its dummy prefix and the tokenizer adds one space in front of the whole text
// instead of in front of every stretch.
class SentencePiece final : public Tokenizer {
 public:
  SentencePiece(const std::filesystem::path& model_file, const SpecialTokenConfig& config)
      : source_(model_file.string()), legacy_(config.legacy.value_or(true)),
        add_prefix_space_(config.add_prefix_space.value_or(true)) {
    require_regular_file(model_file, "SentencePiece model");
    std::string error;
    processor_.reset(shim().load(source_.c_str(), legacy_ ? 0 : 1, &append_bytes, &error));
    ALPS_CHECK(processor_ != nullptr, "cannot load SentencePiece model ", source_, ": ", error);
    pieces_ = shim().piece_size(processor_.get());
    space_id_ = piece_id(std::string(kMetaSpace));
    unk_token_ = config.unk_token.value_or("<unk>");
    unk_length_ = static_cast<int64_t>(sp_encode(unk_token_).size());

    // LlamaTokenizer's defaults for the special strings; each is an added token, with its piece's id when the model
    // has that piece, else the next free id (after those of tokenizer_config's added tokens).
    added_ = config.added_tokens;
    int64_t next_id = pieces_;
    for (const auto& token : added_) {
      ALPS_CHECK(token.id >= 0, source_, ": added token '", token.content, "' has id ", token.id);
      next_id = std::max(next_id, token.id + 1);
    }
    special_ = config.additional_special_tokens;
    for (const auto& token : {config.bos_token.value_or("<s>"), config.eos_token.value_or("</s>"), unk_token_,
                              config.pad_token.value_or("")}) {
      if (token.empty()) continue;
      special_.push_back(token);
      const bool known = std::any_of(added_.begin(), added_.end(), [&](const auto& a) { return a.content == token; });
      if (known) continue;
      AddedToken added;
      added.content = token;
      added.id = piece_id(token).value_or(next_id);
      if (added.id == next_id) ++next_id;
      added_.push_back(std::move(added));
    }
    vocab_size_ = next_id;

    bos_id_ = resolve(config.bos_token, config.bos_token_id, shim().bos_id(processor_.get()));
    eos_id_ = resolve(config.eos_token, config.eos_token_id, shim().eos_id(processor_.get()));
    // LlamaTokenizer's defaults: add_bos_token=True, add_eos_token=False.
    add_bos_ = config.add_bos_token.value_or(true);
    add_eos_ = config.add_eos_token.value_or(false);
    ALPS_CHECK(!add_bos_ || bos_id_, source_, ": add_bos_token is set but the model has no BOS piece");
    ALPS_CHECK(!add_eos_ || eos_id_, source_, ": add_eos_token is set but the model has no EOS piece");
  }
  SentencePiece(const SentencePiece&) = delete;
  SentencePiece& operator=(const SentencePiece&) = delete;

  std::vector<int64_t> encode(std::string_view text, bool add_special) const override {
    // libsentencepiece would read invalid bytes as unknown pieces; transformers cannot even read such a file.
    const size_t bad = find_invalid_utf8(text);
    ALPS_CHECK(bad == std::string_view::npos, "text to tokenize is not valid UTF-8 (byte offset ", bad, ")");
    std::vector<int64_t> ids;
    ids.reserve(text.size() / 3 + 2);
    if (add_special && add_bos_) ids.push_back(*bos_id_);
    if (legacy_ || text.empty()) {
      tokenize(text, ids);
    } else {
      std::string prefixed = add_prefix_space_ ? std::string(kMetaSpace) : std::string();
      prefixed += replace_all(text, kMetaSpace, " ");
      const size_t first = ids.size();
      const bool second_is_special = tokenize(prefixed, ids);
      // A lone prefix space before a special token is dropped again.
      if (second_is_special && ids[first] == space_id_) ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(first));
    }
    if (add_special && add_eos_) ids.push_back(*eos_id_);
    return ids;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    // LlamaTokenizer's decode with skip_special_tokens: special tokens and control pieces are dropped; the other
    // added tokens and the stretches of pieces between them are decoded apart and joined with single spaces.
    std::vector<std::string> parts;
    std::vector<int> stretch;
    auto flush = [&](bool keep_empty) {
      if (stretch.empty()) return;
      std::string part, error;
      const int rc =
          shim().decode(processor_.get(), stretch.data(), stretch.size(), &append_bytes, &part, &append_bytes, &error);
      ALPS_CHECK(rc == 0, "SentencePiece (", source_, ") failed to decode: ", error);
      // The space the tokenizer put in front is taken off the stretch's first piece.
      if (add_prefix_space_ && piece(stretch.front()).rfind(kMetaSpace, 0) == 0 && !part.empty() &&
          part.front() == ' ')
        part.erase(0, 1);
      if (keep_empty || !part.empty()) parts.push_back(std::move(part));
      stretch.clear();
    };
    for (int64_t id : ids) {
      ALPS_CHECK(id >= 0 && id < vocab_size_, "decode: token id ", id, " is outside the vocabulary [0, ", vocab_size_,
                 ") of ", source_);
      const auto added = std::find_if(added_.begin(), added_.end(), [&](const auto& a) { return a.id == id; });
      if (id == bos_id_ || id == eos_id_ || (added != added_.end() && is_special(added->content))) continue;
      if (added != added_.end()) {
        flush(false);
        parts.push_back(added->content);
      } else if (id < pieces_ && shim().piece_flags(processor_.get(), static_cast<int>(id)) == 0) {
        stretch.push_back(static_cast<int>(id));
      }
    }
    flush(true);
    std::string text;
    for (size_t i = 0; i < parts.size(); ++i) text += (i > 0 ? " " : "") + parts[i];
    return text;
  }

  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int64_t> bos_id() const override { return bos_id_; }
  std::optional<int64_t> eos_id() const override { return eos_id_; }
  std::string kind() const override { return "sentencepiece"; }

 private:
  // PreTrainedTokenizer.tokenize: added tokens become their ids, the text between them goes to the model. Returns
  // whether the second id came from a special token (what the non-legacy path needs to know).
  bool tokenize(std::string_view text, std::vector<int64_t>& ids) const {
    const size_t first = ids.size();
    bool second_is_special = false;
    for (const auto& piece : split_at_added_tokens(text, added_)) {
      if (piece.added_id >= 0) {
        if (ids.size() == first + 1) second_is_special = is_special(piece.text);
        ids.push_back(piece.added_id);
      } else {
        const size_t before = ids.size();
        encode_stretch(piece.text, ids);
        if (before <= first + 1 && ids.size() > first + 1) second_is_special = false;
      }
    }
    return second_is_special;
  }

  // LlamaTokenizer._tokenize. Without the dummy prefix, libsentencepiece drops a leading space, so a stretch that
  // starts with one is encoded after the unknown token's text, whose pieces are then cut off.
  void encode_stretch(const std::string& text, std::vector<int64_t>& ids) const {
    if (legacy_ || !(text.rfind(kMetaSpace, 0) == 0 || text.front() == ' ')) {
      const auto encoded = sp_encode(text);
      ids.insert(ids.end(), encoded.begin(), encoded.end());
      return;
    }
    const auto encoded = sp_encode(unk_token_ + text);
    const int64_t skip = static_cast<int64_t>(encoded.size()) >= unk_length_ ? unk_length_ : 0;
    ids.insert(ids.end(), encoded.begin() + skip, encoded.end());
  }

  std::vector<int64_t> sp_encode(std::string_view text) const {
    std::vector<int64_t> ids;
    std::string error;
    const int rc = shim().encode(processor_.get(), text.data(), text.size(), &append_ids, &ids, &append_bytes, &error);
    ALPS_CHECK(rc == 0, "SentencePiece (", source_, ") failed to encode: ", error);
    return ids;
  }

  std::optional<int64_t> piece_id(const std::string& piece) const {
    const int id = shim().piece_id(processor_.get(), piece.data(), piece.size());
    return id >= 0 ? std::optional<int64_t>(id) : std::nullopt;
  }

  std::string piece(int id) const {
    std::string text;
    shim().id_to_piece(processor_.get(), id, &append_bytes, &text);
    return text;
  }

  bool is_special(const std::string& token) const {
    return std::find(special_.begin(), special_.end(), token) != special_.end();
  }

  // The token string from the config wins when it is a piece of the model; then config.json's id; then the
  // model's own id (SentencePiece uses -1 for "none").
  std::optional<int64_t> resolve(const std::optional<std::string>& token, std::optional<int64_t> config_id,
                                 int model_id) const {
    if (token) {
      if (auto id = piece_id(*token)) return id;
    }
    if (config_id && *config_id >= 0 && *config_id < vocab_size_) return config_id;
    if (model_id >= 0) return model_id;
    return std::nullopt;
  }

  std::string source_;
  bool legacy_, add_prefix_space_;
  // Owned from the moment it is loaded, so that a check failing later in the constructor does not leak it.
  std::unique_ptr<void, void (*)(void*)> processor_{nullptr, [](void* p) { shim().free(p); }};
  int64_t pieces_ = 0, vocab_size_ = 0, unk_length_ = 0;
  std::optional<int64_t> space_id_, bos_id_, eos_id_;
  std::string unk_token_;
  std::vector<AddedToken> added_;     // tokenizer_config's added tokens and the special strings
  std::vector<std::string> special_;  // LlamaTokenizer's all_special_tokens
  bool add_bos_ = true, add_eos_ = false;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file,
                                              const SpecialTokenConfig& config) {
  return std::make_unique<SentencePiece>(model_file, config);
}

}  // namespace alps::tokenizer
