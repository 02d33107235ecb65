// libFuzzer entry point, compiled once per target with ALPS_FUZZ_TARGET naming it (tests/fuzz/CMakeLists.txt).
// An alps::Error is an accepted outcome; any other exception escapes, terminates the process, and libFuzzer records
// the input as a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_targets.h"

// libsentencepiece runs in a module opened with RTLD_DEEPBIND (src/tokenizer/sentencepiece_shim.h says why). Inside
// it operator new and operator delete bind to different definitions (libstdc++'s new, which calls the sanitizer's
// malloc, and the sanitizer's delete), so every allocation it frees is reported as malloc-vs-delete from its static
// constructors on. Only that pairing check is turned off, and only in the target that loads it; overflows,
// use-after-free and leaks are still checked there.
// Decided at compile time: the sanitizer asks before the C library may be called.
extern "C" const char* __asan_default_options() {
  constexpr bool loads_sentencepiece = std::string_view(ALPS_FUZZ_TARGET) == "tokenizer_model";
  return loads_sentencepiece ? "alloc_dealloc_mismatch=0" : "";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const alps::fuzz::Target& target = alps::fuzz::target(ALPS_FUZZ_TARGET);
  alps::fuzz::run(target, data, size);
  return 0;
}
