// Element types the engine stores weights in, and exact conversions between them and f32.
// Activations and accumulators are always f32; F16/BF16 and Q8_0 exist only as storage formats.
//
// Q8_0 is not a file dtype: it is made at load time (--quantize int8). A row of K weights is
// K / 32 blocks, each an IEEE-half scale d and 32 int8 values q in [-127, 127]; weight i of a
// block is q[i] * d (exact in f32: 7 + 11 significant bits). A row stores its K / 32 scales
// first, then its K int8 values (34 bytes per 32 weights, as llama.cpp's Q8_0 block), so a kernel
// reads 64 weights with one vector load and 16 scales with another. The CPU kernel multiplies a
// Q8_0 matrix by activations quantized the same way, per token (cpu/matmul_q8.cc).
#ifndef SPLITSPEC_COMMON_ENGINE_DTYPE_H_
#define SPLITSPEC_COMMON_ENGINE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace splitspec::engine {

enum class DType : uint8_t { kF32, kF16, kBF16, kQ8_0 };

constexpr int kQ8BlockSize = 32;   // weights per Q8_0 block
constexpr int kQ8BlockBytes = 34;  // half scale + 32 int8

// Bytes per element of the per-element dtypes (the file dtypes F32, F16, BF16).
inline size_t DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

// Bytes of one row of `cols` elements in any dtype (Q8_0 rows hold whole blocks).
inline size_t DTypeRowBytes(DType dtype, int64_t cols) {
  if (dtype == DType::kQ8_0) return static_cast<size_t>(cols / kQ8BlockSize) * kQ8BlockBytes;
  return static_cast<size_t>(cols) * DTypeSize(dtype);
}

// The scales and the int8 values of a Q8_0 row of `cols` weights (see above).
inline const uint8_t* Q8RowScales(const uint8_t* row) { return row; }
inline const int8_t* Q8RowValues(const uint8_t* row, int64_t cols) {
  return reinterpret_cast<const int8_t*>(row + (cols / kQ8BlockSize) * 2);
}

inline std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kQ8_0: return "Q8_0";
  }
  return "?";
}

// IEEE half -> float, exact for every input (subnormals, inf, nan included).
inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal half: renormalise into a normal float
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// float -> IEEE half with round-to-nearest-even (what torch's .half() does).
inline uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u);
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {                          // result is subnormal or zero
    if (abs < 0x33000000u) return sign;             // below half the smallest subnormal
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t half = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return sign | static_cast<uint16_t>(half);
}

inline float BF16ToF32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// float -> bfloat16 with round-to-nearest-even; nan stays nan.
inline uint16_t F32ToBF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_DTYPE_H_
