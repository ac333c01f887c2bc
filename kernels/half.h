// fp16 and bf16 conversions that every reducer and every check shares. fp16 uses the
// compiler's _Float16 (IEEE binary16, round to nearest even); bf16 is the top half of an
// fp32, rounded to nearest even, with NaN kept quiet.
#pragma once

#include <cstdint>
#include <cstring>

namespace rr {

inline float bf16ToFloat(uint16_t x) {
  uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float fp16ToFloat(uint16_t x) {
  _Float16 h;
  std::memcpy(&h, &x, sizeof h);
  return static_cast<float>(h);
}

inline uint16_t floatToFp16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t x;
  std::memcpy(&x, &h, sizeof x);
  return x;
}

}  // namespace rr
