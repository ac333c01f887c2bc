// Chooses the reducer once, from what the CPU reports (cpuid through GCC's builtins).
#include "kernels/reduce.h"

namespace rr {
namespace baseline {
void reduce(void*, const void*, const void*, size_t, rr_dtype_t, rr_op_t);
void scale(void*, const void*, size_t, rr_dtype_t, int);
}
namespace avx2 {
void reduce(void*, const void*, const void*, size_t, rr_dtype_t, rr_op_t);
void scale(void*, const void*, size_t, rr_dtype_t, int);
}
namespace avx512 {
void reduce(void*, const void*, const void*, size_t, rr_dtype_t, rr_op_t);
void scale(void*, const void*, size_t, rr_dtype_t, int);
}

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kBaseline: break;
  }
  return "baseline";
}

bool isaSupported(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             isaSupported(Isa::kAvx2);
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case Isa::kBaseline: break;
  }
  return true;
}

ReduceFn reducerFor(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return avx512::reduce;
    case Isa::kAvx2: return avx2::reduce;
    case Isa::kBaseline: break;
  }
  return baseline::reduce;
}

Isa bestIsa() {
  static const Isa best = isaSupported(Isa::kAvx512) ? Isa::kAvx512
                          : isaSupported(Isa::kAvx2) ? Isa::kAvx2
                                                     : Isa::kBaseline;
  return best;
}

ReduceFn bestReducer() { return reducerFor(bestIsa()); }

ScaleFn scalerFor(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return avx512::scale;
    case Isa::kAvx2: return avx2::scale;
    case Isa::kBaseline: break;
  }
  return baseline::scale;
}

ScaleFn bestScaler() { return scalerFor(bestIsa()); }

}  // namespace rr
