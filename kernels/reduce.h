// Host reduction: dst[i] = a[i] op b[i] for every dtype and op.
//
// Three implementations share one signature: the scalar reference (the test oracle, written
// element by element), and the same vectorised source compiled for baseline x86-64, AVX2 and
// AVX-512; the best one the CPU supports is chosen once at run time (no -march=native).
// dst may be a or b exactly (in place); partial overlap is not allowed.
// RR_AVG reduces as RR_SUM. How the engine averages (see also device_math.cuh):
//   floats    every contribution is multiplied by 1/ranks once, where it enters the sum
//             (scale), as NCCL does, so an average that fits never overflows on the way
//   integers  the finished sum, wrapped in the type's width as RR_SUM wraps, divided by the
//             ranks with finalizeAvg (truncating toward zero)
// MIN and MAX propagate NaN: if either operand is NaN the result is that NaN (a first).
#pragma once

#include <cstddef>

#include "ringreduce/ringreduce.h"

namespace rr {

enum class Isa { kBaseline, kAvx2, kAvx512 };

// Where one reduction of an RR_AVG stands (ranks 0: not an average): a float average
// scales `mine` by 1/ranks, and the received segment too on the first reduction (it is one
// rank's raw input); an integer average divides the sum on the last reduction.
struct AvgStep {
  int ranks = 0;
  bool first = false;
  bool last = false;
};

using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count,
                          rr_dtype_t dtype, rr_op_t op);
// dst[i] = src[i] * (1 / ranks) for a float dtype, computed as reduce computes (fp16 and
// bf16 in fp32) and rounded to the element type; dst may be src.
using ScaleFn = void (*)(void* dst, const void* src, size_t count, rr_dtype_t dtype, int ranks);

const char* isaName(Isa isa);
// Whether this CPU can run the implementation for `isa`.
bool isaSupported(Isa isa);
// The implementation for `isa` (whether or not this CPU supports it).
ReduceFn reducerFor(Isa isa);
// The best supported implementation, chosen on first use.
Isa bestIsa();
ReduceFn bestReducer();
ScaleFn scalerFor(Isa isa);
ScaleFn bestScaler();

void reduceReference(void* dst, const void* a, const void* b, size_t count, rr_dtype_t dtype,
                     rr_op_t op);
void scaleReference(void* dst, const void* src, size_t count, rr_dtype_t dtype, int ranks);
// The value of a float element at p as a double (0 for integer dtypes); for checks.
double floatValueAt(const void* p, rr_dtype_t dtype);
// Elements equal bit for bit, except a float RR_AVG, which scales each input by 1/n before
// the sum and may differ from sum-then-divide by its rounding: then within a relative
// tolerance of the dtype's precision. For checks of results (tests, `ringreduce bench`).
bool sameResult(const void* got, const void* want, size_t count, rr_dtype_t dtype, rr_op_t op);
// data[i] = data[i] / ranks, in the element type (integers truncate toward zero; fp16 and
// bf16 divide in fp32).
void finalizeAvg(void* data, size_t count, rr_dtype_t dtype, int ranks);

}  // namespace rr
