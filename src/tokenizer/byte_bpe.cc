#include "alps/tokenizer/byte_bpe.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "alps/core/error.h"
#include "tokenizer/byte_map.h"
#include "tokenizer/regex.h"

namespace alps::tokenizer {

const char kGpt2SplitPattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

using Behavior = PreTokenizeStep::Behavior;

struct Range {
  size_t begin, end;
  bool is_match;
};

// tokenizers' NormalizedString::split: the regex cuts the piece into alternating matches and gaps, and the
// behaviour decides how matches are kept (the fold over ranges mirrors the Rust implementation).
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

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_ascii_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

class ByteBpe final : public Tokenizer {
 public:
  explicit ByteBpe(ByteBpeSpec spec);

  std::vector<int64_t> encode(std::string_view text, bool add_special) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_bytes_.size()); }
  std::optional<int64_t> bos_id() const override { return spec_.bos_id; }
  std::optional<int64_t> eos_id() const override { return spec_.eos_id; }
  std::string kind() const override { return "byte-bpe"; }

 private:
  struct Segment {
    size_t begin, end;
    int64_t added_id;  // -1: ordinary text
  };
  std::vector<Segment> split_added_tokens(std::string_view text) const;
  std::vector<std::string> pre_tokenize(std::string_view segment) const;
  void encode_word(const std::string& word, std::vector<int64_t>& out) const;
  std::vector<int32_t> merge_word(const std::string& word) const;

  ByteBpeSpec spec_;
  std::unordered_map<std::string, int32_t> vocab_;  // byte-level token string -> id
  std::vector<std::string> id_to_bytes_;           // what each id decodes to
  std::vector<uint8_t> is_special_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (left, right) -> (rank, merged id)
  std::array<int32_t, 256> byte_id_{};  // id of each single byte's token, -1 when missing
  std::vector<std::unique_ptr<Regex>> regexes_;  // one per pre_tokenize step (null for kPrefixSpace)
  std::array<std::vector<size_t>, 256> added_by_first_byte_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

ByteBpe::ByteBpe(ByteBpeSpec spec) : spec_(std::move(spec)) {
  const auto& src = spec_.source;
  ALPS_CHECK(!spec_.vocab.empty(), src, ": the vocabulary is empty");
  // Ids index a dense table: bound them so a corrupt file cannot ask for gigabytes.
  constexpr int64_t kMaxId = 1 << 24;
  int64_t max_id = -1;
  vocab_.reserve(spec_.vocab.size());
  for (const auto& [token, id] : spec_.vocab) {
    ALPS_CHECK(id >= 0 && id < kMaxId, src, ": token '", token, "' has id ", id, ", expected 0 <= id < ", kMaxId);
    vocab_[token] = static_cast<int32_t>(id);
    max_id = std::max(max_id, id);
  }
  for (const auto& added : spec_.added_tokens) {
    ALPS_CHECK(added.id >= 0 && added.id < kMaxId, src, ": added token '", added.content, "' has id ", added.id);
    ALPS_CHECK(!added.content.empty(), src, ": added token with id ", added.id, " has empty content");
    max_id = std::max(max_id, added.id);
  }
  id_to_bytes_.assign(static_cast<size_t>(max_id + 1), std::string());
  is_special_.assign(id_to_bytes_.size(), 0);
  for (const auto& [token, id] : spec_.vocab) id_to_bytes_[id] = byte_level_to_bytes(token);
  for (size_t i = 0; i < spec_.added_tokens.size(); ++i) {
    const auto& added = spec_.added_tokens[i];
    id_to_bytes_[added.id] = added.content;
    is_special_[added.id] = added.special ? 1 : 0;
    added_by_first_byte_[static_cast<unsigned char>(added.content[0])].push_back(i);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(byte_to_unicode(static_cast<uint8_t>(b)));
    byte_id_[b] = it == vocab_.end() ? -1 : it->second;
  }
  merges_.reserve(spec_.merges.size());
  for (size_t rank = 0; rank < spec_.merges.size(); ++rank) {
    const auto& [left, right] = spec_.merges[rank];
    auto l = vocab_.find(left), r = vocab_.find(right), m = vocab_.find(left + right);
    ALPS_CHECK(l != vocab_.end() && r != vocab_.end(), src, ": merge ", rank + 1, " '", left, " ", right,
               "' uses a token that is not in the vocabulary");
    ALPS_CHECK(m != vocab_.end(), src, ": merge ", rank + 1, " '", left, " ", right, "' produces '", left + right,
               "', which is not in the vocabulary");
    // tokenizers keeps the first rank of a repeated merge.
    merges_.emplace(pair_key(l->second, r->second), std::make_pair(static_cast<int32_t>(rank), m->second));
  }
  for (const auto& step : spec_.pre_tokenize) {
    regexes_.push_back(step.kind == PreTokenizeStep::Kind::kSplit ? std::make_unique<Regex>(step.pattern) : nullptr);
  }
  for (auto id : spec_.prefix_ids) ALPS_CHECK(id >= 0 && id <= max_id, src, ": special id ", id, " out of range");
  for (auto id : spec_.suffix_ids) ALPS_CHECK(id >= 0 && id <= max_id, src, ": special id ", id, " out of range");
}

// Added tokens are found before pre-tokenisation, leftmost-longest (tokenizers' AddedVocabulary).
std::vector<ByteBpe::Segment> ByteBpe::split_added_tokens(std::string_view text) const {
  std::vector<Segment> segments;
  size_t text_start = 0, i = 0;
  const size_t n = text.size();
  while (i < n) {
    const AddedToken* best = nullptr;
    for (size_t k : added_by_first_byte_[static_cast<unsigned char>(text[i])]) {
      const auto& a = spec_.added_tokens[k];
      const bool longer = best == nullptr || a.content.size() > best->content.size();
      if (longer && text.substr(i, a.content.size()) == a.content) {
        if (a.single_word) {
          const size_t after = i + a.content.size();
          if ((i > 0 && is_ascii_word(text[i - 1])) || (after < n && is_ascii_word(text[after]))) continue;
        }
        best = &a;
      }
    }
    if (best == nullptr) {
      ++i;
      continue;
    }
    size_t begin = i, end = i + best->content.size();
    if (best->lstrip)
      while (begin > text_start && is_ascii_space(text[begin - 1])) --begin;
    if (best->rstrip)
      while (end < n && is_ascii_space(text[end])) ++end;
    if (begin > text_start) segments.push_back({text_start, begin, -1});
    segments.push_back({begin, end, best->id});
    text_start = i = end;
  }
  if (text_start < n) segments.push_back({text_start, n, -1});
  return segments;
}

std::vector<std::string> ByteBpe::pre_tokenize(std::string_view segment) const {
  std::vector<std::string> pieces{std::string(segment)};
  for (size_t s = 0; s < spec_.pre_tokenize.size(); ++s) {
    const auto& step = spec_.pre_tokenize[s];
    if (step.kind == PreTokenizeStep::Kind::kPrefixSpace) {
      for (auto& piece : pieces)
        if (piece.empty() || piece[0] != ' ') piece = " " + piece;
      continue;
    }
    std::vector<std::string> next;
    next.reserve(pieces.size());
    for (const auto& piece : pieces) {
      std::vector<Range> ranges;
      size_t previous = 0;
      for (const auto& [b, e] : regexes_[s]->find_all(piece)) {
        if (b > previous) ranges.push_back({previous, b, step.invert});
        ranges.push_back({b, e, !step.invert});
        previous = e;
      }
      if (previous < piece.size()) ranges.push_back({previous, piece.size(), step.invert});
      for (const auto& r : apply_behavior(std::move(ranges), step.behavior))
        if (r.end > r.begin) next.emplace_back(piece, r.begin, r.end - r.begin);
    }
    pieces = std::move(next);
  }
  return pieces;
}

// BPE on one pre-token, as tokenizers' Word::merge_all: a min-heap of candidate merges ordered by (rank, position),
// stale entries skipped when popped, so a long word costs O(n log n) rather than O(n^2).
std::vector<int32_t> ByteBpe::merge_word(const std::string& word) const {
  struct Symbol {
    int32_t id, prev, next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (unsigned char byte : word) {
    int32_t id = byte_id_[byte];
    if (id < 0) {
      if (!spec_.unk_id) continue;
      id = static_cast<int32_t>(*spec_.unk_id);
    }
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1});
  }
  if (symbols.empty()) return {};
  symbols.back().next = -1;

  using Candidate = std::tuple<int32_t, int32_t, int32_t>;  // rank, position, merged id
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push_pair = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    auto it = merges_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) queue.emplace(it->second.first, pos, it->second.second);
  };
  for (int32_t pos = 0; pos + 1 < static_cast<int32_t>(symbols.size()); ++pos) push_pair(pos);
  std::vector<uint8_t> removed(symbols.size(), 0);
  while (!queue.empty()) {
    const auto [rank, pos, merged] = queue.top();
    queue.pop();
    if (removed[pos] || symbols[pos].next < 0) continue;
    const int32_t next = symbols[pos].next;
    auto it = merges_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it == merges_.end() || it->second.second != merged) continue;  // the pair changed since it was queued
    symbols[pos].id = merged;
    symbols[pos].next = symbols[next].next;
    removed[next] = 1;
    if (symbols[pos].next >= 0) symbols[symbols[pos].next].prev = pos;
    if (symbols[pos].prev >= 0) push_pair(symbols[pos].prev);
    push_pair(pos);
  }
  std::vector<int32_t> ids;
  for (int32_t pos = 0; pos >= 0; pos = symbols[pos].next) ids.push_back(symbols[pos].id);
  return ids;
}

void ByteBpe::encode_word(const std::string& word, std::vector<int64_t>& out) const {
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  bool whole = false;
  if (spec_.ignore_merges) {
    std::string mapped;
    for (unsigned char byte : word) mapped += byte_to_unicode(byte);
    if (auto it = vocab_.find(mapped); it != vocab_.end()) {
      ids.push_back(it->second);
      whole = true;
    }
  }
  if (!whole) ids = merge_word(word);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  // Bounded so that a long-running process tokenising arbitrary text does not grow without limit.
  if (cache_.size() >= (1u << 20)) cache_.clear();
  cache_.emplace(word, std::move(ids));
}

std::vector<int64_t> ByteBpe::encode(std::string_view text, bool add_special) const {
  const size_t bad = find_invalid_utf8(text);
  ALPS_CHECK(bad == std::string_view::npos, "text to tokenize is not valid UTF-8 (byte offset ", bad, ")");
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special) ids.insert(ids.end(), spec_.prefix_ids.begin(), spec_.prefix_ids.end());
  for (const auto& segment : split_added_tokens(text)) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
      continue;
    }
    for (const auto& word : pre_tokenize(text.substr(segment.begin, segment.end - segment.begin)))
      encode_word(word, ids);
  }
  if (add_special) ids.insert(ids.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
  return ids;
}

std::string ByteBpe::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  for (int64_t id : ids) {
    ALPS_CHECK(id >= 0 && id < vocab_size(), "decode: token id ", id, " is outside the vocabulary [0, ", vocab_size(),
               ") of ", spec_.source);
    if (!is_special_[id]) text += id_to_bytes_[id];
  }
  return text;
}

}  // namespace

std::unique_ptr<Tokenizer> make_byte_bpe(ByteBpeSpec spec) { return std::make_unique<ByteBpe>(std::move(spec)); }

}  // namespace alps::tokenizer
