// Load-time weight quantization: f32 matrices to Q8_0 (dtype.h) and back.
//
// Symmetric, one scale per block of 32 weights along a row: d = max|w| / 127 rounded to an IEEE
// half, q = round-half-even(w / d) clamped to [-127, 127]. Why blocks of 32: every projection of
// the Llama family has K a multiple of 32; a block's scale follows local outliers, so rounding
// error stays at max|w| / 254 per weight of the block rather than of the whole row; and it is
// the block llama.cpp's Q8_0 uses, so the two engines' 8-bit figures compare like for like.
// Larger blocks would save under 6% of the bytes (34 per 32 weights against 32 + 2 / n).
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_QUANTIZE_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_QUANTIZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace splitspec::engine {

// Q8_0 bytes of a row-major (rows, cols) f32 matrix. INVALID_ARGUMENT when cols is not a
// multiple of 32, the sizes disagree, a weight is not finite or a block's scale would not fit
// an IEEE half (max|w| > 127 * 65504).
absl::StatusOr<std::vector<uint8_t>> QuantizeQ8(absl::Span<const float> values, int64_t rows, int64_t cols);

// The f32 weights a Q8_0 row of `cols` weights stands for (q * d, exact).
void DequantizeQ8Row(const uint8_t* row, int64_t cols, float* out);

// Writes `out_dir` as a model directory holding `model_dir`'s weights as --quantize int8 serves
// them: every matrix whose rows are whole blocks quantized and dequantized, in one F32
// model.safetensors, beside copies of the other files (config.json, tokenizer files). Any tool
// that reads F32 safetensors (a PyTorch reference, a perplexity script) then measures exactly
// what quantizing the weights changed. The engine's int8 kernel also rounds each matrix
// product's input to int8 per block of 32 (cpu/matmul_q8.cc); tests/reference/llama_reference.py
// `quantize_activations` adds that to a torch forward.
absl::Status WriteInt8RoundTripModel(const std::string& model_dir, const std::string& out_dir);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_QUANTIZE_H_
