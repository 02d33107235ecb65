#include "alps/io/fingerprint.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <set>

#include "alps/core/error.h"

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

json fingerprint_checkpoint_dir(const fs::path& dir) {
  json files = json::object();
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || !fingerprinted(e.path())) continue;
    files[e.path().filename().string()] = fingerprint_file(e.path(), e.path().extension() == ".safetensors");
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
    const bool header_hash = a.value("hashed", "") == "header" || b.value("hashed", "") == "header" ||
                             fs::path(label).extension() == ".safetensors";
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
