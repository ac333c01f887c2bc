// Shared by the multi-process checks: the input every rank contributes, and the expected
// result computed locally with the scalar reference. Inputs are small integers (-2..4), so
// sums of a few ranks are exact in every dtype, fp16 and bf16 included, and min and max are
// exact too; products are left out by the callers. A float average scales each rank's input
// by 1/n before it adds it (kernels/reduce.h), which is exact only when n is a power of
// two: callers compare with rr::sameResult, which allows that rounding and nothing else.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/half.h"
#include "kernels/reduce.h"

namespace rr::test {

inline void fillSmall(uint8_t* p, size_t count, rr_dtype_t dtype, int rank, uint64_t seed) {
  const size_t es = dtypeSize(dtype);
  for (size_t i = 0; i < count; ++i) {
    const int v = static_cast<int>((seed * 31 + i * 7 + static_cast<size_t>(rank) * 13) % 7) - 2;
    switch (dtype) {
      case RR_FLOAT32: { float f = static_cast<float>(v); std::memcpy(p + i * 4, &f, 4); break; }
      case RR_FLOAT64: { double d = v; std::memcpy(p + i * 8, &d, 8); break; }
      case RR_FLOAT16: { uint16_t h = floatToFp16(static_cast<float>(v)); std::memcpy(p + i * 2, &h, 2); break; }
      case RR_BFLOAT16: { uint16_t h = floatToBf16(static_cast<float>(v)); std::memcpy(p + i * 2, &h, 2); break; }
      default: { int64_t x = v; std::memcpy(p + i * es, &x, es); }  // little-endian truncation
    }
  }
}

// The reduction over `ranks` ranks of fillSmall(total elements), as the engine must give it.
inline std::vector<uint8_t> reducedSmall(size_t total, rr_dtype_t dtype, rr_op_t op, int ranks,
                                         uint64_t seed) {
  const size_t es = dtypeSize(dtype);
  std::vector<uint8_t> acc(total * es + 1), other(total * es + 1);
  fillSmall(acc.data(), total, dtype, 0, seed);
  for (int r = 1; r < ranks; ++r) {
    fillSmall(other.data(), total, dtype, r, seed);
    reduceReference(acc.data(), acc.data(), other.data(), total, dtype, op);
  }
  if (op == RR_AVG) finalizeAvg(acc.data(), total, dtype, ranks);
  return acc;
}

}  // namespace rr::test
