// Element arithmetic of the device reducers, as __host__ __device__ functions so that the
// same code runs in the CUDA kernels and in a host test against the scalar reference
// (test/test_device_math.cu). The rules are those of kernels/reduce_reference.cc: integer
// SUM/PROD wrap, MIN/MAX as `a < b ? a : b` with NaN propagated (a NaN first operand, then a
// NaN second one), fp16 and bf16 computed in fp32 and rounded to nearest even. RR_AVG
// (kernels/reduce.h, AvgStep): floats scale each contribution by 1/ranks where it enters the
// sum, rounded to the element type as the host's scale-then-sum does (explicit _rn
// operations: no fused multiply-add); integers divide the finished sum, truncating.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/reduce.h"
#include "ringreduce/ringreduce.h"

namespace rr::cuda {

// Storage types of the two 16-bit floats (raw bits; the conversions below are the only
// place their format is known).
struct Fp16 { uint16_t bits; };
struct Bf16 { uint16_t bits; };

__host__ __device__ inline float bitsToFloat(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
__host__ __device__ inline uint32_t floatToBits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

__host__ __device__ inline float toCompute(Fp16 x) {
  return __half2float(__ushort_as_half(x.bits));
}
__host__ __device__ inline Fp16 fromCompute(float f, Fp16) {
  return Fp16{__half_as_ushort(__float2half_rn(f))};
}
__host__ __device__ inline float toCompute(Bf16 x) {
  return bitsToFloat(static_cast<uint32_t>(x.bits) << 16);
}
__host__ __device__ inline Bf16 fromCompute(float f, Bf16) {
  uint32_t u = floatToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bf16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<uint16_t>(u >> 16)};
}
template <class T>
__host__ __device__ inline T toCompute(T x) { return x; }
template <class T>
__host__ __device__ inline T fromCompute(T x, T) { return x; }

template <class T>
struct ComputeOf { using type = T; };
template <>
struct ComputeOf<Fp16> { using type = float; };
template <>
struct ComputeOf<Bf16> { using type = float; };

template <class C>
__host__ __device__ inline C combine(C x, C y, rr_op_t op) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    switch (op) {
      case RR_SUM:
      case RR_AVG: return static_cast<C>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
      case RR_PROD: return static_cast<C>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
      case RR_MIN: return y < x ? y : x;
      case RR_MAX: return y > x ? y : x;
    }
  } else {
    switch (op) {
      case RR_SUM:
      case RR_AVG: return x + y;
      case RR_PROD: return x * y;
      case RR_MIN:
      case RR_MAX:
        if (x != x) return x;
        if (y != y) return y;
        return op == RR_MIN ? (x < y ? x : y) : (x > y ? x : y);
    }
  }
  return x;
}

// Multiply and add rounded on their own, never contracted into a fused multiply-add, so
// that the device rounds as the host's separate scale and sum passes do.
template <class C>
__host__ __device__ inline C mulRn(C x, C y) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<C, float>) return __fmul_rn(x, y);
  else return __dmul_rn(x, y);
#else
  return x * y;
#endif
}
template <class C>
__host__ __device__ inline C addRn(C x, C y) {
#ifdef __CUDA_ARCH__
  if constexpr (std::is_same_v<C, float>) return __fadd_rn(x, y);
  else return __dadd_rn(x, y);
#else
  return x + y;
#endif
}

// The finished sum divided by `ranks` (> 1), in the element type: floats divide in their
// compute type after the sum was rounded to storage, integers truncate toward zero.
template <class T>
__host__ __device__ inline T divideAvg(T sum, int ranks) {
  using C = typename ComputeOf<T>::type;
  if constexpr (std::is_floating_point_v<C>) {
    return fromCompute(static_cast<C>(toCompute(sum) / static_cast<C>(ranks)), T{});
  } else if constexpr (std::is_signed_v<C>) {
    return static_cast<T>(static_cast<int64_t>(sum) / ranks);
  } else {
    return static_cast<T>(static_cast<uint64_t>(sum) / static_cast<uint64_t>(ranks));
  }
}

// One element: mine op received; for an average (avg.ranks > 1, op RR_SUM) see the top.
template <class T>
__host__ __device__ inline T reduceElement(T mine, T received, rr_op_t op, AvgStep avg) {
  using C = typename ComputeOf<T>::type;
  if constexpr (std::is_floating_point_v<C>) {
    if (avg.ranks > 1) {
      const C s = C(1) / static_cast<C>(avg.ranks);
      const T a = fromCompute(mulRn(toCompute(mine), s), T{});
      const T b = avg.first ? fromCompute(mulRn(toCompute(received), s), T{}) : received;
      return fromCompute(addRn(toCompute(a), toCompute(b)), T{});
    }
  }
  T r = fromCompute(combine<C>(toCompute(mine), toCompute(received), op), T{});
  return avg.ranks > 1 && avg.last ? divideAvg(r, avg.ranks) : r;
}

}  // namespace rr::cuda
