#include "alps/pipeline/model_card.h"

#include <gtest/gtest.h>

#include <string>

namespace alps::pipeline {
namespace {

report::RunReport sample_report(const std::string& method) {
  report::RunReport r;
  r.model = "/models/Llama-2-7b-hf";
  r.recipe = {{"method", method}, {"pattern", "0.7"}};
  r.blocks_done = r.blocks_total = 1;
  report::LayerReport l;
  l.name = "model.layers.0.mlp.down_proj";
  l.shape = {4, 8};
  l.method = method;
  l.pattern = "0.7";
  l.sparsity = 0.75;
  r.layers.push_back(l);
  return r;
}

// The Hub reads a card's YAML metadata only from its very first line: the note goes after it, before the text.
TEST(ModelCard, TheNoteGoesAfterTheMetadataAndBeforeTheText) {
  const std::string card = "---\nlicense: llama2\ntags:\n- text-generation\n---\n# Llama 2\n\nThe dense model.\n";
  const std::string noted = model_card_with_note(card, sample_report("alps"));
  EXPECT_EQ(noted.rfind("---\nlicense: llama2\ntags:\n- text-generation\n---\n<!-- alps: pruning note -->\n", 0), 0u)
      << noted;
  EXPECT_NE(noted.find("from `Llama-2-7b-hf`: alps 0.7: 1 linear layers pruned (0 left dense) in 1/1 blocks, "
                       "linear-layer sparsity 75.00%"),
            std::string::npos)
      << noted;
  EXPECT_NE(noted.find("alps-report.json"), std::string::npos);
  EXPECT_EQ(noted.substr(noted.size() - 28), "# Llama 2\n\nThe dense model.\n");

  // Pruned again: one note, the newer one.
  const std::string again = model_card_with_note(noted, sample_report("wanda"));
  EXPECT_EQ(again.find("alps 0.7:"), std::string::npos) << again;
  EXPECT_NE(again.find("wanda 0.7:"), std::string::npos) << again;
  EXPECT_EQ(again.find("<!-- alps: pruning note -->"), again.rfind("<!-- alps: pruning note -->"));
  EXPECT_EQ(again.size(), noted.size() + std::string("wanda").size() - std::string("alps").size());
}

TEST(ModelCard, NoCardGetsMetadataForTheHubAndTheNote) {
  const std::string card = model_card_with_note("", sample_report("alps"));
  EXPECT_EQ(card.rfind("---\nbase_model: Llama-2-7b-hf\ntags:\n- alps\n- pruned\n- alps\nalps_recipe: "
                       "{\"method\":\"alps\",\"pattern\":\"0.7\"}\n---\n<!-- alps: pruning note -->\n",
                       0),
            0u)
      << card;
  // Nothing follows the note: it does not say that something does.
  EXPECT_EQ(card.find("What follows"), std::string::npos) << card;
  EXPECT_NE(card.find("The recipe, every layer's sparsity"), std::string::npos) << card;
  const std::string end = "<!-- alps: end of pruning note -->\n";
  EXPECT_EQ(card.substr(card.size() - end.size()), end);
  // Pruned again: the metadata is the new run's (its input is the earlier output), not stacked.
  report::RunReport again_report = sample_report("wanda");
  again_report.model = "/models/llama-pruned";
  const std::string again = model_card_with_note(card, again_report);
  EXPECT_EQ(again.rfind("---\nbase_model: llama-pruned\n", 0), 0u) << again;
  EXPECT_EQ(again.find("Llama-2-7b-hf"), std::string::npos) << again;
  EXPECT_EQ(again.find("---", 4), again.rfind("---")) << again;  // one metadata block
}

}  // namespace
}  // namespace alps::pipeline
