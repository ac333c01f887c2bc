// The scalar reference reducer: one element at a time, through a switch, so that it is
// obviously right. It is the oracle the vectorised reducers are tested against, and it is
// compiled without auto-vectorisation (see meson.build).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/dtype.h"
#include "kernels/half.h"
#include "kernels/reduce.h"

namespace rr {
namespace {

template <class T>
T combine(T x, T y, rr_op_t op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case RR_SUM:
      case RR_AVG: return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
      case RR_PROD: return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
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
        if (x != x) return x;  // NaN propagates: the first operand's, then the second's
        if (y != y) return y;
        return op == RR_MIN ? (x < y ? x : y) : (x > y ? x : y);
    }
  }
  return x;
}

template <class T>
void referenceLoop(void* dst, const void* a, const void* b, size_t count, rr_op_t op) {
  for (size_t i = 0; i < count; ++i) {
    T x, y;
    std::memcpy(&x, static_cast<const char*>(a) + i * sizeof(T), sizeof(T));
    std::memcpy(&y, static_cast<const char*>(b) + i * sizeof(T), sizeof(T));
    T r = combine(x, y, op);
    std::memcpy(static_cast<char*>(dst) + i * sizeof(T), &r, sizeof(T));
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void referenceHalfLoop(void* dst, const void* a, const void* b, size_t count, rr_op_t op) {
  for (size_t i = 0; i < count; ++i) {
    uint16_t x, y;
    std::memcpy(&x, static_cast<const char*>(a) + 2 * i, 2);
    std::memcpy(&y, static_cast<const char*>(b) + 2 * i, 2);
    uint16_t r = FromFloat(combine(ToFloat(x), ToFloat(y), op));
    std::memcpy(static_cast<char*>(dst) + 2 * i, &r, 2);
  }
}

template <class T>
void avgLoop(void* data, size_t count, int ranks) {
  for (size_t i = 0; i < count; ++i) {
    T x;
    std::memcpy(&x, static_cast<char*>(data) + i * sizeof(T), sizeof(T));
    if constexpr (std::is_floating_point_v<T>)
      x = x / static_cast<T>(ranks);
    else if constexpr (std::is_signed_v<T>)
      x = static_cast<T>(static_cast<int64_t>(x) / ranks);
    else
      x = static_cast<T>(static_cast<uint64_t>(x) / static_cast<uint64_t>(ranks));
    std::memcpy(static_cast<char*>(data) + i * sizeof(T), &x, sizeof(T));
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void avgHalfLoop(void* data, size_t count, int ranks) {
  auto* p = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = FromFloat(ToFloat(p[i]) / static_cast<float>(ranks));
}

template <class T>
void scaleRefLoop(void* dst, const void* src, size_t count, int ranks) {
  const T s = T(1) / static_cast<T>(ranks);
  for (size_t i = 0; i < count; ++i) {
    T x;
    std::memcpy(&x, static_cast<const char*>(src) + i * sizeof(T), sizeof(T));
    x = x * s;
    std::memcpy(static_cast<char*>(dst) + i * sizeof(T), &x, sizeof(T));
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void scaleRefHalfLoop(void* dst, const void* src, size_t count, int ranks) {
  const float s = 1.0f / static_cast<float>(ranks);
  for (size_t i = 0; i < count; ++i) {
    uint16_t x;
    std::memcpy(&x, static_cast<const char*>(src) + 2 * i, 2);
    x = FromFloat(ToFloat(x) * s);
    std::memcpy(static_cast<char*>(dst) + 2 * i, &x, 2);
  }
}

}  // namespace

void scaleReference(void* dst, const void* src, size_t count, rr_dtype_t dtype, int ranks) {
  switch (dtype) {
    case RR_FLOAT32: return scaleRefLoop<float>(dst, src, count, ranks);
    case RR_FLOAT64: return scaleRefLoop<double>(dst, src, count, ranks);
    case RR_FLOAT16: return scaleRefHalfLoop<fp16ToFloat, floatToFp16>(dst, src, count, ranks);
    case RR_BFLOAT16: return scaleRefHalfLoop<bf16ToFloat, floatToBf16>(dst, src, count, ranks);
    default: return;
  }
}

void reduceReference(void* dst, const void* a, const void* b, size_t count, rr_dtype_t dtype,
                     rr_op_t op) {
  switch (dtype) {
    case RR_FLOAT32: return referenceLoop<float>(dst, a, b, count, op);
    case RR_FLOAT64: return referenceLoop<double>(dst, a, b, count, op);
    case RR_FLOAT16: return referenceHalfLoop<fp16ToFloat, floatToFp16>(dst, a, b, count, op);
    case RR_BFLOAT16: return referenceHalfLoop<bf16ToFloat, floatToBf16>(dst, a, b, count, op);
    case RR_INT8: return referenceLoop<int8_t>(dst, a, b, count, op);
    case RR_UINT8: return referenceLoop<uint8_t>(dst, a, b, count, op);
    case RR_INT32: return referenceLoop<int32_t>(dst, a, b, count, op);
    case RR_UINT32: return referenceLoop<uint32_t>(dst, a, b, count, op);
    case RR_INT64: return referenceLoop<int64_t>(dst, a, b, count, op);
    case RR_UINT64: return referenceLoop<uint64_t>(dst, a, b, count, op);
  }
}

void finalizeAvg(void* data, size_t count, rr_dtype_t dtype, int ranks) {
  if (ranks == 1) return;
  switch (dtype) {
    case RR_FLOAT32: return avgLoop<float>(data, count, ranks);
    case RR_FLOAT64: return avgLoop<double>(data, count, ranks);
    case RR_FLOAT16: return avgHalfLoop<fp16ToFloat, floatToFp16>(data, count, ranks);
    case RR_BFLOAT16: return avgHalfLoop<bf16ToFloat, floatToBf16>(data, count, ranks);
    case RR_INT8: return avgLoop<int8_t>(data, count, ranks);
    case RR_UINT8: return avgLoop<uint8_t>(data, count, ranks);
    case RR_INT32: return avgLoop<int32_t>(data, count, ranks);
    case RR_UINT32: return avgLoop<uint32_t>(data, count, ranks);
    case RR_INT64: return avgLoop<int64_t>(data, count, ranks);
    case RR_UINT64: return avgLoop<uint64_t>(data, count, ranks);
  }
}

double floatValueAt(const void* p, rr_dtype_t dtype) {
  switch (dtype) {
    case RR_FLOAT32: { float f; std::memcpy(&f, p, 4); return f; }
    case RR_FLOAT64: { double d; std::memcpy(&d, p, 8); return d; }
    case RR_FLOAT16: { uint16_t h; std::memcpy(&h, p, 2); return fp16ToFloat(h); }
    case RR_BFLOAT16: { uint16_t h; std::memcpy(&h, p, 2); return bf16ToFloat(h); }
    default: return 0;
  }
}

bool sameResult(const void* got, const void* want, size_t count, rr_dtype_t dtype, rr_op_t op) {
  const size_t es = dtypeSize(dtype);
  if (op != RR_AVG || !dtypeIsFloat(dtype)) return std::memcmp(got, want, count * es) == 0;
  const double tol = dtype == RR_FLOAT64 ? 1e-14 : dtype == RR_FLOAT32 ? 1e-6 : dtype == RR_FLOAT16 ? 4e-3 : 3e-2;
  const auto* g = static_cast<const uint8_t*>(got);
  const auto* w = static_cast<const uint8_t*>(want);
  for (size_t i = 0; i < count; ++i) {
    const double a = floatValueAt(g + i * es, dtype), b = floatValueAt(w + i * es, dtype);
    if (!(std::fabs(a - b) <= tol * (std::fabs(b) + 1))) return false;
  }
  return true;
}

}  // namespace rr
