// BPE segmentation with the exact merge order of SentencePiece's bpe::Model::Encode, so ids
// match spm_encode: a max-heap of adjacent pairs ordered by (score desc, left position asc);
// stale entries (a side already merged away) are recognised by their length and skipped.
#include <cstdint>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "common/engine/tokenizer/segmenters.h"
#include "common/engine/tokenizer/utf8.h"

namespace splitspec::engine::tokenizer_internal {
namespace {

struct Symbol {
  int prev = -1;
  int next = -1;
  bool frozen = false;     // a user-defined symbol: never merged
  std::string_view text;   // empty once merged into its left neighbour
};

struct Pair {
  float score;
  int left;
  int right;
  size_t size;  // bytes of the merged text, to detect stale entries
};

struct PairOrder {
  bool operator()(const Pair& a, const Pair& b) const {
    // "a has lower priority than b".
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

std::vector<Segment> SegmentBpe(const Vocab& vocab, std::string_view normalized) {
  std::vector<Segment> out;
  if (normalized.empty()) return out;

  std::vector<Symbol> symbols;
  symbols.reserve(normalized.size());
  const PrefixMatcher& user_defined = vocab.user_defined();
  for (std::string_view rest = normalized; !rest.empty();) {
    Symbol s;
    size_t len = user_defined.empty() ? 0 : user_defined.LongestMatch(rest);
    s.frozen = len > 0;
    if (len == 0) len = OneCharLen(rest);
    s.text = rest.substr(0, len);
    rest.remove_prefix(len);
    const int index = static_cast<int>(symbols.size());
    s.prev = index - 1;
    s.next = rest.empty() ? -1 : index + 1;
    symbols.push_back(s);
  }

  std::priority_queue<Pair, std::vector<Pair>, PairOrder> agenda;
  // Merged UNUSED pieces are split back into their parts at the end, as SentencePiece does;
  // this remembers what each was made of.
  absl::flat_hash_map<std::string_view, std::pair<std::string_view, std::string_view>> unmerge;

  auto maybe_add_pair = [&](int left, int right) {
    if (left < 0 || right < 0 || symbols[left].frozen || symbols[right].frozen) return;
    // Adjacent live symbols are contiguous in `normalized`.
    const std::string_view merged(symbols[left].text.data(),
                                  symbols[left].text.size() + symbols[right].text.size());
    const int32_t id = vocab.FindSegmentable(merged);
    if (id < 0) return;
    agenda.push(Pair{vocab.piece(id).score, left, right, merged.size()});
    if (vocab.IsType(id, PieceType::kUnused)) {
      unmerge[merged] = {symbols[left].text, symbols[right].text};
    }
  };

  for (size_t i = 1; i < symbols.size(); ++i) {
    maybe_add_pair(static_cast<int>(i) - 1, static_cast<int>(i));
  }

  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.text.empty() || right.text.empty() ||
        left.text.size() + right.text.size() != top.size) {
      continue;  // stale
    }
    left.text = std::string_view(left.text.data(), top.size);
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.text = std::string_view();
    maybe_add_pair(left.prev, top.left);
    maybe_add_pair(top.left, left.next);
  }

  // Emits `text`, splitting merged UNUSED pieces back into their parts.
  std::vector<std::string_view> stack;
  for (int i = 0; i != -1; i = symbols[i].next) {
    stack.push_back(symbols[i].text);
    while (!stack.empty()) {
      const std::string_view text = stack.back();
      stack.pop_back();
      const int32_t id = vocab.PieceToId(text);
      if (vocab.IsType(id, PieceType::kUnused)) {
        if (const auto it = unmerge.find(text); it != unmerge.end()) {
          stack.push_back(it->second.second);
          stack.push_back(it->second.first);
          continue;
        }
      }
      out.emplace_back(text, id);
    }
  }
  return out;
}

}  // namespace splitspec::engine::tokenizer_internal
