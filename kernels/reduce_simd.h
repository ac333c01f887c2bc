// The vectorised reducer, written once and compiled once per instruction set: each
// reduce_<isa>.cc defines RR_ISA and includes this file with its own -m flags (meson.build).
// Everything here has internal linkage except RR_ISA::reduce, so the copies built with
// different flags can never be mixed up by the linker.
//
// The loops are plain element-wise code that GCC vectorises at -O3; fp16 has explicit F16C
// conversions because GCC 12 does not vectorise _Float16 <-> float. Integer SUM and PROD go
// through the unsigned type (wrap-around, no undefined behaviour). Results are bit-identical
// to reduceReference: the same operations in the same precision, element by element.
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "kernels/dtype.h"
#include "kernels/half.h"

#ifndef RR_ISA
#error "define RR_ISA before including reduce_simd.h"
#endif

namespace {

template <class T>
struct Sum {
  T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
    } else {
      return x + y;
    }
  }
};
template <class T>
struct Prod {
  T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
    } else {
      return x * y;
    }
  }
};
// NaN propagates: a NaN first operand wins, then a NaN second one (as the reference).
template <class T>
struct Min {
  T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (x != x) return x;
      if (y != y) return y;
    }
    return x < y ? x : y;
  }
};
template <class T>
struct Max {
  T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (x != x) return x;
      if (y != y) return y;
    }
    return x > y ? x : y;
  }
};

template <class T, class F>
void loop(void* dst, const void* a, const void* b, size_t n, F f) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = f(x[i], y[i]);
}

template <class F>
void bf16Loop(void* dst, const void* a, const void* b, size_t n, F f) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = rr::floatToBf16(f(rr::bf16ToFloat(x[i]), rr::bf16ToFloat(y[i])));
}

#if defined(__F16C__)
// NaN propagates as in Min/Max: x if x is NaN, else y if y is NaN.
inline __m256 keepNan(__m256 r, __m256 x, __m256 y) {
  r = _mm256_blendv_ps(r, y, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

inline __m256 vecOp(__m256 x, __m256 y, rr_op_t op) {
  switch (op) {
    case RR_PROD: return _mm256_mul_ps(x, y);
    case RR_MIN: return keepNan(_mm256_min_ps(x, y), x, y);  // (x < y) ? x : y, as the reference
    case RR_MAX: return keepNan(_mm256_max_ps(x, y), x, y);  // (x > y) ? x : y
    default: return _mm256_add_ps(x, y);
  }
}
#endif

template <class F>
void fp16Loop(void* dst, const void* a, const void* b, size_t n, rr_op_t op, F f) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    __m256 vx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    __m256 vy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    __m128i r = _mm256_cvtps_ph(vecOp(vx, vy, op), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), r);
  }
#else
  (void)op;
#endif
  for (; i < n; ++i) d[i] = rr::floatToFp16(f(rr::fp16ToFloat(x[i]), rr::fp16ToFloat(y[i])));
}

template <template <class> class F>
void dispatchType(void* dst, const void* a, const void* b, size_t n, rr_dtype_t dtype,
                  rr_op_t op) {
  switch (dtype) {
    case RR_FLOAT32: return loop<float>(dst, a, b, n, F<float>{});
    case RR_FLOAT64: return loop<double>(dst, a, b, n, F<double>{});
    case RR_FLOAT16: return fp16Loop(dst, a, b, n, op, F<float>{});
    case RR_BFLOAT16: return bf16Loop(dst, a, b, n, F<float>{});
    case RR_INT8: return loop<int8_t>(dst, a, b, n, F<int8_t>{});
    case RR_UINT8: return loop<uint8_t>(dst, a, b, n, F<uint8_t>{});
    case RR_INT32: return loop<int32_t>(dst, a, b, n, F<int32_t>{});
    case RR_UINT32: return loop<uint32_t>(dst, a, b, n, F<uint32_t>{});
    case RR_INT64: return loop<int64_t>(dst, a, b, n, F<int64_t>{});
    case RR_UINT64: return loop<uint64_t>(dst, a, b, n, F<uint64_t>{});
  }
}

template <class T>
void scaleLoop(void* dst, const void* src, size_t n, int ranks) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(src);
  const T s = T(1) / static_cast<T>(ranks);
  for (size_t i = 0; i < n; ++i) d[i] = x[i] * s;
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void scaleHalfLoop(void* dst, const void* src, size_t n, int ranks) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(src);
  const float s = 1.0f / static_cast<float>(ranks);
  size_t i = 0;
#if defined(__F16C__)
  if (ToFloat == rr::fp16ToFloat) {
    const __m256 vs = _mm256_set1_ps(s);
    for (; i + 8 <= n; i += 8) {
      __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
      __m128i r = _mm256_cvtps_ph(_mm256_mul_ps(v, vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), r);
    }
  }
#endif
  for (; i < n; ++i) d[i] = FromFloat(ToFloat(x[i]) * s);
}

}  // namespace

namespace rr::RR_ISA {

void scale(void* dst, const void* src, size_t count, rr_dtype_t dtype, int ranks) {
  switch (dtype) {
    case RR_FLOAT32: return scaleLoop<float>(dst, src, count, ranks);
    case RR_FLOAT64: return scaleLoop<double>(dst, src, count, ranks);
    case RR_FLOAT16: return scaleHalfLoop<rr::fp16ToFloat, rr::floatToFp16>(dst, src, count, ranks);
    case RR_BFLOAT16: return scaleHalfLoop<rr::bf16ToFloat, rr::floatToBf16>(dst, src, count, ranks);
    default: return;  // integers are not scaled (finalizeAvg divides their sum)
  }
}

void reduce(void* dst, const void* a, const void* b, size_t count, rr_dtype_t dtype,
            rr_op_t op) {
  switch (op) {
    case RR_SUM:
    case RR_AVG: return dispatchType<Sum>(dst, a, b, count, dtype, op);
    case RR_PROD: return dispatchType<Prod>(dst, a, b, count, dtype, op);
    case RR_MIN: return dispatchType<Min>(dst, a, b, count, dtype, op);
    case RR_MAX: return dispatchType<Max>(dst, a, b, count, dtype, op);
  }
}

}  // namespace rr::RR_ISA
