// Element arithmetic of the device reducers, as __host__ __device__ functions so that the
// same code runs in the CUDA kernels and in a host test against the scalar reference
// (test/test_device_math.cu). The rules are those of kernels/reduce_reference.cc: integer
// SUM/PROD wrap, MIN/MAX as `a < b ? a : b`, fp16 and bf16 computed in fp32 and rounded to
// nearest even, RR_AVG divides the finished sum by the number of ranks in the element type.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

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
      case RR_MIN: return x < y ? x : y;
      case RR_MAX: return x > y ? x : y;
    }
  }
  return x;
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

// One element: mine op received, then divided when it is the last reduction of an average
// (avgRanks > 1), else avgRanks is 0.
template <class T>
__host__ __device__ inline T reduceElement(T mine, T received, rr_op_t op, int avgRanks) {
  using C = typename ComputeOf<T>::type;
  T r = fromCompute(combine<C>(toCompute(mine), toCompute(received), op), T{});
  return avgRanks > 1 ? divideAvg(r, avgRanks) : r;
}

}  // namespace rr::cuda
