// Segmentation of normalized text into pieces: SentencePiece's BPE merge procedure and its
// unigram Viterbi search. Both return pieces in text order; a piece not in the vocabulary
// carries the unknown id (byte fallback is applied afterwards by the tokenizer).
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_SEGMENTERS_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_SEGMENTERS_H_

#include <string_view>
#include <vector>

#include "common/engine/tokenizer/vocab.h"

namespace splitspec::engine::tokenizer_internal {

// BPE: starts from characters (user-defined symbols kept whole and never merged) and
// repeatedly merges the adjacent pair whose concatenation is the highest-scoring piece,
// leftmost first among equal scores. O(n log n) with a heap of candidate pairs.
// Segments point into `normalized`.
std::vector<Segment> SegmentBpe(const Vocab& vocab, std::string_view normalized);

// Unigram: the segmentation maximising the sum of piece scores (Viterbi), unknown characters
// scored below every piece, user-defined symbols scored above.
std::vector<Segment> SegmentUnigram(const Vocab& vocab, std::string_view normalized);

}  // namespace splitspec::engine::tokenizer_internal

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_SEGMENTERS_H_
