// Task construction from the raw fields: equal to the ready fields (built by lm-eval 0.4.9's own rules) on every
// row of every shipped task file, plus the rules those files do not exercise and the errors on bad rows.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "alps/core/error.h"
#include "alps/core/py_text.h"
#include "alps/eval/task.h"
#include "alps/io/text_files.h"
#include "support.h"

namespace alps::eval {
namespace {

namespace fs = std::filesystem;

fs::path eval_dir() { return test::data_dir() / "eval"; }

std::vector<nlohmann::json> rows_of(const fs::path& file) {
  std::istringstream in(io::read_text_file(file));
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

const TaskSpec& spec(const std::string& name) {
  const TaskSpec* s = find_task(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

// Multiple-choice ready fields: query, choices, gold.
void expect_multiple_choice_ready(const std::string& task, size_t expected_rows) {
  ALPS_REQUIRE_DATA(fs::path("eval") / spec(task).file);
  const fs::path file = eval_dir() / spec(task).file;
  const std::vector<nlohmann::json> rows = rows_of(file);
  const std::vector<TaskDoc> docs = load_task_docs(spec(task), file);
  ASSERT_EQ(rows.size(), expected_rows);
  ASSERT_EQ(docs.size(), rows.size());
  int64_t mismatches = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const TaskDoc& d = docs[i];
    const auto choices = rows[i]["choices"].get<std::vector<std::string>>();
    bool same = d.row == static_cast<int64_t>(i) && d.gold == rows[i]["gold"].get<int64_t>() &&
                d.choices == choices && d.requests.size() == choices.size();
    for (size_t k = 0; same && k < choices.size(); ++k)
      same = d.requests[k].context == rows[i]["query"].get<std::string>() &&
             d.requests[k].continuation == " " + choices[k];
    if (!same && ++mismatches <= 3) ADD_FAILURE() << task << " row " << i << " differs from the ready fields";
  }
  EXPECT_EQ(mismatches, 0) << task;
}

TEST(TaskConstruction, PiqaEveryRow) { expect_multiple_choice_ready("piqa", 1838); }
TEST(TaskConstruction, ArcEasyEveryRow) { expect_multiple_choice_ready("arc_easy", 2376); }
TEST(TaskConstruction, ArcChallengeEveryRow) { expect_multiple_choice_ready("arc_challenge", 1172); }
TEST(TaskConstruction, HellaswagEveryRow) { expect_multiple_choice_ready("hellaswag", 10042); }
TEST(TaskConstruction, BoolqEveryRow) { expect_multiple_choice_ready("boolq", 3270); }
TEST(TaskConstruction, RteEveryRow) { expect_multiple_choice_ready("rte", 277); }

TEST(TaskConstruction, OpenbookqaEveryRow) {
  ALPS_REQUIRE_DATA("eval");
  // Its ready fields are query and gold; the choices are the raw answer texts.
  const fs::path file = eval_dir() / spec("openbookqa").file;
  const auto rows = rows_of(file);
  const auto docs = load_task_docs(spec("openbookqa"), file);
  ASSERT_EQ(docs.size(), 500u);
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(docs[i].gold, rows[i]["gold"].get<int64_t>()) << i;
    ASSERT_EQ(docs[i].requests.size(), rows[i]["choices"].size()) << i;
    for (size_t k = 0; k < docs[i].requests.size(); ++k) {
      ASSERT_EQ(docs[i].requests[k].context, rows[i]["query"].get<std::string>()) << i;
      ASSERT_EQ(docs[i].requests[k].continuation, " " + rows[i]["choices"][k].get<std::string>()) << i;
    }
  }
}

TEST(TaskConstruction, WinograndeEveryRowPartialContexts) {
  ALPS_REQUIRE_DATA("eval");
  const fs::path file = eval_dir() / spec("winogrande").file;
  const auto rows = rows_of(file);
  const auto docs = load_task_docs(spec("winogrande"), file);
  ASSERT_EQ(docs.size(), 1267u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto contexts = rows[i]["contexts"].get<std::vector<std::string>>();
    ASSERT_EQ(docs[i].gold, rows[i]["gold"].get<int64_t>()) << i;
    ASSERT_EQ(docs[i].requests.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      ASSERT_EQ(docs[i].requests[k].context, contexts[k]) << i;
      ASSERT_EQ(docs[i].requests[k].continuation, rows[i]["target"].get<std::string>()) << i;
    }
  }
}

TEST(TaskConstruction, LambadaEveryRowKeepsNewlinesInTargets) {
  ALPS_REQUIRE_DATA("eval");
  const fs::path ready = eval_dir() / "lambada_openai" / "lambada_openai_test_lmeval.jsonl.gz";
  const auto rows = rows_of(ready);
  const auto from_ready_file = load_task_docs(spec("lambada_openai"), ready);
  const auto from_openai_file = load_task_docs(spec("lambada_openai"), eval_dir() / spec("lambada_openai").file);
  ASSERT_EQ(rows.size(), 5153u);
  ASSERT_EQ(from_openai_file.size(), rows.size());
  int64_t with_newline = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (const auto* docs : {&from_ready_file, &from_openai_file}) {
      ASSERT_EQ((*docs)[i].requests.size(), 1u);
      ASSERT_EQ((*docs)[i].requests[0].context, rows[i]["context"].get<std::string>()) << i;
      ASSERT_EQ((*docs)[i].requests[0].continuation, rows[i]["target"].get<std::string>()) << i;
    }
    with_newline += rows[i]["target"].get<std::string>().find('\n') != std::string::npos;
  }
  EXPECT_EQ(from_openai_file[426].requests[0].continuation, " of\n\nPower");
  EXPECT_EQ(with_newline, 7);
}

// Writes `lines` as a task file and builds it.
std::vector<TaskDoc> build(const std::string& task, const std::vector<std::string>& lines, test::TempDir& tmp) {
  const fs::path p = tmp / (task + ".jsonl");
  std::ofstream out(p);
  for (const auto& l : lines) out << l << "\n";
  out.close();
  return load_task_docs(spec(task), p);
}

std::string error_of(const std::string& task, const std::vector<std::string>& lines) {
  test::TempDir tmp;
  return test::error_message([&] { build(task, lines, tmp); });
}

TEST(TaskConstruction, ArcAnswerKeyAmongLettersOrDigits) {
  test::TempDir tmp;
  const auto docs = build(
      "arc_challenge",
      {R"({"question":"Q1","choices":{"text":["a","b","c","d"],"label":["A","B","C","D"]},"answerKey":"C"})",
       R"({"question":"Q2","choices":{"text":["w","x","y","z","v"],"label":["1","2","3","4","5"]},"answerKey":"4"})"},
      tmp);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].gold, 2);
  EXPECT_EQ(docs[1].gold, 3);
  EXPECT_EQ(docs[1].requests[4].continuation, " v");
  EXPECT_EQ(docs[0].requests[0].context, "Question: Q1\nAnswer:");
  // OpenBookQA strips leading spaces from its answer key.
  const auto obqa = build("openbookqa",
                          {R"({"question_stem":"S","choices":{"text":["p","q"],"label":["A","B"]},"answerKey":" B"})"},
                          tmp);
  EXPECT_EQ(obqa[0].gold, 1);
  EXPECT_EQ(obqa[0].requests[0].context, "S");
}

TEST(TaskConstruction, HellaswagPreprocessing) {
  test::TempDir tmp;
  const auto docs = build(
      "hellaswag",
      {R"({"activity_label":"Making a cake","ctx_a":"A woman [header] stands.","ctx_b":"sHE MIXES Élan","endings":[" [title] Add eggs.  Stir [step] well [x","x [a]\n[b] y","Go on [title] Next"],"label":"1"})"},
      tmp);
  ASSERT_EQ(docs.size(), 1u);
  // capitalize() lower-cases the rest of ctx_b; [...] is dropped, double spaces collapse once.
  EXPECT_EQ(docs[0].requests[0].context, "Making a cake: A woman stands. She mixes élan");
  // Outputs of Python's preprocess on the same strings: stripped first, so a leading " [title]" is a bracket.
  EXPECT_EQ(docs[0].choices[0], " Add eggs. Stir well [x");
  EXPECT_EQ(docs[0].choices[1], "x \n y");
  EXPECT_EQ(docs[0].choices[2], "Go on. Next");
  EXPECT_EQ(docs[0].requests[0].continuation, "  Add eggs. Stir well [x");
  EXPECT_EQ(docs[0].gold, 1);
}

TEST(TaskConstruction, PythonStringSemantics) {
  // str.capitalize() as Python computed it (scripts/make_py_text_golden.py): full mappings, final sigma, digraphs.
  nlohmann::json golden;
  std::ifstream(test::source_dir() / "tests" / "data" / "eval" / "py_text_golden.json") >> golden;
  ASSERT_FALSE(golden.at("capitalize").empty());
  for (const auto& pair : golden.at("capitalize"))
    EXPECT_EQ(py_capitalize(pair.at(0).get<std::string>()), pair.at(1).get<std::string>()) << pair.at(0);
  EXPECT_EQ(py_strip("\xc2\xa0 a b\n\t\xe2\x80\x8a"), "a b");  // NBSP and U+200A are whitespace to Python
  EXPECT_EQ(py_rstrip("a \n"), "a");
  EXPECT_EQ(py_rstrip("   "), "");
  EXPECT_EQ(py_len("caf\xc3\xa9"), 4u);
  EXPECT_EQ(py_len("\xe2\x82\xac"), 1u);
  EXPECT_FALSE(py_isspace(U'\u200b'));  // zero-width space is not whitespace
}

TEST(TaskConstruction, ErrorsNameFileRowAndField) {
  const std::string missing = error_of("piqa", {R"({"goal":"g","sol1":"a","sol2":"b","label":0})",
                                                R"({"goal":"g","sol1":"a","label":0})"});
  EXPECT_NE(missing.find("piqa.jsonl row 1 (line 2): field \"sol2\": missing"), std::string::npos) << missing;
  const std::string gold = error_of("rte", {R"({"sentence1":"a","sentence2":"b","label":2})"});
  EXPECT_NE(gold.find("row 0 (line 1): field \"label\": answer index 2 is not one of the 2 choices"), std::string::npos)
      << gold;
  const std::string key = error_of(
      "arc_easy", {R"({"question":"Q","choices":{"text":["a","b"],"label":["A","B"]},"answerKey":"E"})"});
  EXPECT_NE(key.find("field \"answerKey\": answer key \"E\" is not one of the choice labels (A, B)"),
            std::string::npos)
      << key;
  const std::string blank =
      error_of("winogrande", {R"({"sentence":"no blank","option1":"a","option2":"b","answer":"1"})"});
  EXPECT_NE(blank.find("field \"sentence\": no blank"), std::string::npos) << blank;
  const std::string type = error_of("boolq", {R"({"passage":"p","question":7,"label":1})"});
  EXPECT_NE(type.find("field \"question\": expected a string, got 7"), std::string::npos) << type;
  const std::string json = error_of("boolq", {"{not json"});
  EXPECT_NE(json.find("row 0 (line 1): not valid JSON"), std::string::npos) << json;
}

TEST(TaskConstruction, LimitTakesTheFirstRows) {
  ALPS_REQUIRE_DATA("eval");
  const auto docs = load_task_docs(spec("rte"), eval_dir() / spec("rte").file, 5);
  ASSERT_EQ(docs.size(), 5u);
  EXPECT_EQ(docs[4].row, 4);
}

}  // namespace
}  // namespace alps::eval
