// The device kernels' element arithmetic (kernels/cuda/device_math.cuh), run on the host,
// against the scalar reference: every dtype and op, bit for bit, on random finite values
// (random bit patterns for the integers and the 16-bit floats) plus zeros of both signs and
// NaNs (MIN and MAX propagate them), and RR_AVG's steps on 3 ranks (first, middle, last:
// floats scaled as the host's scale-then-sum, integers divided at the last). Needs nvcc,
// not a GPU.
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/device_math.cuh"
#include "kernels/dtype.h"
#include "kernels/reduce.h"

namespace {

using rr::cuda::Bf16;
using rr::cuda::Fp16;

// Whether the element at p is a NaN (any payload: conversions may choose another one).
bool isNan(const uint8_t* p, rr_dtype_t dtype) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, rr::dtypeSize(dtype));
  switch (dtype) {
    case RR_FLOAT32: return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu) != 0;
    case RR_FLOAT64: return (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (bits & 0xfffffffffffffull) != 0;
    case RR_FLOAT16: return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
    case RR_BFLOAT16: return (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0;
    default: return false;
  }
}

bool finite16(uint16_t bits, bool fp16) {
  return fp16 ? (bits & 0x7c00u) != 0x7c00u : (bits & 0x7f80u) != 0x7f80u;
}

// Random elements of `es` bytes; floats finite, the first two elements +0 and -0, and for
// floats a NaN at `nanAt`.
std::vector<uint8_t> values(rr_dtype_t dtype, size_t count, std::mt19937_64& rng, size_t nanAt) {
  const size_t es = rr::dtypeSize(dtype);
  std::vector<uint8_t> v(count * es);
  std::uniform_real_distribution<double> real(-1e3, 1e3);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = v.data() + i * es;
    if (dtype == RR_FLOAT32) {
      const float f = i < 2 ? (i == 0 ? 0.0f : -0.0f) : static_cast<float>(real(rng));
      std::memcpy(p, &f, 4);
    } else if (dtype == RR_FLOAT64) {
      const double d = i < 2 ? (i == 0 ? 0.0 : -0.0) : real(rng);
      std::memcpy(p, &d, 8);
    } else if (dtype == RR_FLOAT16 || dtype == RR_BFLOAT16) {
      uint16_t bits;
      do bits = static_cast<uint16_t>(rng()); while (!finite16(bits, dtype == RR_FLOAT16));
      if (i < 2) bits = i == 0 ? 0 : 0x8000;
      std::memcpy(p, &bits, 2);
    } else {
      const uint64_t bits = rng();
      std::memcpy(p, &bits, es);
    }
    if (i == nanAt && rr::dtypeIsFloat(dtype)) {
      const uint64_t nan = es == 8 ? 0x7ff8000000000000ull : es == 4 ? 0x7fc00000u : dtype == RR_FLOAT16 ? 0x7e00u : 0x7fc0u;
      std::memcpy(p, &nan, es);
    }
  }
  return v;
}

template <class T>
void deviceLoop(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t count, rr_op_t op, rr::AvgStep avg) {
  for (size_t i = 0; i < count; ++i) {
    T x, y;
    std::memcpy(&x, a + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b + i * sizeof(T), sizeof(T));
    const T r = rr::cuda::reduceElement<T>(x, y, op, avg);
    std::memcpy(dst + i * sizeof(T), &r, sizeof(T));
  }
}

void device(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t count, rr_dtype_t dtype, rr_op_t op, rr::AvgStep avg) {
  switch (dtype) {
    case RR_FLOAT32: return deviceLoop<float>(dst, a, b, count, op, avg);
    case RR_FLOAT64: return deviceLoop<double>(dst, a, b, count, op, avg);
    case RR_FLOAT16: return deviceLoop<Fp16>(dst, a, b, count, op, avg);
    case RR_BFLOAT16: return deviceLoop<Bf16>(dst, a, b, count, op, avg);
    case RR_INT8: return deviceLoop<int8_t>(dst, a, b, count, op, avg);
    case RR_UINT8: return deviceLoop<uint8_t>(dst, a, b, count, op, avg);
    case RR_INT32: return deviceLoop<int32_t>(dst, a, b, count, op, avg);
    case RR_UINT32: return deviceLoop<uint32_t>(dst, a, b, count, op, avg);
    case RR_INT64: return deviceLoop<int64_t>(dst, a, b, count, op, avg);
    case RR_UINT64: return deviceLoop<uint64_t>(dst, a, b, count, op, avg);
  }
}

}  // namespace

int main() {
  std::mt19937_64 rng(20261130);
  const size_t count = 20000;
  long compared = 0, failures = 0;
  for (int d = 0; d < rr::kNumDtypes; ++d) {
    const auto dtype = static_cast<rr_dtype_t>(d);
    const size_t es = rr::dtypeSize(dtype);
    const std::vector<uint8_t> a = values(dtype, count, rng, 2), b = values(dtype, count, rng, 3);
    for (int o = 0; o < rr::kNumOps; ++o) {
      const auto op = static_cast<rr_op_t>(o);
      const std::vector<rr::AvgStep> steps =
          op == RR_AVG ? std::vector<rr::AvgStep>{{3, true, false}, {3, false, false}, {3, false, true}}
                       : std::vector<rr::AvgStep>{{}};
      for (const rr::AvgStep avg : steps) {
        std::vector<uint8_t> want(count * es), got(count * es), in = b;
        if (avg.ranks > 1 && rr::dtypeIsFloat(dtype)) {  // the host pass: scale, then sum
          if (avg.first) rr::scaleReference(in.data(), in.data(), count, dtype, avg.ranks);
          rr::scaleReference(want.data(), a.data(), count, dtype, avg.ranks);
          rr::reduceReference(want.data(), want.data(), in.data(), count, dtype, RR_SUM);
        } else {
          rr::reduceReference(want.data(), a.data(), b.data(), count, dtype, op);
          if (avg.ranks > 1 && avg.last) rr::finalizeAvg(want.data(), count, dtype, avg.ranks);
        }
        device(got.data(), a.data(), b.data(), count, dtype, op, avg);
        for (size_t i = 0; i < count; ++i, ++compared) {
          if (std::memcmp(got.data() + i * es, want.data() + i * es, es) == 0) continue;
          if (isNan(got.data() + i * es, dtype) && isNan(want.data() + i * es, dtype)) continue;
          if (++failures <= 10)
            std::printf("FAILED: %s %s%s element %zu differs from the reference\n",
                        rr::dtypeName(dtype), rr::opName(op),
                        avg.ranks > 0 ? (avg.first ? " (first step)" : avg.last ? " (last step)" : " (middle step)") : "", i);
        }
      }
    }
  }
  std::printf("device element arithmetic vs the scalar reference: %ld elements compared, %ld differ\n",
              compared, failures);
  return failures == 0 ? 0 : 1;
}
