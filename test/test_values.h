// Shared by the multi-process checks: the input every rank contributes, and the expected
// result computed locally with the scalar reference. Inputs are small integers (-2..4), so
// sums of a few ranks are exact in every dtype, fp16 and bf16 included, and min and max are
// exact too; products are left out by the callers. A float average scales each rank's input
// by 1/n before it adds it (kernels/reduce.h), which is exact only when n is a power of
// two: callers compare with rr::sameResult, which allows that rounding and nothing else.
//
// Element i depends on i mod 49 (and the rank and seed), and 49 is the pattern's exact
// period (3a + 5b mod 7 over a = i mod 7, b = i / 7 mod 7): no shift by a segment, slot or
// stripe size (powers of two) maps it onto itself, so a block written at a wrong offset
// differs somewhere. The inputs and the expected result are computed for one period and
// copied over the rest (the scalar reference over whole buckets of up to 4 MiB was most of
// the soak's time). The period must not divide into one value: with every element of a
// rank's input the same, a misplaced element could not be seen.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/half.h"
#include "kernels/reduce.h"

namespace rr::test {

constexpr size_t kSmallPeriod = 49;

// Repeats the first `period` elements (es bytes each) of p over all `count`.
inline void tile(uint8_t* p, size_t count, size_t period, size_t es) {
  for (size_t done = period; done < count;) {
    const size_t n = std::min(done, count - done);
    std::memcpy(p + done * es, p, n * es);
    done += n;
  }
}

inline void fillSmall(uint8_t* p, size_t count, rr_dtype_t dtype, int rank, uint64_t seed) {
  const size_t es = dtypeSize(dtype);
  const size_t period = std::min(count, kSmallPeriod);
  for (size_t i = 0; i < period; ++i) {
    const int v = static_cast<int>((seed * 31 + (i % 7) * 3 + (i / 7) * 5 + static_cast<size_t>(rank) * 13) % 7) - 2;
    switch (dtype) {
      case RR_FLOAT32: { float f = static_cast<float>(v); std::memcpy(p + i * 4, &f, 4); break; }
      case RR_FLOAT64: { double d = v; std::memcpy(p + i * 8, &d, 8); break; }
      case RR_FLOAT16: { uint16_t h = floatToFp16(static_cast<float>(v)); std::memcpy(p + i * 2, &h, 2); break; }
      case RR_BFLOAT16: { uint16_t h = floatToBf16(static_cast<float>(v)); std::memcpy(p + i * 2, &h, 2); break; }
      default: { int64_t x = v; std::memcpy(p + i * es, &x, es); }  // little-endian truncation
    }
  }
  tile(p, count, period, es);
}

// The reduction over `ranks` ranks of fillSmall(total elements), as the engine must give it.
inline std::vector<uint8_t> reducedSmall(size_t total, rr_dtype_t dtype, rr_op_t op, int ranks,
                                         uint64_t seed) {
  const size_t es = dtypeSize(dtype);
  const size_t period = std::min(total, kSmallPeriod);
  std::vector<uint8_t> acc(total * es + 1), other(period * es + 1);
  fillSmall(acc.data(), period, dtype, 0, seed);
  for (int r = 1; r < ranks; ++r) {
    fillSmall(other.data(), period, dtype, r, seed);
    reduceReference(acc.data(), acc.data(), other.data(), period, dtype, op);
  }
  if (op == RR_AVG) finalizeAvg(acc.data(), period, dtype, ranks);
  tile(acc.data(), total, period, es);
  return acc;
}

}  // namespace rr::test
