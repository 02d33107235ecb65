#include "alps/pipeline/model_card.h"

#include <fstream>
#include <iterator>
#include <sstream>

#include "alps/core/build_info.h"
#include "alps/core/error.h"
#include "alps/pipeline/output_dir.h"

namespace alps::pipeline {

namespace fs = std::filesystem;

namespace {

// The note is delimited so that pruning a pruned model replaces it instead of stacking a second one.
constexpr const char* kBegin = "<!-- alps: pruning note -->";
constexpr const char* kEnd = "<!-- alps: end of pruning note -->";

// `describes_dense`: the input's own card follows the note.
std::string note(const report::RunReport& r, bool describes_dense) {
  const BuildInfo info = build_info();
  std::ostringstream os;
  os << kBegin << "\n"
     << "> **Pruned with alps " << info.alps_version << "** (source " << info.source_revision << ") from `"
     << fs::path(r.model).filename().string() << "`: " << report::pruning_description(r) << ". "
     << (describes_dense ? "What follows describes the dense model it was pruned from; the recipe" : "The recipe")
     << ", every layer's sparsity and error" << (r.eval.empty() ? "" : ", and the evaluation of the pruned model,")
     << " are in `" << kReportFile << "`.\n"
     << kEnd << "\n";
  return os.str();
}

// The Hub's metadata for a card alps writes itself (the input had none): the model it was pruned from, tags, and the
// recipe as one JSON line (JSON is YAML). Its key marks the block as alps's, so that pruning again replaces it.
constexpr const char* kRecipeKey = "alps_recipe: ";

std::string front_matter(const report::RunReport& r) {
  const std::string method = r.recipe.value("method", "");
  std::ostringstream os;
  os << "---\nbase_model: " << fs::path(r.model).filename().string() << "\ntags:\n- alps\n- pruned\n";
  if (r.extra.contains("structured")) os << "- structured-pruning\n";
  if (!method.empty()) os << "- " << method << "\n";
  os << kRecipeKey << r.recipe.dump() << "\n---\n";
  return os.str();
}

}  // namespace

std::string model_card_with_note(const std::string& text, const report::RunReport& report) {
  std::string card = text;
  if (const size_t b = card.find(kBegin); b != std::string::npos) {
    const size_t e = card.find(kEnd, b);
    if (e != std::string::npos) {
      size_t end = e + std::string(kEnd).size();
      if (end < card.size() && card[end] == '\n') ++end;
      if (end < card.size() && card[end] == '\n') ++end;
      card.erase(b, end - b);
    }
  }
  // A card's YAML metadata ("---" lines around it) must stay first for the Hub to read it.
  size_t at = 0;
  if (card.rfind("---\n", 0) == 0) {
    const size_t close = card.find("\n---\n", 3);
    if (close != std::string::npos) at = close + 5;
  }
  // The metadata alps wrote for an earlier run describes that run's input: it goes, with the note.
  if (at > 0 && card.substr(0, at).find("\n" + std::string(kRecipeKey)) != std::string::npos) {
    card.erase(0, at);
    at = 0;
  }
  if (card.find_first_not_of(" \t\r\n") == std::string::npos) return front_matter(report) + note(report, false);
  const std::string n = note(report, true);
  return card.substr(0, at) + n + (at < card.size() ? "\n" + card.substr(at) : "");
}

void note_pruning_in_model_card(const fs::path& dir, const report::RunReport& report) {
  const fs::path path = dir / kModelCardFile;
  // Read as bytes: a card that is not UTF-8 keeps its bytes, and the run its checkpoint.
  std::string text;
  if (fs::exists(path)) {
    std::ifstream in(path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    ALPS_CHECK(!in.bad(), "read error on ", path.string());
  }
  std::ofstream out(path, std::ios::trunc);
  out << model_card_with_note(text, report);
  ALPS_CHECK(out.good(), "write error on ", path.string());
}

}  // namespace alps::pipeline
