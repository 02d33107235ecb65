#include "alps/io/safetensors.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "support.h"

namespace alps::io {
namespace {

namespace fs = std::filesystem;

// Writes a raw safetensors file from a header JSON and a data blob, to test the reader on files our writer
// would never produce.
void write_raw(const fs::path& p, const std::string& header, const std::string& data) {
  std::ofstream out(p, std::ios::binary);
  uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);  // x86_64 is little-endian like the format
  out << header << data;
}

std::string expect_error(const fs::path& p) {
  return test::error_message([&] { SafetensorsFile f(p); });
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  test::TempDir dir;
  at::manual_seed(0);
  std::vector<std::pair<std::string, at::Tensor>> tensors = {
      {"w", at::randn({3, 5})},
      {"h", at::randn({4}).to(at::kHalf)},
      {"b", at::randn({2, 2, 2}).to(at::kBFloat16)},
      {"d", at::randn({7}, at::kDouble)},
      {"i", at::arange(6, at::kLong).view({2, 3})},
      {"scalar", at::tensor(3.5f).view({})},
      {"empty", at::empty({0, 4})},
  };
  save_safetensors(dir / "t.safetensors", tensors, {{"tokens", "1234"}});
  SafetensorsFile f(dir / "t.safetensors");
  EXPECT_EQ(f.metadata().at("tokens"), "1234");
  EXPECT_EQ(f.entries().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    at::Tensor r = f.tensor(name);
    EXPECT_EQ(r.scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(r.equal(t)) << name;
  }
  // Views are copy-on-write: editing one never changes the file.
  f.tensor("w").zero_();
  EXPECT_TRUE(SafetensorsFile(dir / "t.safetensors").tensor("w").equal(tensors[0].second));
}

TEST(Safetensors, HeaderIsPaddedToEightBytesAndIsStandardJson) {
  test::TempDir dir;
  save_safetensors(dir / "t.safetensors", {{"x", at::ones({3})}});
  std::ifstream in(dir / "t.safetensors", std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  auto j = nlohmann::json::parse(header);
  EXPECT_EQ(j["x"]["dtype"], "F32");
  EXPECT_EQ(j["x"]["data_offsets"], nlohmann::json({0, 12}));
}

TEST(Safetensors, RejectsCorruptFilesWithClearErrors) {
  test::TempDir dir;
  const std::string f4(16, '\0');
  write_raw(dir / "ok", R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", f4);
  EXPECT_NO_THROW(SafetensorsFile(dir / "ok"));

  write_raw(dir / "shape", R"({"a":{"dtype":"F32","shape":[3,2],"data_offsets":[0,16]}})", f4);
  EXPECT_NE(expect_error(dir / "shape").find("needs 24 bytes but data_offsets span 16"), std::string::npos);

  write_raw(dir / "past", R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", f4);
  EXPECT_NE(expect_error(dir / "past").find("past the data section"), std::string::npos);

  write_raw(
      dir / "overlap",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      std::string(12, '\0'));
  EXPECT_NE(expect_error(dir / "overlap").find("overlaps"), std::string::npos);

  write_raw(dir / "gap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", f4);
  EXPECT_NE(expect_error(dir / "gap").find("gap before tensor 'a'"), std::string::npos);

  write_raw(dir / "dtype", R"({"a":{"dtype":"F8_E9","shape":[16],"data_offsets":[0,16]}})", f4);
  EXPECT_NE(expect_error(dir / "dtype").find("unsupported safetensors dtype"), std::string::npos);

  write_raw(dir / "json", R"({"a":{"dtype":"F32",)", f4);
  EXPECT_NE(expect_error(dir / "json").find("not valid JSON"), std::string::npos);

  {  // header length far beyond the file
    std::ofstream out(dir / "len", std::ios::binary);
    uint64_t n = 1ull << 20;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  EXPECT_NE(expect_error(dir / "len").find("runs past the end of the file"), std::string::npos);

  {  // truncated: a valid file cut short
    save_safetensors(dir / "full", {{"x", at::ones({100})}});
    fs::resize_file(dir / "full", fs::file_size(dir / "full") - 10);
  }
  const std::string msg = expect_error(dir / "full");
  EXPECT_NE(msg.find("full"), std::string::npos) << "error must name the file: " << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  std::ofstream(dir / "tiny") << "abc";
  EXPECT_NE(expect_error(dir / "tiny").find("shorter than the 8-byte header"), std::string::npos);
  EXPECT_NE(expect_error(dir / "missing").find("cannot open"), std::string::npos);
}

TEST(Safetensors, MissingTensorNamesFileAndTensor) {
  test::TempDir dir;
  save_safetensors(dir / "m.safetensors", {{"x", at::ones({1})}});
  SafetensorsFile f(dir / "m.safetensors");
  const std::string message = test::error_message([&] { f.tensor("y"); });
  EXPECT_NE(message.find("'y' not found in"), std::string::npos) << message;
  EXPECT_NE(message.find("m.safetensors"), std::string::npos) << message;
}

TEST(Safetensors, WriterChecksLayoutAndLeavesNoFileOnFailure) {
  test::TempDir dir;
  EXPECT_THROW(save_safetensors(dir / "bad.safetensors", {{"x", at::ones({1})}, {"x", at::ones({1})}}), Error);
  EXPECT_FALSE(fs::exists(dir / "bad.safetensors"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 0)
      << "temporary file left behind";
}

}  // namespace
}  // namespace alps::io
