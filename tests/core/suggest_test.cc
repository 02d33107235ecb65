#include "alps/core/suggest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace alps {
namespace {

// The typos users make: a letter dropped, added, swapped with its neighbour, a case or '-' for '_'.
TEST(Suggest, FindsTheNameATypoMeant) {
  const std::vector<std::string> methods = {"alps", "dsnot", "magnitude", "sparsegpt", "wanda"};
  EXPECT_EQ(closest_name("sparsgpt", methods), "sparsegpt");
  EXPECT_EQ(closest_name("wnada", methods), "wanda");
  EXPECT_EQ(closest_name("SparseGPT", methods), "sparsegpt");
  const std::vector<std::string> names = {"wikitext2", "ptb", "c4", "arc_easy", "arc_challenge"};
  EXPECT_EQ(closest_name("arc-easy", names), "arc_easy");
  EXPECT_EQ(closest_name("wikitext", names), "wikitext2");
  EXPECT_EQ(did_you_mean("wikitext", names), " (did you mean 'wikitext2'?)");
}

// A name far from every known one gets no suggestion rather than a misleading one.
TEST(Suggest, SuggestsNothingForAnUnrelatedName) {
  const std::vector<std::string> methods = {"alps", "dsnot", "magnitude", "sparsegpt", "wanda"};
  EXPECT_EQ(closest_name("obc", methods), "");
  EXPECT_EQ(closest_name("llm-pruner", methods), "");
  EXPECT_EQ(did_you_mean("x", {}), "");
  // One edit allowed per three characters: "ptb" -> "ppl" is two edits in three.
  EXPECT_EQ(closest_name("ppl", {"ptb"}), "");
}

}  // namespace
}  // namespace alps
