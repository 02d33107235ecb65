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

std::string note(const report::RunReport& r) {
  const BuildInfo info = build_info();
  std::ostringstream os;
  os << kBegin << "\n"
     << "> **Pruned with alps " << info.alps_version << "** (source " << info.source_revision << ") from `"
     << fs::path(r.model).filename().string() << "`: " << report::pruning_description(r) << ". "
     << "What follows describes the dense model it was pruned from; the recipe, every layer's sparsity and error"
     << (r.eval.empty() ? "" : ", and the evaluation of the pruned model,") << " are in `" << kReportFile << "`.\n"
     << kEnd << "\n";
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
  const std::string n = note(report);
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
