// Unigram segmentation as SentencePiece's unigram::Model::EncodeOptimized: one forward pass
// keeping, for every end position, the best-scoring path; ties keep the first path found.
#include <algorithm>
#include <cstdint>

#include "common/engine/tokenizer/segmenters.h"
#include "common/engine/tokenizer/utf8.h"

namespace splitspec::engine::tokenizer_internal {
namespace {

// SentencePiece scores an unknown character this far below the worst piece.
constexpr float kUnknownPenalty = 10.0f;

struct BestPath {
  int32_t id = -1;
  float score = 0.0f;
  int64_t starts_at = -1;  // -1: no path ends here yet
};

}  // namespace

std::vector<Segment> SegmentUnigram(const Vocab& vocab, std::string_view normalized) {
  std::vector<Segment> out;
  const size_t size = normalized.size();
  if (size == 0) return out;
  const float unk_score = vocab.min_score() - kUnknownPenalty;
  std::vector<BestPath> best(size + 1);

  // SentencePiece adds in double when a user-defined symbol is involved (its bonus is a
  // double expression) and compares that sum against the stored float; ties between paths
  // that round to the same float therefore break differently than a pure-float DP would.
  auto relax = [&](size_t start, size_t end, int32_t id, double candidate) {
    BestPath& target = best[end];
    if (target.starts_at == -1 || candidate > static_cast<double>(target.score)) {
      target.score = static_cast<float>(candidate);
      target.starts_at = static_cast<int64_t>(start);
      target.id = id;
    }
  };

  for (size_t start = 0; start < size;) {
    const size_t char_len = OneCharLen(normalized.substr(start));
    bool has_single_char_piece = false;
    const size_t max_end = std::min(size, start + vocab.max_piece_bytes());
    for (size_t end = start + 1; end <= max_end; ++end) {
      const int32_t id = vocab.FindSegmentable(normalized.substr(start, end - start));
      if (id < 0 || vocab.IsType(id, PieceType::kUnused)) continue;
      const size_t length = end - start;
      // User-defined symbols get a bonus so they always win.
      const double score = vocab.IsType(id, PieceType::kUserDefined)
                               ? static_cast<double>(static_cast<float>(length) *
                                                     vocab.max_score()) - 0.1
                               : static_cast<double>(vocab.piece(id).score);
      relax(start, end, id, score + static_cast<double>(best[start].score));
      if (length == char_len) has_single_char_piece = true;
    }
    if (!has_single_char_piece) {
      // The unknown-character path is summed in float.
      relax(start, start + char_len, vocab.unk_id(), unk_score + best[start].score);
    }
    start += char_len;
  }

  for (size_t end = size; end > 0;) {
    const BestPath& node = best[end];
    if (node.starts_at < 0) break;  // unreachable for valid input; keeps bad models safe
    const size_t start = static_cast<size_t>(node.starts_at);
    out.emplace_back(normalized.substr(start, end - start), node.id);
    end = start;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace splitspec::engine::tokenizer_internal
