#include "alps/io/fingerprint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <set>
#include <vector>

#include "alps/core/error.h"
#include "alps/core/parallel.h"

namespace alps::io {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// FNV-1a, 64 bits: detects edits and swapped files; nothing here needs a cryptographic hash.
class Fnv1a64 {
 public:
  void update(const char* data, size_t n) {
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ static_cast<unsigned char>(data[i])) * 0x100000001b3ULL;
  }
  std::string hex() const { return fmt::format("{:016x}", h_); }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

void hash_stream(std::ifstream& in, uint64_t limit, Fnv1a64& h) {
  std::vector<char> buf(1 << 16);
  while (limit > 0 && in) {
    in.read(buf.data(), static_cast<std::streamsize>(std::min<uint64_t>(buf.size(), limit)));
    const auto got = static_cast<uint64_t>(in.gcount());
    if (got == 0) break;
    h.update(buf.data(), got);
    limit -= got;
  }
}

// A chunk's hash: four lanes of 64-bit words, each word folded in as lane = (lane ^ word) * P. For a fixed word the
// step is a bijection of the lane (P is odd), and two words give two lanes from one: a chunk that differs from
// another in one word ends in another lane. A few cycles per 32 bytes, so memory or disk sets the pace.
uint64_t chunk_hash(const unsigned char* p, size_t n) {
  constexpr uint64_t kP = 0x9e3779b97f4a7c15ULL;
  uint64_t lane[4] = {0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL, 0xa4093822299f31d0ULL, 0x082efa98ec4e6c89ULL};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      lane[k] = (lane[k] ^ w) * kP;
    }
  Fnv1a64 h;
  h.update(reinterpret_cast<const char*>(lane), sizeof(lane));
  h.update(reinterpret_cast<const char*>(p + i), n - i);
  return h.value();
}

// The whole file, mapped, hashed in chunks on several threads; the chunks' hashes folded in order.
std::string content_hash(const fs::path& file, uint64_t bytes) {
  Fnv1a64 h;
  if (bytes == 0) return h.hex();
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ALPS_CHECK(fd >= 0, "cannot read ", file.string(), ": ", std::strerror(errno));
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ALPS_CHECK(map != MAP_FAILED, "cannot map ", file.string(), ": ", std::strerror(errno));
  ::madvise(map, bytes, MADV_SEQUENTIAL);
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  const size_t chunks = static_cast<size_t>((bytes + kChunk - 1) / kChunk);
  std::vector<uint64_t> hashes(chunks);
  std::atomic<size_t> next{0};
  const auto* data = static_cast<const unsigned char*>(map);
  run_tasks(parallel_threads(static_cast<int64_t>(chunks), 1), [&](int) {
    for (size_t c = next++; c < chunks; c = next++)
      hashes[c] = chunk_hash(data + c * kChunk, static_cast<size_t>(std::min(kChunk, bytes - c * kChunk)));
  });
  ::munmap(map, bytes);
  h.update(reinterpret_cast<const char*>(hashes.data()), hashes.size() * sizeof(uint64_t));
  return h.hex();
}

bool fingerprinted(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".json" || ext == ".safetensors" || ext == ".model" || ext == ".txt";
}

}  // namespace

std::string fingerprint_text(std::string_view text) {
  Fnv1a64 h;
  h.update(text.data(), text.size());
  return h.hex();
}

json fingerprint_file(const fs::path& file, bool header_only) {
  struct stat st{};
  ALPS_CHECK(::stat(file.c_str(), &st) == 0, "cannot stat ", file.string(), ": ", std::strerror(errno));
  ALPS_CHECK(S_ISREG(st.st_mode), file.string(), " is not a regular file");
  std::ifstream in(file, std::ios::binary);
  ALPS_CHECK(in.good(), "cannot read ", file.string());
  Fnv1a64 h;
  uint64_t limit = static_cast<uint64_t>(st.st_size);
  if (header_only) {
    char len[8] = {};
    in.read(len, 8);
    uint64_t n = 0;
    std::memcpy(&n, len, 8);  // little-endian, as the format and every supported host
    h.update(len, static_cast<size_t>(in.gcount()));
    limit = std::min<uint64_t>(n, limit);
  }
  hash_stream(in, limit, h);
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  json fp = {{"bytes", static_cast<int64_t>(st.st_size)}, {"mtime_ns", mtime_ns}, {"hash", h.hex()}};
  if (header_only) fp["hashed"] = "header";
  return fp;
}

json fingerprint_content(const fs::path& file) {
  struct stat st{};
  ALPS_CHECK(::stat(file.c_str(), &st) == 0, "cannot stat ", file.string(), ": ", std::strerror(errno));
  ALPS_CHECK(S_ISREG(st.st_mode), file.string(), " is not a regular file");
  const auto bytes = static_cast<uint64_t>(st.st_size);
  return {{"bytes", static_cast<int64_t>(bytes)}, {"hash", content_hash(file, bytes)}, {"hashed", "content"}};
}

json fingerprint_checkpoint_dir(const fs::path& dir, Hashed safetensors) {
  json files = json::object();
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || !fingerprinted(e.path())) continue;
    const bool tensors = e.path().extension() == ".safetensors";
    files[e.path().filename().string()] = tensors && safetensors == Hashed::kWhole ? fingerprint_content(e.path())
                                                                                   : fingerprint_file(e.path(), tensors);
  }
  return files;
}

std::vector<std::string> fingerprint_differences(const json& saved, const json& now) {
  std::vector<std::string> out;
  auto compare_file = [&out](const std::string& label, const json& a, const json& b) {
    const std::string prefix = label.empty() ? "" : label + ": ";
    // The modification time stands for the part the hash skips; a file hashed whole is judged by its content alone,
    // so a copied or re-downloaded identical file still resumes. States written before "hashed" existed hashed
    // exactly the safetensors files by their header.
    const bool whole = a.value("hashed", "") == "content" && b.value("hashed", "") == "content";
    const bool header_hash = !whole && (a.value("hashed", "") == "header" || b.value("hashed", "") == "header" ||
                                        fs::path(label).extension() == ".safetensors");
    if (a.value("bytes", int64_t{-1}) != b.value("bytes", int64_t{-1}))
      out.push_back(
          fmt::format("{}size {} -> {} bytes", prefix, a.value("bytes", int64_t{-1}), b.value("bytes", int64_t{-1})));
    else if (a.value("hash", "") != b.value("hash", ""))
      out.push_back(prefix + "content changed");
    else if (header_hash && a.value("mtime_ns", int64_t{-1}) != b.value("mtime_ns", int64_t{-1}))
      out.push_back(prefix + "modified since (same size and header, new modification time; the tensor data is not "
                    "hashed)");
  };
  if (saved.contains("bytes") || now.contains("bytes")) {
    compare_file("", saved, now);
    return out;
  }
  std::set<std::string> names;
  for (const auto& [k, v] : saved.items()) names.insert(k);
  for (const auto& [k, v] : now.items()) names.insert(k);
  for (const auto& name : names) {
    if (!saved.contains(name))
      out.push_back(name + ": new file");
    else if (!now.contains(name))
      out.push_back(name + ": missing now");
    else
      compare_file(name, saved[name], now[name]);
  }
  return out;
}

}  // namespace alps::io
