// Llama-family forward over the Backend interface, and loading its weights from safetensors.
#include "common/engine/model/llama_model.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/engine/model/quantize.h"
#include "common/engine/model/rope.h"
#include "common/engine/model/safetensors.h"

namespace splitspec::engine {

// Weights of one decoder layer. Shapes are (n_out, n_in); q_dim = n_heads * head_dim,
// kv_dim = n_heads_kv * head_dim.
struct LlamaModel::Layer {
  Tensor attn_norm;  // (1, hidden) f32
  // q, k and v projections fused row-wise, so one pass over the threads computes all three
  // (Backend::MatMulSplit); each TP shard keeps its own q rows, then k rows, then v rows.
  Tensor w_qkv;      // (q_dim + 2 * kv_dim, hidden)
  Tensor b_qkv;      // (1, q_dim + 2 * kv_dim) f32, only with attention_bias
  Tensor wo;         // (hidden, q_dim)
  Tensor ffn_norm;   // (1, hidden) f32
  Tensor w_gate_up;  // (2 * intermediate, hidden): gate rows, then up rows
  Tensor w_down;     // (hidden, intermediate)
};

namespace {

// The part of a matrix a tensor-parallel shard holds: all of it, a 1/parts share of each named
// tensor's rows (column-parallel layers), or a 1/parts share of its columns (row-parallel).
struct Split {
  enum class Axis { kNone, kRows, kCols };
  Axis axis = Axis::kNone;
  int part = 0;
  int parts = 1;
  bool whole() const { return axis == Axis::kNone || parts == 1; }
};

// Rows [row0, row0 + n_rows) x cols [col0, col0 + n_cols) of a (rows, cols) view, as bytes of
// the view's dtype; `view` is repointed at `storage`, which must outlive it.
void SliceView(int64_t row0, int64_t n_rows, int64_t col0, int64_t n_cols, std::vector<uint8_t>& storage,
               TensorView& view) {
  const int64_t cols = view.shape.back();
  const size_t element = DTypeSize(view.dtype);
  storage.resize(static_cast<size_t>(n_rows * n_cols) * element);
  for (int64_t r = 0; r < n_rows; ++r) {
    std::memcpy(storage.data() + static_cast<size_t>(r * n_cols) * element,
                view.data + static_cast<size_t>((row0 + r) * cols + col0) * element, static_cast<size_t>(n_cols) * element);
  }
  view.data = storage.data();
  view.n_bytes = storage.size();
  view.shape = view.shape.size() == 1 ? std::vector<int64_t>{n_cols} : std::vector<int64_t>{n_rows, n_cols};
}

// Loads tensors by name into backend memory, checking shapes, and frees them on failure.
class WeightLoader {
 public:
  WeightLoader(const SafetensorsArchive& archive, Backend& backend, bool to_f32, WeightQuantization quantize)
      : archive_(archive), backend_(backend), to_f32_(to_f32), quantize_(quantize) {}
  ~WeightLoader() {
    if (!committed_) {
      for (Tensor& t : loaded_) backend_.Free(t);
    }
  }
  void Commit() { committed_ = true; }
  int64_t bytes() const { return bytes_; }

  // A matrix kept in its file dtype (or f32 when asked), concatenating `names` along rows.
  // Under a Split, only this shard's rows of each named tensor (or columns) are loaded.
  absl::StatusOr<Tensor> Matrix(const std::vector<std::string>& names, const std::vector<int64_t>& rows_each,
                                int64_t cols, const Split& split = {}) {
    std::vector<TensorView> views;
    std::vector<std::vector<uint8_t>> slices(names.size());
    int64_t total_rows = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      absl::StatusOr<TensorView> view = archive_.GetWithShape(names[i], {rows_each[i], cols});
      if (!view.ok()) return view.status();
      views.push_back(*view);
      total_rows += rows_each[i];
      if (split.whole()) continue;
      if (split.axis == Split::Axis::kRows) {
        const int64_t share = rows_each[i] / split.parts;
        SliceView(share * split.part, share, 0, cols, slices[i], views.back());
        total_rows -= rows_each[i] - share;
      } else {
        const int64_t share = cols / split.parts;
        SliceView(0, rows_each[i], share * split.part, share, slices[i], views.back());
      }
    }
    if (!split.whole() && split.axis == Split::Axis::kCols) cols /= split.parts;
    const bool quantize = quantize_ == WeightQuantization::kInt8 && cols % kQ8BlockSize == 0;
    const DType dtype = to_f32_ || quantize ? DType::kF32 : views[0].dtype;
    std::vector<uint8_t> host;
    for (const TensorView& view : views) {
      const std::vector<uint8_t> part = TensorBytesAs(view, dtype);
      host.insert(host.end(), part.begin(), part.end());
    }
    if (!quantize) return Store(dtype, total_rows, cols, host);
    absl::StatusOr<std::vector<uint8_t>> q8 = QuantizeQ8(
        absl::MakeConstSpan(reinterpret_cast<const float*>(host.data()), host.size() / sizeof(float)), total_rows, cols);
    if (!q8.ok()) return absl::InvalidArgumentError(absl::StrCat(names[0], ": ", q8.status().message()));
    return Store(DType::kQ8_0, total_rows, cols, *q8);
  }

  // A vector always held in f32 (norm weights, biases), concatenating `names`.
  // A kRows split keeps this shard's share of each named vector (biases of split projections).
  absl::StatusOr<Tensor> Vector(const std::vector<std::string>& names, const std::vector<int64_t>& sizes,
                                const Split& split = {}) {
    std::vector<uint8_t> host;
    int64_t total = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      absl::StatusOr<TensorView> view = archive_.GetWithShape(names[i], {sizes[i]});
      if (!view.ok()) return view.status();
      int64_t n = sizes[i];
      std::vector<uint8_t> slice;
      if (!split.whole()) {
        n /= split.parts;
        SliceView(0, 1, n * split.part, n, slice, *view);
      }
      const std::vector<uint8_t> part = TensorBytesAs(*view, DType::kF32);
      host.insert(host.end(), part.begin(), part.end());
      total += n;
    }
    return Store(DType::kF32, 1, total, host);
  }
  absl::StatusOr<Tensor> Vector(const std::string& name, int64_t n, const Split& split = {}) {
    return Vector(std::vector<std::string>{name}, std::vector<int64_t>{n}, split);
  }

 private:
  absl::StatusOr<Tensor> Store(DType dtype, int64_t rows, int64_t cols, const std::vector<uint8_t>& host) {
    absl::StatusOr<Tensor> tensor = backend_.Allocate(dtype, rows, cols);
    if (!tensor.ok()) return tensor.status();
    backend_.Upload(host.data(), *tensor);
    loaded_.push_back(*tensor);
    bytes_ += static_cast<int64_t>(tensor->n_bytes());
    return *tensor;
  }

  const SafetensorsArchive& archive_;
  Backend& backend_;
  bool to_f32_;
  WeightQuantization quantize_;
  bool committed_ = false;
  std::vector<Tensor> loaded_;
  int64_t bytes_ = 0;
};

#define SPLITSPEC_ASSIGN_OR_RETURN(lhs, expr) \
  do {                                        \
    auto status_or = (expr);                  \
    if (!status_or.ok()) return status_or.status(); \
    lhs = *std::move(status_or);              \
  } while (0)

}  // namespace

absl::StatusOr<WeightQuantization> ParseWeightQuantization(std::string_view name) {
  if (name == "none") return WeightQuantization::kNone;
  if (name == "int8") return WeightQuantization::kInt8;
  return absl::InvalidArgumentError(absl::StrCat("unknown weight quantization '", std::string(name),
                                                 "' (none or int8)"));
}

LlamaModel::LlamaModel(Backend& backend, ModelConfig config)
    : backend_(backend), config_(std::move(config)), rope_(MakeRopeTables(config_)) {}

LlamaModel::~LlamaModel() {
  auto free = [this](Tensor& t) {
    if (t.data != nullptr) backend_.Free(t);
  };
  for (Tensor& t : workspace_) free(t);
  // Until Load hands the weights over, its WeightLoader owns (and on failure frees) them.
  if (!weights_owned_) return;
  for (Layer& layer : layers_) {
    for (Tensor* t : {&layer.attn_norm, &layer.w_qkv, &layer.b_qkv, &layer.wo, &layer.ffn_norm, &layer.w_gate_up, &layer.w_down}) {
      free(*t);
    }
  }
  free(embedding_);
  free(final_norm_);
  if (lm_head_owned_) free(lm_head_);
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& model_dir, Backend& backend,
                                                             const ModelLoadOptions& options) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(model_dir + "/config.json");
  if (!config.ok()) return config.status();
  absl::StatusOr<std::unique_ptr<SafetensorsArchive>> archive = SafetensorsArchive::OpenDirectory(model_dir);
  if (!archive.ok()) return archive.status();

  const int tp = options.tp_size;
  if (tp < 1 || options.tp_rank < 0 || options.tp_rank >= tp) {
    return absl::InvalidArgumentError(absl::StrCat("tensor-parallel rank ", options.tp_rank, " of size ", tp,
                                                   " is out of range"));
  }
  if (config->n_heads % tp != 0 || config->n_heads_kv % tp != 0 || config->intermediate_size % tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor parallelism ", tp, " must divide n_heads (", config->n_heads,
                                                   "), n_heads_kv (", config->n_heads_kv, ") and intermediate_size (",
                                                   config->intermediate_size, ")"));
  }
  if (tp > 1 && (options.comm == nullptr || options.comm->size() != tp || options.comm->rank() != options.tp_rank)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor parallelism ", tp, " needs a communicator of that size "
                                                   "whose rank is tp_rank ", options.tp_rank));
  }

  std::unique_ptr<LlamaModel> model(new LlamaModel(backend, *config));
  model->tp_rank_ = options.tp_rank;
  model->tp_size_ = tp;
  model->comm_ = tp > 1 ? options.comm : nullptr;
  const ModelConfig& c = model->config_;
  model->n_heads_local_ = c.n_heads / tp;
  model->n_heads_kv_local_ = c.n_heads_kv / tp;
  model->intermediate_local_ = c.intermediate_size / tp;
  const int64_t hidden = c.hidden_size;
  const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_heads_kv) * c.head_dim;
  const int64_t inter = c.intermediate_size;
  const Split by_rows{Split::Axis::kRows, options.tp_rank, tp};
  const Split by_cols{Split::Axis::kCols, options.tp_rank, tp};
  if (options.quantize != WeightQuantization::kNone && backend.name() != "cpu" && backend.name() != "cuda") {
    return absl::UnimplementedError(absl::StrCat("int8 weights run on the CPU and CUDA backends; not supported on ",
                                                 std::string(backend.name()), " (drop --quantize)"));
  }
  WeightLoader load(**archive, backend, options.weights_to_f32, options.quantize);

  SPLITSPEC_ASSIGN_OR_RETURN(model->embedding_, load.Matrix({"model.embed_tokens.weight"}, {c.vocab_size}, hidden));
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    Layer layer;
    SPLITSPEC_ASSIGN_OR_RETURN(layer.attn_norm, load.Vector(p + "input_layernorm.weight", hidden));
    SPLITSPEC_ASSIGN_OR_RETURN(
        layer.w_qkv, load.Matrix({p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"},
                                 {q_dim, kv_dim, kv_dim}, hidden, by_rows));
    if (c.attention_bias) {
      SPLITSPEC_ASSIGN_OR_RETURN(
          layer.b_qkv, load.Vector({p + "self_attn.q_proj.bias", p + "self_attn.k_proj.bias", p + "self_attn.v_proj.bias"},
                                   {q_dim, kv_dim, kv_dim}, by_rows));
    }
    SPLITSPEC_ASSIGN_OR_RETURN(layer.wo, load.Matrix({p + "self_attn.o_proj.weight"}, {hidden}, q_dim, by_cols));
    SPLITSPEC_ASSIGN_OR_RETURN(layer.ffn_norm, load.Vector(p + "post_attention_layernorm.weight", hidden));
    // Each shard keeps its gate rows then its up rows, so SiluMul's "gate first" layout holds.
    SPLITSPEC_ASSIGN_OR_RETURN(layer.w_gate_up, load.Matrix({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"},
                                                            {inter, inter}, hidden, by_rows));
    SPLITSPEC_ASSIGN_OR_RETURN(layer.w_down, load.Matrix({p + "mlp.down_proj.weight"}, {hidden}, inter, by_cols));
    model->layers_.push_back(layer);
  }
  SPLITSPEC_ASSIGN_OR_RETURN(model->final_norm_, load.Vector("model.norm.weight", hidden));
  // Some checkpoints set tie_word_embeddings yet still ship lm_head.weight; use it when present.
  if (c.tie_word_embeddings && !(*archive)->Contains("lm_head.weight")) {
    model->lm_head_ = model->embedding_;
  } else {
    SPLITSPEC_ASSIGN_OR_RETURN(model->lm_head_, load.Matrix({"lm_head.weight"}, {c.vocab_size}, hidden));
    model->lm_head_owned_ = true;
  }
  // A tied head is read twice per forward (embedding rows are not; only the head is streamed).
  model->weight_bytes_ = load.bytes() - static_cast<int64_t>(model->embedding_.n_bytes()) +
                         static_cast<int64_t>(model->lm_head_.n_bytes()) * (model->lm_head_owned_ ? 0 : 1);
  load.Commit();
  model->weights_owned_ = true;
  return model;
}

absl::StatusOr<std::unique_ptr<KvCache>> LlamaModel::CreateKvCache(int n_blocks, int block_size, DType kv_dtype) const {
  return KvCache::Create(backend_, {config_.n_layers, n_heads_kv_local_, config_.head_dim, n_blocks, block_size, kv_dtype});
}

absl::StatusOr<Tensor> LlamaModel::Workspace(int index, int64_t rows, int64_t cols) {
  if (workspace_.size() <= static_cast<size_t>(index)) workspace_.resize(index + 1);
  Tensor& t = workspace_[index];
  if (t.data == nullptr || t.rows * t.cols < rows * cols) {
    if (t.data != nullptr) backend_.Free(t);
    absl::StatusOr<Tensor> fresh = backend_.Allocate(DType::kF32, rows, cols);
    if (!fresh.ok()) return fresh.status();
    t = *fresh;
  }
  return Tensor{t.data, DType::kF32, rows, cols};
}

absl::Status LlamaModel::Forward(absl::Span<const SequenceStep> steps, KvCache& kv, ForwardResult* result) {
  const ModelConfig& c = config_;
  result->vocab_size = c.vocab_size;
  result->logits.clear();

  // ---- validate everything before touching the cache --------------------------------
  std::unordered_set<SeqId> seen;
  int32_t blocks_needed = 0;
  int64_t n_tokens = 0;
  for (const SequenceStep& step : steps) {
    if (!kv.HasSequence(step.seq)) return absl::InvalidArgumentError(absl::StrCat("unknown sequence ", step.seq));
    if (!seen.insert(step.seq).second) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", step.seq, " appears twice in one forward"));
    }
    const int32_t n = static_cast<int32_t>(step.tokens.size());
    if (n == 0) return absl::InvalidArgumentError(absl::StrCat("sequence ", step.seq, " feeds no tokens"));
    for (int32_t token : step.tokens) {
      if (token < 0 || token >= c.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("token id ", token, " outside the vocabulary [0, ",
                                                       c.vocab_size, ")"));
      }
    }
    const int32_t m = static_cast<int32_t>(step.tree_context.size());
    if (m > 0) {
      if (m > kv.Length(step.seq)) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", step.seq, ": ", m, " cached tree nodes but ",
                                                       kv.Length(step.seq), " tokens in the cache"));
      }
      if (step.parents.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", step.seq, ": a step over cached tree nodes needs parents"));
      }
      for (int32_t j = 0; j < m; ++j) {
        if (step.tree_context[j] < -1 || step.tree_context[j] >= j) {
          return absl::InvalidArgumentError(absl::StrCat("sequence ", step.seq, ": cached tree node ", j,
                                                         " has parent ", step.tree_context[j]));
        }
      }
    }
    if (!step.parents.empty()) {
      if (static_cast<int32_t>(step.parents.size()) != n) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", step.seq, ": ", step.parents.size(),
                                                       " parents for ", n, " tokens"));
      }
      for (int32_t i = 0; i < n; ++i) {
        if (step.parents[i] < -1 || step.parents[i] >= m + i) {
          return absl::InvalidArgumentError(absl::StrCat("sequence ", step.seq, ": node ", i, " has parent ",
                                                         step.parents[i], "; parents must precede their children"));
        }
      }
    }
    for (int32_t node : step.logit_nodes) {
      if (node < 0 || node >= n) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", step.seq, ": logits asked for node ", node,
                                                       " of ", n));
      }
    }
    blocks_needed += kv.BlocksNeeded(step.seq, n);
    n_tokens += n;
  }
  if (blocks_needed > kv.free_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat("KV cache full: the forward needs ", blocks_needed,
                                                     " blocks, ", kv.free_blocks(), " free"));
  }
  if (steps.empty()) return absl::OkStatus();

  // ---- lay out the batch: tokens, positions, masks, KV slots -------------------------
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> logit_rows;
  std::vector<std::vector<uint8_t>> masks(steps.size());
  std::vector<AttentionSequence> attention(steps.size());
  tokens.reserve(n_tokens);
  positions.reserve(n_tokens);
  for (size_t s = 0; s < steps.size(); ++s) {
    const SequenceStep& step = steps[s];
    const int32_t n = static_cast<int32_t>(step.tokens.size());
    const int32_t m = static_cast<int32_t>(step.tree_context.size());
    const int32_t context = kv.Length(step.seq);
    const int32_t committed = context - m;
    const int32_t first_row = static_cast<int32_t>(tokens.size());
    bool is_chain = m == 0;
    for (int32_t i = 0; i < static_cast<int32_t>(step.parents.size()); ++i) is_chain &= step.parents[i] == i - 1;
    // Tree columns: the m cached nodes, then this step's n tokens. Each column's mask row
    // marks its ancestors and itself; only the new tokens' rows go to the attention op.
    const int32_t width = m + n;
    std::vector<int32_t> depth(width, 0);
    std::vector<uint8_t> all_rows;
    if (!is_chain) all_rows.assign(static_cast<size_t>(width) * width, 0);
    for (int32_t c = 0; c < width; ++c) {
      const bool cached = c < m;
      const int32_t parent = cached ? step.tree_context[c] : (is_chain ? c - 1 : step.parents[c - m]);
      depth[c] = parent < 0 ? 0 : depth[parent] + 1;
      if (!is_chain) {
        uint8_t* row = &all_rows[static_cast<size_t>(c) * width];
        if (parent >= 0) std::memcpy(row, &all_rows[static_cast<size_t>(parent) * width], parent + 1);
        row[c] = 1;
      }
      if (cached) continue;
      tokens.push_back(step.tokens[c - m]);
      positions.push_back(committed + depth[c]);
    }
    if (!is_chain) masks[s].assign(all_rows.begin() + static_cast<std::ptrdiff_t>(m) * width, all_rows.end());
    for (int32_t node : step.logit_nodes) logit_rows.push_back(first_row + node);
    absl::Status appended = kv.Append(step.seq, n);
    if (!appended.ok()) return appended;  // cannot happen: capacity was checked above
    attention[s] = AttentionSequence{kv.BlockTable(step.seq).data(), context, n, first_row,
                                     is_chain ? nullptr : masks[s].data(), is_chain ? 0 : m};
  }

  // ---- the forward ----------------------------------------------------------------------
  const int64_t hidden = c.hidden_size;
  // This shard's widths (the whole model's when tp_size_ == 1).
  const int n_heads = n_heads_local_;
  const int64_t q_dim = static_cast<int64_t>(n_heads_local_) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(n_heads_kv_local_) * c.head_dim;
  const int64_t inter = intermediate_local_;
  // Row-parallel outputs hold this shard's partial sums; add the other shards' (TP only).
  auto all_reduce = [&](Tensor& partial) -> absl::Status {
    if (comm_ == nullptr) return absl::OkStatus();
    return comm_->AllReduceSum(partial.f32(), partial.n_elements());
  };
  Tensor x, h, q, k, v, attn, gate_up, act, logits;
  SPLITSPEC_ASSIGN_OR_RETURN(x, Workspace(0, n_tokens, hidden));        // residual stream
  SPLITSPEC_ASSIGN_OR_RETURN(h, Workspace(1, n_tokens, hidden));        // normed input / sublayer output
  SPLITSPEC_ASSIGN_OR_RETURN(q, Workspace(2, n_tokens, q_dim));
  SPLITSPEC_ASSIGN_OR_RETURN(k, Workspace(3, n_tokens, kv_dim));
  SPLITSPEC_ASSIGN_OR_RETURN(v, Workspace(4, n_tokens, kv_dim));
  SPLITSPEC_ASSIGN_OR_RETURN(attn, Workspace(5, n_tokens, q_dim));
  SPLITSPEC_ASSIGN_OR_RETURN(gate_up, Workspace(6, n_tokens, 2 * inter));
  SPLITSPEC_ASSIGN_OR_RETURN(act, Workspace(7, n_tokens, inter));
  const int64_t n_logit_rows = static_cast<int64_t>(logit_rows.size());
  SPLITSPEC_ASSIGN_OR_RETURN(logits, Workspace(8, std::max<int64_t>(n_logit_rows, 1), c.vocab_size));

  backend_.Embed(embedding_, tokens, x);
  for (int layer_index = 0; layer_index < c.n_layers; ++layer_index) {
    Layer& layer = layers_[layer_index];
    backend_.RmsNorm(x, layer.attn_norm, c.rms_norm_eps, h);
    Tensor* qkv[] = {&q, &k, &v};
    backend_.MatMulSplit(h, layer.w_qkv, c.attention_bias ? &layer.b_qkv : nullptr, qkv);
    backend_.Rope(q, n_heads, rope_, positions);
    backend_.Rope(k, n_heads_kv_local_, rope_, positions);
    backend_.Attention(q, k, v, n_heads, kv.layout(), kv.k(layer_index), kv.v(layer_index), attention, attn);
    backend_.MatMul(attn, layer.wo, nullptr, h);
    if (absl::Status reduced = all_reduce(h); !reduced.ok()) return reduced;
    backend_.Add(x, h);
    backend_.RmsNorm(x, layer.ffn_norm, c.rms_norm_eps, h);
    backend_.MatMul(h, layer.w_gate_up, nullptr, gate_up);
    backend_.SiluMul(gate_up, act);
    backend_.MatMul(act, layer.w_down, nullptr, h);
    if (absl::Status reduced = all_reduce(h); !reduced.ok()) return reduced;
    backend_.Add(x, h);
  }
  if (n_logit_rows == 0) return absl::OkStatus();
  backend_.RmsNorm(x, final_norm_, c.rms_norm_eps, h);
  backend_.MatMul(h, lm_head_, nullptr, logits, logit_rows);
  result->logits.resize(static_cast<size_t>(n_logit_rows) * c.vocab_size);
  backend_.DownloadRows(logits, 0, n_logit_rows, result->logits.data());
  return absl::OkStatus();
}

}  // namespace splitspec::engine
