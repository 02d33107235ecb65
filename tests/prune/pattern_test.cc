#include "alps/prune/pattern.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "alps/core/error.h"
#include "support.h"

namespace alps::prune {
namespace {

TEST(Pattern, ParsesUnstructuredAndNm) {
  Pattern p = Pattern::parse("0.7");
  EXPECT_FALSE(p.is_n_m());
  EXPECT_DOUBLE_EQ(p.sparsity(), 0.7);
  EXPECT_EQ(p.str(), "0.7");
  Pattern q = Pattern::parse("2:4");
  EXPECT_TRUE(q.is_n_m());
  EXPECT_EQ(q.n(), 2);
  EXPECT_EQ(q.m(), 4);
  EXPECT_DOUBLE_EQ(q.sparsity(), 0.5);
  EXPECT_EQ(q.str(), "2:4");
  EXPECT_TRUE(Pattern::parse("0").is_dense());
  EXPECT_TRUE(Pattern::parse("4:4").is_dense());
}

TEST(Pattern, RejectsBadText) {
  EXPECT_NE(alps::test::error_message([] { Pattern::parse("1.5"); }).find("[0, 1)"), std::string::npos);
  EXPECT_NE(alps::test::error_message([] { Pattern::parse("1"); }).find("[0, 1)"), std::string::npos);
  EXPECT_NE(alps::test::error_message([] { Pattern::parse("-0.1"); }).find("[0, 1)"), std::string::npos);
  EXPECT_NE(alps::test::error_message([] { Pattern::parse("nan"); }).find("[0, 1)"), std::string::npos);
  EXPECT_NE(alps::test::error_message([] { Pattern::parse("abc"); }).find("'abc'"), std::string::npos);
  EXPECT_NE(alps::test::error_message([] { Pattern::parse("0.5x"); }).find("'0.5x'"), std::string::npos);
  EXPECT_NE(alps::test::error_message([] { Pattern::parse("2:"); }).find("N:M"), std::string::npos);
  EXPECT_NE(alps::test::error_message([] { Pattern::parse("5:4"); }).find("N <= M"), std::string::npos);
  // 0:M keeps no weight at all, like sparsity 1.
  EXPECT_NE(alps::test::error_message([] { Pattern::parse("0:4"); }).find("0:M would prune every weight"),
            std::string::npos);
  EXPECT_NE(alps::test::error_message([] { Pattern::n_m(0, 1); }).find("1 <= N <= M"), std::string::npos);
}

TEST(Pattern, CheckShapeNamesTheProblem) {
  EXPECT_EQ(alps::test::error_message([] { Pattern::n_m(2, 4).check_shape(8, 170); }),
            "2:4 needs in % 4 == 0, got in = 170");
  EXPECT_NO_THROW(Pattern::n_m(2, 4).check_shape(8, 172));
  EXPECT_NO_THROW(Pattern::unstructured(0.5).check_shape(8, 170));
}

TEST(Pattern, ZeroCountsFloorWithoutBinaryRoundingSurprises) {
  EXPECT_EQ(Pattern::unstructured(0.29).zeros_total(10, 10), 29);  // 0.29 * 100 = 28.999999999999996 in binary
  EXPECT_EQ(Pattern::unstructured(0.7).zeros_total(3, 7), 14);      // floor(14.7)
  EXPECT_EQ(Pattern::unstructured(0.7).zeros_per_row(7), 4);
  EXPECT_EQ(Pattern::n_m(2, 4).zeros_total(3, 8), 12);
  EXPECT_EQ(Pattern::n_m(4, 8).zeros_per_row(16), 8);
}

// A count pattern: exactly its zeros in the layer; the per-row rule spreads them, each row floor(s in) or one more,
// the cumulative floors telescoping to the count.
TEST(Pattern, CountPatternsHoldTheirCountAndSpreadItOverRows) {
  for (const auto& [zeros, out, in] : {std::tuple<int64_t, int64_t, int64_t>{1234, 40, 96}, {0, 3, 5},
                                       {14, 3, 5}, {2867 * 7 + 3, 7, 4096}, {29, 10, 10}}) {
    SCOPED_TRACE(std::to_string(zeros) + " in " + std::to_string(out) + "x" + std::to_string(in));
    const Pattern p = Pattern::unstructured_count(zeros, out, in);
    EXPECT_TRUE(p.spreads_rows());
    EXPECT_EQ(p.zeros_total(out, in), zeros);
    int64_t sum = 0;
    for (int64_t r = 0; r < out; ++r) {
      const int64_t z = p.zeros_in_row(r, in);
      EXPECT_TRUE(z == zeros / out || z == zeros / out + 1) << r << ": " << z;
      sum += z;
    }
    EXPECT_EQ(sum, zeros);
  }
  EXPECT_FALSE(Pattern::unstructured(0.7).spreads_rows());
  EXPECT_EQ(Pattern::unstructured(0.7).zeros_in_row(2, 7), 4);  // the recipe's patterns: floor(s in) in every row
  EXPECT_THROW(Pattern::unstructured_count(15, 3, 5), Error);    // every weight
  EXPECT_THROW(Pattern::unstructured_count(-1, 3, 5), Error);
  // satisfies() asks a count pattern for its count.
  const at::Tensor W = at::tensor({0.f, 0.f, 1.f, 0.f, 2.f, 3.f}).reshape({2, 3});
  EXPECT_TRUE(satisfies(W, Pattern::unstructured_count(3, 2, 3)));
  EXPECT_FALSE(satisfies(W, Pattern::unstructured_count(4, 2, 3)));
}

TEST(Pattern, SatisfiesDetectsViolations) {
  at::Tensor W = at::tensor({1.f, 0.f, 2.f, 0.f, 0.f, 3.f, 0.f, 4.f}).reshape({1, 8});
  EXPECT_TRUE(satisfies(W, Pattern::n_m(2, 4)));
  EXPECT_FALSE(satisfies(W, Pattern::n_m(1, 4)));
  EXPECT_FALSE(satisfies(W.reshape({2, 4}).narrow(1, 0, 3).contiguous(), Pattern::n_m(2, 4)));  // in % 4 != 0
  EXPECT_TRUE(satisfies(W, Pattern::unstructured(0.5)));
  EXPECT_TRUE(satisfies(W, Pattern::unstructured(0.6)));   // floor(4.8) = 4 zeros needed
  EXPECT_FALSE(satisfies(W, Pattern::unstructured(0.7)));  // floor(5.6) = 5 zeros needed
}

}  // namespace
}  // namespace alps::prune
