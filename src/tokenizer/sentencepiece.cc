#include "alps/tokenizer/sentencepiece.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "tokenizer/sentencepiece_shim.h"

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
};

template <typename F>
void bind(void* handle, const char* name, F& f, const std::string& path) {
  f = reinterpret_cast<F>(dlsym(handle, name));
  ALPS_CHECK(f != nullptr, path, " has no symbol ", name);
}

// Where to find the module: $ALPS_SENTENCEPIECE_SHIM, the build tree that compiled this library, then the
// directory of the running executable.
std::vector<std::string> shim_candidates() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("ALPS_SENTENCEPIECE_SHIM"); env != nullptr && *env != '\0') paths.push_back(env);
#ifdef ALPS_SENTENCEPIECE_SHIM_PATH
  paths.push_back(ALPS_SENTENCEPIECE_SHIM_PATH);
#endif
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) paths.push_back((exe.parent_path() / "libalps_sentencepiece_shim.so").string());
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

class SentencePiece final : public Tokenizer {
 public:
  SentencePiece(const std::filesystem::path& model_file, const SpecialTokenConfig& config)
      : source_(model_file.string()) {
    require_regular_file(model_file, "SentencePiece model");
    std::string error;
    processor_.reset(shim().load(source_.c_str(), &append_bytes, &error));
    ALPS_CHECK(processor_ != nullptr, "cannot load SentencePiece model ", source_, ": ", error);
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
    std::vector<int64_t> ids;
    ids.reserve(text.size() / 3 + 2);
    if (add_special && add_bos_) ids.push_back(*bos_id_);
    std::string error;
    const int rc = shim().encode(processor_.get(), text.data(), text.size(), &append_ids, &ids, &append_bytes, &error);
    ALPS_CHECK(rc == 0, "SentencePiece (", source_, ") failed to encode: ", error);
    if (add_special && add_eos_) ids.push_back(*eos_id_);
    return ids;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    // Skip what LlamaTokenizer's skip_special_tokens skips: control pieces (<s>, </s>) and <unk>.
    std::vector<int> kept;
    kept.reserve(ids.size());
    for (int64_t id : ids) {
      ALPS_CHECK(id >= 0 && id < vocab_size(), "decode: token id ", id, " is outside the vocabulary [0, ", vocab_size(),
                 ") of ", source_);
      if (shim().piece_flags(processor_.get(), static_cast<int>(id)) != 0 || id == bos_id_ || id == eos_id_) continue;
      kept.push_back(static_cast<int>(id));
    }
    std::string text, error;
    const int rc =
        shim().decode(processor_.get(), kept.data(), kept.size(), &append_bytes, &text, &append_bytes, &error);
    ALPS_CHECK(rc == 0, "SentencePiece (", source_, ") failed to decode: ", error);
    return text;
  }

  int64_t vocab_size() const override { return shim().piece_size(processor_.get()); }
  std::optional<int64_t> bos_id() const override { return bos_id_; }
  std::optional<int64_t> eos_id() const override { return eos_id_; }
  std::string kind() const override { return "sentencepiece"; }

 private:
  // The token string from the config wins when it is a piece of the model; then config.json's id; then the
  // model's own id (SentencePiece uses -1 for "none").
  std::optional<int64_t> resolve(const std::optional<std::string>& token, std::optional<int64_t> config_id,
                                 int model_id) const {
    if (token) {
      const int id = shim().piece_id(processor_.get(), token->data(), token->size());
      if (id >= 0) return id;
    }
    if (config_id && *config_id >= 0 && *config_id < vocab_size()) return config_id;
    if (model_id >= 0) return model_id;
    return std::nullopt;
  }

  std::string source_;
  // Owned from the moment it is loaded, so that a check failing later in the constructor does not leak it.
  std::unique_ptr<void, void (*)(void*)> processor_{nullptr, [](void* p) { shim().free(p); }};
  std::optional<int64_t> bos_id_, eos_id_;
  bool add_bos_ = true, add_eos_ = false;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file,
                                              const SpecialTokenConfig& config) {
  return std::make_unique<SentencePiece>(model_file, config);
}

}  // namespace alps::tokenizer
