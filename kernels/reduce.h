// Host reduction: dst[i] = a[i] op b[i] for every dtype and op.
//
// Three implementations share one signature: the scalar reference (the test oracle, written
// element by element), and the same vectorised source compiled for baseline x86-64, AVX2 and
// AVX-512; the best one the CPU supports is chosen once at run time (no -march=native).
// dst may be a or b exactly (in place); partial overlap is not allowed.
// RR_AVG reduces as RR_SUM; finalizeAvg divides the finished sum by the number of ranks.
#pragma once

#include <cstddef>

#include "ringreduce/ringreduce.h"

namespace rr {

enum class Isa { kBaseline, kAvx2, kAvx512 };

using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count,
                          rr_dtype_t dtype, rr_op_t op);

const char* isaName(Isa isa);
// Whether this CPU can run the implementation for `isa`.
bool isaSupported(Isa isa);
// The implementation for `isa` (whether or not this CPU supports it).
ReduceFn reducerFor(Isa isa);
// The best supported implementation, chosen on first use.
Isa bestIsa();
ReduceFn bestReducer();

void reduceReference(void* dst, const void* a, const void* b, size_t count, rr_dtype_t dtype,
                     rr_op_t op);
// data[i] = data[i] / ranks, in the element type (integers truncate toward zero; fp16 and
// bf16 divide in fp32).
void finalizeAvg(void* data, size_t count, rr_dtype_t dtype, int ranks);

}  // namespace rr
