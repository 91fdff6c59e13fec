// Tokenizer (tokenizer.h) over a SentencePiece model read by hand: normalize, segment (BPE or
// unigram), replace unknown pieces by their bytes when byte_fallback is on; decoding mirrors
// SentencePieceProcessor::Decode (control pieces vanish, runs of byte pieces are reassembled
// into UTF-8 with U+FFFD for invalid bytes, the dummy-prefix space of the first piece drops).
#include <fstream>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/engine/tokenizer/model_proto.h"
#include "common/engine/tokenizer/normalizer.h"
#include "common/engine/tokenizer/segmenters.h"
#include "common/engine/tokenizer/tokenizer.h"
#include "common/engine/tokenizer/utf8.h"
#include "common/engine/tokenizer/vocab.h"

namespace splitspec::engine {
namespace {

using tokenizer_internal::kReplacementChar;
using tokenizer_internal::kSpaceSymbol;
using tokenizer_internal::ModelType;
using tokenizer_internal::Normalizer;
using tokenizer_internal::PieceType;
using tokenizer_internal::Vocab;

// Model files larger than this are rejected before reading (real ones are well under 10 MB).
constexpr std::streamoff kMaxModelBytes = 1ll << 30;

// `piece` with every U+2581 turned back into a space.
std::string ReplaceSpaceSymbols(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  while (!piece.empty()) {
    if (piece.substr(0, kSpaceSymbol.size()) == kSpaceSymbol) {
      out.push_back(' ');
      piece.remove_prefix(kSpaceSymbol.size());
    } else {
      out.push_back(piece.front());
      piece.remove_prefix(1);
    }
  }
  return out;
}

// Where decoding stands after some prefix of the ids: what decides the next piece's surface.
struct DecodeState {
  bool is_bos_ws = true;       // still at the start: a leading U+2581 is the dummy prefix
  bool text_nonempty = false;  // some visible text (or byte run) came before
  bool bos_ws_seen = false;    // the previous piece consumed the leading-space marker
};

class SpmTokenizer final : public Tokenizer {
 public:
  SpmTokenizer(std::unique_ptr<Vocab> vocab, Normalizer normalizer,
               std::optional<Normalizer> denormalizer)
      : vocab_(std::move(vocab)),
        normalizer_(std::move(normalizer)),
        denormalizer_(std::move(denormalizer)) {
    bos_id_ = ControlIdOf(vocab_->model().bos_piece);
    eos_id_ = ControlIdOf(vocab_->model().eos_piece);
    const auto& spec = vocab_->model().normalizer;
    strip_leading_space_ = spec.add_dummy_prefix || spec.remove_extra_whitespaces;
    keep_stripping_ = spec.remove_extra_whitespaces;
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos && bos_id_ >= 0) ids.push_back(bos_id_);
    const std::string normalized = normalizer_.Normalize(text);
    const std::vector<tokenizer_internal::Segment> segments =
        vocab_->model().model_type == ModelType::kBpe
            ? tokenizer_internal::SegmentBpe(*vocab_, normalized)
            : tokenizer_internal::SegmentUnigram(*vocab_, normalized);
    ids.reserve(ids.size() + segments.size());
    const bool byte_fallback = vocab_->model().byte_fallback;
    bool previous_unknown = false;
    for (const auto& [piece, id] : segments) {
      const bool unknown = id == vocab_->unk_id();
      if (unknown && byte_fallback) {
        for (const char c : piece) ids.push_back(vocab_->byte_id(static_cast<uint8_t>(c)));
      } else if (!(unknown && previous_unknown)) {
        ids.push_back(id);  // a run of unknown pieces becomes one <unk>, as in spm_encode
      }
      previous_unknown = unknown;
    }
    return ids;
  }

  std::string Decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    std::string bytes;  // the current run of byte pieces
    DecodeState state;
    for (const int32_t id : ids) {
      if (id < 0 || id >= vocab_->size()) continue;  // not a token of this model
      if (const int byte = vocab_->ByteOf(id); byte >= 0) {
        bytes.push_back(static_cast<char>(byte));
        continue;
      }
      if (!bytes.empty()) {
        AppendBytes(bytes, /*flush=*/true, &text);
        bytes.clear();
        state.text_nonempty = true;
      }
      text += Surface(id, &state);
    }
    if (!bytes.empty()) AppendBytes(bytes, /*flush=*/true, &text);
    return Denormalize(std::move(text));
  }

  std::string DecodeIncremental(const std::vector<int32_t>& previous,
                                int32_t next) const override {
    if (next < 0 || next >= vocab_->size()) return "";
    // The trailing run of byte pieces in `previous`: its incomplete character is still pending.
    size_t run_start = previous.size();
    while (run_start > 0 && vocab_->ByteOf(previous[run_start - 1]) >= 0) --run_start;
    std::string run;
    for (size_t i = run_start; i < previous.size(); ++i) {
      run.push_back(static_cast<char>(vocab_->ByteOf(previous[i])));
    }
    std::string shown;  // what earlier calls emitted for the run
    AppendBytes(run, /*flush=*/false, &shown);

    std::string out;
    if (const int byte = vocab_->ByteOf(next); byte >= 0) {
      run.push_back(static_cast<char>(byte));
      std::string now;
      AppendBytes(run, /*flush=*/false, &now);
      out = now.substr(shown.size());  // `shown` is a prefix of `now`
    } else {
      std::string flushed;
      AppendBytes(run, /*flush=*/true, &flushed);
      out = flushed.substr(shown.size());  // pending bytes become U+FFFD, as Decode shows them
      DecodeState state = StateAfter(previous);
      out += Surface(next, &state);
    }
    return Denormalize(std::move(out));
  }

  int32_t vocab_size() const override { return vocab_->size(); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  std::string_view Piece(int32_t id) const override {
    if (id < 0 || id >= vocab_->size()) return {};
    return vocab_->piece(id).piece;
  }

 private:
  int32_t ControlIdOf(const std::string& piece) const {
    const int32_t id = vocab_->PieceToId(piece);
    return vocab_->IsType(id, PieceType::kControl) ? id : -1;
  }

  // Text of the non-byte piece `id`, updating `state` (SentencePiece's DecodeSentencePiece).
  std::string Surface(int32_t id, DecodeState* state) const {
    const tokenizer_internal::SpmPiece& p = vocab_->piece(id);
    if (state->bos_ws_seen || state->text_nonempty) state->is_bos_ws = false;
    const bool is_bos_ws = state->is_bos_ws;
    std::string surface;
    bool consumed_marker = false;
    if (p.type == PieceType::kControl) {
      // invisible
    } else if (p.type == PieceType::kUnknown) {
      surface = vocab_->model().unk_surface;
    } else {
      std::string_view piece = p.piece;
      if (is_bos_ws && strip_leading_space_ &&
          piece.substr(0, kSpaceSymbol.size()) == kSpaceSymbol) {
        piece.remove_prefix(kSpaceSymbol.size());
        // With remove_extra_whitespaces every leading marker goes, not just the first.
        consumed_marker = !keep_stripping_;
      }
      surface = ReplaceSpaceSymbols(piece);
    }
    state->bos_ws_seen = consumed_marker;
    if (!surface.empty()) state->text_nonempty = true;
    return surface;
  }

  // Decoding state after all of `ids`. Scans from the start but stops as soon as text has
  // appeared: from then on the start-of-text rule is off for good, so nothing earlier can
  // change how later pieces decode (streaming stays O(1) per token after the first word).
  DecodeState StateAfter(const std::vector<int32_t>& ids) const {
    DecodeState state;
    for (const int32_t id : ids) {
      if (state.text_nonempty) break;
      if (id < 0 || id >= vocab_->size()) continue;
      if (vocab_->ByteOf(id) >= 0) {
        state.text_nonempty = true;  // a byte run always shows something once flushed
        continue;
      }
      Surface(id, &state);
    }
    return state;
  }

  // Appends the characters of a byte run: valid UTF-8 as is, each invalid byte as U+FFFD.
  // Without `flush`, a character cut short at the end is held back (streaming).
  static void AppendBytes(std::string_view bytes, bool flush, std::string* out) {
    while (!bytes.empty()) {
      if (!flush && tokenizer_internal::IsIncompleteUtf8(bytes)) return;
      size_t length = 0;
      if (tokenizer_internal::DecodeValidUtf8Prefix(bytes, &length)) {
        out->append(bytes.substr(0, length));
      } else {
        out->append(kReplacementChar);
      }
      bytes.remove_prefix(length);
    }
  }

  std::string Denormalize(std::string text) const {
    if (!denormalizer_.has_value()) return text;
    return denormalizer_->Normalize(text);
  }

  std::unique_ptr<Vocab> vocab_;
  Normalizer normalizer_;
  std::optional<Normalizer> denormalizer_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool strip_leading_space_ = true;
  bool keep_stripping_ = true;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromBytes(
    std::string_view serialized_model) {
  absl::StatusOr<tokenizer_internal::SpmModelProto> proto =
      tokenizer_internal::ParseModelProto(serialized_model);
  if (!proto.ok()) {
    return absl::Status(proto.status().code(),
                        absl::StrCat("bad SentencePiece model: ", proto.status().message()));
  }
  if (proto->model_type != ModelType::kBpe && proto->model_type != ModelType::kUnigram) {
    return absl::UnimplementedError(absl::StrCat("SentencePiece model type ",
                                                 static_cast<int>(proto->model_type),
                                                 " is not supported (only BPE and unigram)"));
  }
  absl::StatusOr<std::unique_ptr<Vocab>> vocab = Vocab::Build(*std::move(proto));
  if (!vocab.ok()) {
    return absl::Status(vocab.status().code(),
                        absl::StrCat("bad SentencePiece model: ", vocab.status().message()));
  }
  const auto& model = (*vocab)->model();
  absl::StatusOr<Normalizer> normalizer = Normalizer::Create(
      model.normalizer, model.treat_whitespace_as_suffix, &(*vocab)->user_defined());
  if (!normalizer.ok()) return normalizer.status();
  std::optional<Normalizer> denormalizer;
  if (!model.denormalizer.precompiled_charsmap.empty()) {
    absl::StatusOr<Normalizer> d = Normalizer::Create(model.denormalizer, false, nullptr);
    if (!d.ok()) return d.status();
    denormalizer = *std::move(d);
  }
  return std::unique_ptr<Tokenizer>(new SpmTokenizer(*std::move(vocab), *std::move(normalizer),
                                                     std::move(denormalizer)));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open tokenizer model ", path));
  const std::streamoff size = in.tellg();
  if (size < 0 || size > kMaxModelBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer model ", path, " has unusable size ", size));
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size)) {
    return absl::DataLossError(absl::StrCat("cannot read tokenizer model ", path));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadFromBytes(bytes);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(path, ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

}  // namespace splitspec::engine
