#include "alps/tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "alps/core/error.h"
#include "alps/core/utf8.h"
#include "tokenizer/byte_map.h"
#include "tokenizer/regex.h"

namespace alps::tokenizer {

const char kGpt2SplitPattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

using Kind = PreTokenizeStep::Kind;
using Behavior = PreTokenizeStep::Behavior;

struct Range {
  size_t begin, end;
  bool is_match;
};

// tokenizers' NormalizedString::split: the matches and the gaps between them alternate, and the behaviour decides
// how the matches are kept (the folds over the ranges follow the Rust implementation).
std::vector<Range> apply_behavior(std::vector<Range> ranges, Behavior behavior) {
  std::vector<Range> out;
  switch (behavior) {
    case Behavior::kIsolated:
      return ranges;
    case Behavior::kRemoved:
      for (const auto& r : ranges)
        if (!r.is_match) out.push_back(r);
      return out;
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& r : ranges) {
        if (r.is_match && !previous_match && !out.empty()) {
          out.back().end = r.end;
        } else {
          out.push_back(r);
        }
        previous_match = r.is_match;
      }
      return out;
    }
    case Behavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      return out;
    }
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const auto& r : ranges) {
        if (r.is_match == previous_match && !out.empty()) {
          out.back().end = r.end;
        } else {
          out.push_back(r);
        }
        previous_match = r.is_match;
      }
      return out;
    }
  }
  return out;
}

// Cuts `piece` at `matches` ([begin, end) byte ranges, ascending) and appends the kept pieces to `out`.
void split_piece(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& matches, Behavior behavior,
                 bool invert, std::vector<Piece>& out) {
  std::vector<Range> ranges;
  size_t previous = 0;
  for (const auto& [b, e] : matches) {
    if (b > previous) ranges.push_back({previous, b, invert});
    ranges.push_back({b, e, !invert});
    previous = e;
  }
  if (previous < piece.text.size()) ranges.push_back({previous, piece.text.size(), invert});
  for (const auto& r : apply_behavior(std::move(ranges), behavior))
    if (r.end > r.begin) out.push_back({piece.text.substr(r.begin, r.end - r.begin), piece.at_start && r.begin == 0});
}

std::vector<std::pair<size_t, size_t>> literal_matches(std::string_view text, std::string_view literal) {
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t at = text.find(literal); at != std::string_view::npos; at = text.find(literal, at + literal.size()))
    matches.emplace_back(at, at + literal.size());
  return matches;
}

}  // namespace

PreTokenizer::PreTokenizer(std::vector<PreTokenizeStep> steps, const std::string& source) : steps_(std::move(steps)) {
  for (const auto& step : steps_) {
    if (step.kind == Kind::kMetaspace) {
      size_t i = 0;
      ALPS_CHECK(!step.replacement.empty() && (next_code_point(step.replacement, i), i == step.replacement.size()),
                 source, ": Metaspace replacement must be one character, got '", step.replacement, "'");
    }
    regexes_.push_back(
        step.kind == Kind::kSplit ? std::make_unique<Regex>(step.pattern, source + ": pre_tokenizer Split") : nullptr);
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<Piece> PreTokenizer::apply(Piece text) const {
  std::vector<Piece> pieces;
  if (!text.text.empty()) pieces.push_back(std::move(text));
  for (size_t s = 0; s < steps_.size(); ++s) {
    const auto& step = steps_[s];
    switch (step.kind) {
      case Kind::kPrefixSpace:
        for (auto& piece : pieces)
          if (piece.text[0] != ' ') piece.text.insert(0, 1, ' ');
        break;
      case Kind::kByteLevel:
        for (auto& piece : pieces) {
          std::string mapped;
          mapped.reserve(piece.text.size() + piece.text.size() / 2);
          for (unsigned char byte : piece.text) mapped += byte_to_unicode(byte);
          piece.text = std::move(mapped);
        }
        break;
      case Kind::kSplit: {
        std::vector<Piece> next;
        next.reserve(pieces.size());
        for (const auto& piece : pieces)
          split_piece(piece, regexes_[s]->find_all(piece.text), step.behavior, step.invert, next);
        pieces = std::move(next);
        break;
      }
      case Kind::kMetaspace: {
        std::vector<Piece> next;
        next.reserve(pieces.size());
        for (auto& piece : pieces) {
          piece.text = replace_all(piece.text, " ", step.replacement);
          const bool starts = piece.text.compare(0, step.replacement.size(), step.replacement) == 0;
          if (!starts && (step.prepend == PreTokenizeStep::Prepend::kAlways ||
                          (step.prepend == PreTokenizeStep::Prepend::kFirst && piece.at_start)))
            piece.text.insert(0, step.replacement);
          if (step.split) {
            split_piece(piece, literal_matches(piece.text, step.replacement), Behavior::kMergedWithNext, false, next);
          } else {
            next.push_back(std::move(piece));
          }
        }
        pieces = std::move(next);
        break;
      }
    }
  }
  return pieces;
}

}  // namespace alps::tokenizer
