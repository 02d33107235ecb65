#include "alps/io/text_files.h"

#include <gtest/gtest.h>

#include <fstream>

#include "alps/core/error.h"
#include "support.h"

namespace alps::io {
namespace {

TEST(TextFiles, ReadsJsonLinesArraysAndGzipWithLimits) {
  test::TempDir dir;
  std::ofstream(dir / "a.jsonl") << "{\"text\": \"one\"}\n\n{\"text\": \"two\", \"url\": \"u\"}\n{\"text\": \"three\"}";
  EXPECT_EQ(read_text_records(dir / "a.jsonl"), (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(read_text_records(dir / "a.jsonl", 2), (std::vector<std::string>{"one", "two"}));
  ASSERT_EQ(std::system(("gzip -k " + (dir / "a.jsonl").string()).c_str()), 0);
  EXPECT_EQ(read_text_records(dir / "a.jsonl.gz"), read_text_records(dir / "a.jsonl"));
  std::ofstream(dir / "b.json") << "[\n {\"text\": \"x\"},\n {\"text\": \"y\"}\n]\n";
  EXPECT_EQ(read_text_records(dir / "b.json"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(read_text_records(dir / "b.json", 1), (std::vector<std::string>{"x"}));

  std::ofstream(dir / "t.txt") << "plain\ntext";
  ASSERT_EQ(std::system(("gzip -k " + (dir / "t.txt").string()).c_str()), 0);
  EXPECT_EQ(read_text_file(dir / "t.txt.gz"), "plain\ntext");
  EXPECT_TRUE(is_json_records_name("x/c4.json.gz"));
  EXPECT_TRUE(is_json_records_name("x.jsonl"));
  EXPECT_FALSE(is_json_records_name("x.txt.gz"));
}

TEST(TextFiles, ErrorsNameTheFileAndRecord) {
  test::TempDir dir;
  std::ofstream(dir / "bad.jsonl") << "{\"text\": \"ok\"}\n{\"content\": \"no text\"}\n";
  const std::string no_text = test::error_message([&] { read_text_records(dir / "bad.jsonl"); });
  EXPECT_NE(no_text.find("bad.jsonl: record 2 has no string field"), std::string::npos) << no_text;
  std::ofstream(dir / "broken.jsonl") << "{\"text\": \"ok\"}\n{\"text\": \n";
  EXPECT_NE(test::error_message([&] { read_text_records(dir / "broken.jsonl"); }).find("record 2 is not valid JSON"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] { read_text_file(dir / "missing.txt"); }).find("missing.txt does not exist"),
            std::string::npos);
  std::ofstream(dir / "corrupt.gz") << "\x1f\x8b\x08\x00garbage-not-deflate";
  EXPECT_NE(test::error_message([&] { read_text_file(dir / "corrupt.gz"); }).find("corrupt.gz"), std::string::npos);
}

}  // namespace
}  // namespace alps::io
