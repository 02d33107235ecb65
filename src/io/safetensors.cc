#include "alps/io/safetensors.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "alps/core/error.h"
#include "alps/io/staged_path.h"

namespace alps::io {

namespace {

// "The reference" in this file is huggingface/safetensors's Rust reader and writer (safetensors/src/tensor.rs). The
// version compared was not recorded; the behaviours named here are those of its release v0.7.0 (commit
// fa27fa835a466cb50d07696ec20b94f46aed0e31). The reference implementation refuses headers above 100 MB; a larger one
// is a corrupt length field.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeName {
  const char* name;
  c10::ScalarType type;
};
constexpr DTypeName kDTypes[] = {
    {"F64", c10::kDouble}, {"F32", c10::kFloat}, {"F16", c10::kHalf}, {"BF16", c10::kBFloat16}, {"I64", c10::kLong},
    {"I32", c10::kInt},    {"I16", c10::kShort}, {"I8", c10::kChar},  {"U8", c10::kByte},       {"BOOL", c10::kBool},
};

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

c10::ScalarType dtype_from_safetensors(const std::string& name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return d.type;
  ALPS_FAIL("unsupported safetensors dtype '", name, "'");
}

std::string dtype_to_safetensors(c10::ScalarType t) {
  for (const auto& d : kDTypes)
    if (t == d.type) return d.name;
  ALPS_FAIL("dtype ", c10::toString(t), " cannot be stored in safetensors");
}

struct SafetensorsFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr && addr != MAP_FAILED) ::munmap(addr, size);
  }
};

SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

namespace {

// The file mapped whole, copy-on-write (MAP_PRIVATE + PROT_WRITE: a caller editing a tensor never writes the file):
// its address and size.
std::pair<void*, uint64_t> map_file(const std::string& file) {
  int fd = ::open(file.c_str(), O_RDONLY);
  ALPS_CHECK(fd >= 0, "cannot open ", file, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    ALPS_FAIL("cannot stat ", file, ": ", std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {  // open() succeeds on a directory; mmap would then fail with ENODEV
    ::close(fd);
    ALPS_FAIL(file, S_ISDIR(st.st_mode) ? " is a directory, expected a file" : " is not a regular file");
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    ALPS_FAIL(file, ": not a safetensors file (", file_size, " bytes, shorter than the 8-byte header length)");
  }
  void* addr = ::mmap(nullptr, file_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ALPS_CHECK(addr != MAP_FAILED, "cannot map ", file, ": ", std::strerror(errno));
  return {addr, file_size};
}

// One tensor's header entry, checked against the data section of `data_size` bytes.
TensorEntry read_entry(const std::string& where, const std::string& name, const nlohmann::json& value,
                       uint64_t data_size) {
  ALPS_CHECK(value.is_object() && value.contains("dtype") && value.contains("shape") && value.contains("data_offsets"),
             where, " needs dtype, shape and data_offsets");
  ALPS_CHECK(value["dtype"].is_string(), where, ": dtype is not a string");
  TensorEntry e;
  e.name = name;
  try {
    e.dtype = dtype_from_safetensors(value["dtype"].get<std::string>());
  } catch (const Error& err) {
    ALPS_FAIL(where, ": ", err.what());
  }
  ALPS_CHECK(value["shape"].is_array(), where, ": shape is not an array");
  for (const auto& d : value["shape"]) {
    ALPS_CHECK(d.is_number_integer() &&
                   (d.is_number_unsigned() ? d.get<uint64_t>() <= uint64_t{INT64_MAX} : d.get<int64_t>() >= 0),
               where, ": shape entries must be non-negative 64-bit integers, got ", d.dump());
    e.shape.push_back(d.get<int64_t>());
  }
  // Like the reference reader, the running product must stay in range even when a later dimension is 0.
  int64_t expected_bytes = 1;
  for (int64_t d : e.shape)
    ALPS_CHECK(!__builtin_mul_overflow(expected_bytes, d, &expected_bytes), where, ": shape ", shape_str(e.shape),
               " has more elements than a 64-bit count holds");
  const auto element_bytes = static_cast<int64_t>(c10::elementSize(e.dtype));
  ALPS_CHECK(!__builtin_mul_overflow(expected_bytes, element_bytes, &expected_bytes), where, ": shape ",
             shape_str(e.shape), " is too large for a 64-bit byte count");
  const auto& off = value["data_offsets"];
  ALPS_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(), where,
             ": data_offsets must be two non-negative integers");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  ALPS_CHECK(e.begin <= e.end, where, ": data_offsets [", e.begin, ", ", e.end, "] are reversed");
  ALPS_CHECK(e.end <= data_size, where, ": data_offsets end ", e.end, " is past the data section (", data_size,
             " bytes; truncated file?)");
  const auto expected = static_cast<uint64_t>(expected_bytes);
  ALPS_CHECK(e.end - e.begin == expected, where, ": shape ", shape_str(e.shape), " of ",
             value["dtype"].get<std::string>(), " needs ", expected, " bytes but data_offsets span ", e.end - e.begin);
  return e;
}

// Like the reference reader: byte ranges must tile the data section exactly (no overlap, no gap). Sorts `entries`
// by their place in the file.
void check_tiling(const std::string& file, std::vector<TensorEntry>& entries, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  for (const auto& e : entries) {
    ALPS_CHECK(e.begin >= cursor, file, ": tensor '", e.name, "' overlaps the previous tensor (starts at ", e.begin,
               ", previous ends at ", cursor, ")");
    ALPS_CHECK(e.begin == cursor, file, ": gap before tensor '", e.name, "' (starts at ", e.begin, ", expected ",
               cursor, ")");
    cursor = e.end;
  }
  ALPS_CHECK(cursor == data_size, file, ": data section has ", data_size, " bytes but tensors cover ", cursor);
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const std::string file = path.string();
  mapping_ = std::make_shared<Mapping>();
  std::tie(mapping_->addr, mapping_->size) = map_file(file);
  const uint64_t file_size = mapping_->size;
  const auto* bytes = static_cast<const uint8_t*>(mapping_->addr);

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  ALPS_CHECK(header_len <= kMaxHeaderBytes, file, ": header length ", header_len,
             " exceeds the 100 MB limit (corrupt or not a safetensors file)");
  ALPS_CHECK(8 + header_len <= file_size, file, ": header length ", header_len, " runs past the end of the file (",
             file_size, " bytes; truncated?)");
  data_start_ = 8 + header_len;
  const uint64_t data_size = file_size - data_start_;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const nlohmann::json::exception& e) {
    ALPS_FAIL(file, ": header is not valid JSON (", e.what(), ")");
  }
  ALPS_CHECK(header.is_object(), file, ": header is not a JSON object");

  for (const auto& [name, value] : header.items()) {
    if (name != "__metadata__") {
      entries_.push_back(read_entry(file + ": tensor '" + name + "'", name, value, data_size));
      continue;
    }
    ALPS_CHECK(value.is_object(), file, ": __metadata__ must be an object of strings");
    for (const auto& [k, v] : value.items()) {
      ALPS_CHECK(v.is_string(), file, ": __metadata__ value for '", k, "' is not a string");
      metadata_[k] = v.get<std::string>();
    }
  }
  check_tiling(file, entries_, data_size);
  for (size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].name] = i;
}

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) != 0; }

const TensorEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = index_.find(name);
  ALPS_CHECK(it != index_.end(), "tensor '", name, "' not found in ", path_.string());
  return entries_[it->second];
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorEntry& e = entry(name);
  auto* base = static_cast<uint8_t*>(mapping_->addr) + data_start_ + e.begin;
  auto keep = mapping_;
  const auto options = at::TensorOptions().dtype(e.dtype).device(at::kCPU);
  if (reinterpret_cast<uintptr_t>(base) % c10::elementSize(e.dtype) != 0) {
    // Misaligned data (legal in the format): copy into an aligned buffer rather than hand out a bad pointer.
    at::Tensor t = at::empty(e.shape, options);
    std::memcpy(t.data_ptr(), base, e.end - e.begin);
    return t;
  }
  return at::from_blob(
      base, e.shape, [keep](void*) {}, options);
}

TensorEntry entry_for(const std::string& name, const at::Tensor& t) {
  TensorEntry e;
  e.name = name;
  e.dtype = t.scalar_type();
  e.shape = t.sizes().vec();
  return e;
}

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorEntry> layout,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), layout_(std::move(layout)) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (auto& e : layout_) {
    ALPS_CHECK(header.find(e.name) == header.end(), path.string(), ": tensor '", e.name, "' listed twice");
    e.begin = offset;
    e.end = offset + static_cast<uint64_t>(e.numel()) * c10::elementSize(e.dtype);
    offset = e.end;
    header[e.name] = {{"dtype", dtype_to_safetensors(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned (as the reference writer does).
  text.append((8 - text.size() % 8) % 8, ' ');
  out_.open(path, std::ios::binary | std::ios::trunc);
  ALPS_CHECK(out_.good(), "cannot create ", path.string(), ": ", std::strerror(errno));
  uint8_t len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  out_.write(reinterpret_cast<const char*>(len), 8);
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  ALPS_CHECK(out_.good(), "write error on ", path.string());
}

void SafetensorsWriter::write(const std::string& name, const at::Tensor& tensor) {
  ALPS_CHECK(next_ < layout_.size(), path_.string(), ": tensor '", name, "' written beyond the declared layout");
  const TensorEntry& e = layout_[next_];
  ALPS_CHECK(e.name == name, path_.string(), ": expected tensor '", e.name, "' next, got '", name, "'");
  ALPS_CHECK(tensor.scalar_type() == e.dtype && tensor.sizes().vec() == e.shape, path_.string(), ": tensor '", name,
             "' is ", c10::toString(tensor.scalar_type()), " ", shape_str(tensor.sizes().vec()), ", layout says ",
             c10::toString(e.dtype), " ", shape_str(e.shape));
  at::Tensor t = tensor.device().is_cpu() ? tensor.contiguous() : tensor.cpu().contiguous();
  out_.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
  ALPS_CHECK(out_.good(), "write error on ", path_.string(), " (disk full?)");
  ++next_;
}

void SafetensorsWriter::finish() {
  ALPS_CHECK(next_ == layout_.size(), path_.string(), ": only ", next_, " of ", layout_.size(), " tensors written");
  out_.flush();
  ALPS_CHECK(out_.good(), "write error on ", path_.string(), " (disk full?)");
  out_.close();
}

void save_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata, ExistingFile existing) {
  StagedPath staged(path);
  std::vector<TensorEntry> layout;
  layout.reserve(tensors.size());
  for (const auto& [name, t] : tensors) layout.push_back(entry_for(name, t));
  SafetensorsWriter writer(staged.temp(), std::move(layout), metadata);
  for (const auto& [name, t] : tensors) writer.write(name, t);
  writer.finish();
  staged.commit(existing);
}

}  // namespace alps::io
