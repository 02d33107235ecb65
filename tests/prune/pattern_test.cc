#include "alps/prune/pattern.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

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
