#include "alps/tokenizer/bpe.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <queue>
#include <tuple>
#include <unordered_map>

#include <unicode/uchar.h>

#include "alps/core/error.h"
#include "alps/core/utf8.h"
#include "tokenizer/regex.h"

namespace alps::tokenizer {
namespace {

// Rust regex's \s and \w, with which tokenizers judges the flags of added tokens: White_Space; Alphabetic, marks,
// decimal digits, connector punctuation and Join_Control.
bool is_white_space(uint32_t cp) { return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE) != 0; }
bool is_word_char(uint32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  const int type = u_charType(c);
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || type == U_NON_SPACING_MARK || type == U_ENCLOSING_MARK ||
         type == U_COMBINING_SPACING_MARK || type == U_DECIMAL_DIGIT_NUMBER || type == U_CONNECTOR_PUNCTUATION ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

class Bpe final : public Tokenizer {
 public:
  explicit Bpe(BpeSpec spec);

  std::vector<int64_t> encode(std::string_view text, bool add_special) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  std::optional<int64_t> bos_id() const override { return spec_.bos_id; }
  std::optional<int64_t> eos_id() const override { return spec_.eos_id; }
  std::string kind() const override { return spec_.kind; }

 private:
  struct Segment {
    size_t begin, end;
    int64_t added_id;  // -1: ordinary text
  };
  // Added tokens of one kind (matched in the raw or in the normalized text), indexed by first byte.
  struct AddedMatcher {
    std::vector<const AddedToken*> tokens;
    std::vector<std::string> patterns;  // what is matched: the content, normalized for normalized tokens
    std::array<std::vector<size_t>, 256> by_first_byte;
    std::vector<Segment> split(std::string_view text) const;
  };
  void encode_text(std::string_view text, bool at_start, std::vector<int64_t>& ids) const;
  void encode_word(const std::string& word, std::vector<int64_t>& out) const;
  std::vector<int32_t> initial_symbols(const std::string& word) const;
  std::vector<int32_t> merge_word(const std::string& word) const;

  BpeSpec spec_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  Decoder decoder_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;  // the string each id stands for, as the decoder receives it
  std::vector<uint8_t> is_special_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // (left, right) -> (rank, merged id)
  std::array<int32_t, 128> ascii_id_{};  // id of each single ASCII character, -1 when missing
  std::array<int32_t, 256> fallback_id_{};  // id of "<0xAB>" for byte AB, -1 when missing
  AddedMatcher raw_added_, normalized_added_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

Bpe::Bpe(BpeSpec spec)
    : spec_(std::move(spec)),
      normalizer_(spec_.normalizer, spec_.source),
      pre_tokenizer_(spec_.pre_tokenize, spec_.source),
      decoder_(spec_.decoder, spec_.source) {
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
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  is_special_.assign(id_to_token_.size(), 0);
  for (const auto& [token, id] : spec_.vocab) id_to_token_[id] = token;
  for (const auto& added : spec_.added_tokens) {
    // tokenizers normalizes the content of a normalized added token: that is what it looks for in normalized text
    // and what the decoder receives for its id.
    std::string pattern = added.normalized ? normalizer_.apply(added.content) : added.content;
    id_to_token_[added.id] = pattern;
    is_special_[added.id] = added.special ? 1 : 0;
    auto& matcher = added.normalized ? normalized_added_ : raw_added_;
    if (pattern.empty()) continue;
    matcher.by_first_byte[static_cast<unsigned char>(pattern[0])].push_back(matcher.tokens.size());
    matcher.tokens.push_back(&added);
    matcher.patterns.push_back(std::move(pattern));
  }
  for (int c = 0; c < 128; ++c) {
    auto it = vocab_.find(std::string(1, static_cast<char>(c)));
    ascii_id_[c] = it == vocab_.end() ? -1 : it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = vocab_.find(name);
    fallback_id_[b] = it == vocab_.end() ? -1 : it->second;
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
  if (spec_.unk_id)
    ALPS_CHECK(*spec_.unk_id >= 0 && *spec_.unk_id <= max_id, src, ": unk id ", *spec_.unk_id, " out of range");
  for (auto id : spec_.prefix_ids) ALPS_CHECK(id >= 0 && id <= max_id, src, ": special id ", id, " out of range");
  for (auto id : spec_.suffix_ids) ALPS_CHECK(id >= 0 && id <= max_id, src, ": special id ", id, " out of range");
}

// Added tokens are found before pre-tokenisation, leftmost-longest (tokenizers' AddedVocabulary). A single_word
// match that touches a word is dropped but still consumed: no shorter token is looked for inside it.
std::vector<Bpe::Segment> Bpe::AddedMatcher::split(std::string_view text) const {
  std::vector<Segment> segments;
  if (tokens.empty()) {
    if (!text.empty()) segments.push_back({0, text.size(), -1});
    return segments;
  }
  size_t text_start = 0, i = 0;
  const size_t n = text.size();
  while (i < n) {
    const AddedToken* best = nullptr;
    size_t best_size = 0;
    for (size_t k : by_first_byte[static_cast<unsigned char>(text[i])]) {
      const std::string& pattern = patterns[k];
      if (pattern.size() > best_size && text.substr(i, pattern.size()) == pattern) {
        best = tokens[k];
        best_size = pattern.size();
      }
    }
    if (best == nullptr) {
      ++i;
      continue;
    }
    if (best->single_word) {
      size_t before = i, after = i + best_size;
      const bool joins_left = before > 0 && is_word_char(previous_code_point(text, before));
      const bool joins_right = after < n && is_word_char(next_code_point(text, after));
      if (joins_left || joins_right) {
        i += best_size;
        continue;
      }
    }
    size_t begin = i, end = i + best_size;
    if (best->lstrip) {
      for (size_t at = begin; at > text_start && is_white_space(previous_code_point(text, at));) begin = at;
    }
    if (best->rstrip) {
      for (size_t at = end; at < n && is_white_space(next_code_point(text, at));) end = at;
    }
    if (begin > text_start) segments.push_back({text_start, begin, -1});
    segments.push_back({begin, end, best->id});
    text_start = i = end;
  }
  if (text_start < n) segments.push_back({text_start, n, -1});
  return segments;
}

// The symbols a word starts from, one per character: its vocab id, else its "<0xAB>" byte ids (byte_fallback),
// else unk (consecutive ones fused with fuse_unk), else nothing (tokenizers' BPE::merge_word).
std::vector<int32_t> Bpe::initial_symbols(const std::string& word) const {
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  bool previous_unk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t begin = i;
    const auto lead = static_cast<unsigned char>(word[i]);
    int32_t id = -1;
    if (lead < 0x80) {
      id = ascii_id_[lead];
      ++i;
    } else {
      i = std::min(word.size(), i + utf8_length(lead));
      auto it = vocab_.find(word.substr(begin, i - begin));
      if (it != vocab_.end()) id = it->second;
    }
    if (id >= 0) {
      ids.push_back(id);
      previous_unk = false;
      continue;
    }
    if (spec_.byte_fallback) {
      bool all = true;
      for (size_t k = begin; k < i; ++k) all &= fallback_id_[static_cast<unsigned char>(word[k])] >= 0;
      if (all) {
        for (size_t k = begin; k < i; ++k) ids.push_back(fallback_id_[static_cast<unsigned char>(word[k])]);
        previous_unk = false;
        continue;
      }
    }
    if (spec_.unk_id) {
      if (!(spec_.fuse_unk && previous_unk)) ids.push_back(static_cast<int32_t>(*spec_.unk_id));
      previous_unk = true;
    }
  }
  return ids;
}

// BPE on one word, as tokenizers' Word::merge_all: a min-heap of candidate merges ordered by (rank, position),
// stale entries skipped when popped, so a long word costs O(n log n) rather than O(n^2).
std::vector<int32_t> Bpe::merge_word(const std::string& word) const {
  struct Symbol {
    int32_t id, prev, next;
  };
  const std::vector<int32_t> initial = initial_symbols(word);
  if (initial.empty()) return {};
  std::vector<Symbol> symbols;
  symbols.reserve(initial.size());
  for (int32_t id : initial) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1});
  }
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

void Bpe::encode_word(const std::string& word, std::vector<int64_t>& out) const {
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  auto whole = spec_.ignore_merges ? vocab_.find(word) : vocab_.end();
  if (whole != vocab_.end()) {
    ids.push_back(whole->second);
  } else {
    ids = merge_word(word);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  // Bounded so that a long-running process tokenising arbitrary text does not grow without limit.
  if (cache_.size() >= (1u << 20)) cache_.clear();
  cache_.emplace(word, std::move(ids));
}

// One stretch of input between raw added tokens: normalized, split on the normalized added tokens, pre-tokenized.
void Bpe::encode_text(std::string_view text, bool at_start, std::vector<int64_t>& ids) const {
  const std::string normalized = normalizer_.apply(text);
  for (const auto& segment : normalized_added_.split(normalized)) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
      continue;
    }
    Piece piece{normalized.substr(segment.begin, segment.end - segment.begin), at_start && segment.begin == 0};
    for (const auto& word : pre_tokenizer_.apply(std::move(piece))) encode_word(word.text, ids);
  }
}

std::vector<int64_t> Bpe::encode(std::string_view text, bool add_special) const {
  const size_t bad = find_invalid_utf8(text);
  ALPS_CHECK(bad == std::string_view::npos, "text to tokenize is not valid UTF-8 (byte offset ", bad, ")");
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special) ids.insert(ids.end(), spec_.prefix_ids.begin(), spec_.prefix_ids.end());
  for (const auto& segment : raw_added_.split(text)) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
    } else {
      encode_text(text.substr(segment.begin, segment.end - segment.begin), segment.begin == 0, ids);
    }
  }
  if (add_special) ids.insert(ids.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
  return ids;
}

std::string Bpe::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    ALPS_CHECK(id >= 0 && id < vocab_size(), "decode: token id ", id, " is outside the vocabulary [0, ", vocab_size(),
               ") of ", spec_.source);
    if (!is_special_[id]) tokens.push_back(id_to_token_[id]);
  }
  return decoder_.decode(std::move(tokens));
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe(BpeSpec spec) { return std::make_unique<Bpe>(std::move(spec)); }

}  // namespace alps::tokenizer
