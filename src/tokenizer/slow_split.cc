#include "tokenizer/slow_split.h"

#include "alps/core/py_text.h"

namespace alps::tokenizer {
namespace {

const AddedToken* find(const std::vector<AddedToken>& tokens, const std::string& text) {
  for (const auto& token : tokens)
    if (token.content == text) return &token;
  return nullptr;
}

}  // namespace

std::vector<SlowPiece> split_at_added_tokens(std::string_view text, const std::vector<AddedToken>& tokens) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    size_t longest = 0;
    for (const auto& token : tokens)
      if (token.content.size() > longest && text.substr(i, token.content.size()) == token.content)
        longest = token.content.size();
    if (longest == 0) {
      ++i;
      continue;
    }
    if (i > start) parts.emplace_back(text.substr(start, i - start));
    parts.emplace_back(text.substr(i, longest));
    start = i += longest;
  }
  if (start < text.size()) parts.emplace_back(text.substr(start));

  // As transformers does it: in order, each part judged by its current text, edits reaching later parts included.
  for (size_t i = 0; i < parts.size(); ++i) {
    const AddedToken* token = find(tokens, parts[i]);
    if (token == nullptr) continue;
    // `left` and `right` are the neighbours as they were before this token's edits, as in transformers.
    const std::string left = i > 0 ? parts[i - 1] : std::string(), right = i + 1 < parts.size() ? parts[i + 1] : "";
    if (token->rstrip && !right.empty()) parts[i + 1] = std::string(py_lstrip(right));
    if (token->lstrip && !left.empty()) parts[i - 1] = std::string(py_rstrip(left));
    if (token->single_word && !left.empty() && left.back() != ' ') {
      parts[i - 1] += parts[i];
      parts[i].clear();
    } else if (token->single_word && !right.empty() && right.front() != ' ') {
      parts[i + 1] = parts[i] + parts[i + 1];  // the neighbour as the strips left it, now plain text
      parts[i].clear();
    }
  }

  std::vector<SlowPiece> pieces;
  for (auto& part : parts) {
    if (part.empty()) continue;
    const AddedToken* token = find(tokens, part);
    pieces.push_back({std::move(part), token != nullptr ? token->id : -1});
  }
  return pieces;
}

}  // namespace alps::tokenizer
