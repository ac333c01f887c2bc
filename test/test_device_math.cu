// The device kernels' element arithmetic (kernels/cuda/device_math.cuh), run on the host,
// against the scalar reference: every dtype and op, bit for bit, on random finite values
// (random bit patterns for the integers and the 16-bit floats) plus zeros of both signs,
// with and without the RR_AVG division by 3 ranks. Needs nvcc, not a GPU.
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

bool finite16(uint16_t bits, bool fp16) {
  return fp16 ? (bits & 0x7c00u) != 0x7c00u : (bits & 0x7f80u) != 0x7f80u;
}

// Random elements of `es` bytes; floats finite, the first two elements +0 and -0.
std::vector<uint8_t> values(rr_dtype_t dtype, size_t count, std::mt19937_64& rng) {
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
  }
  return v;
}

template <class T>
void deviceLoop(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t count, rr_op_t op, int avgRanks) {
  for (size_t i = 0; i < count; ++i) {
    T x, y;
    std::memcpy(&x, a + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b + i * sizeof(T), sizeof(T));
    const T r = rr::cuda::reduceElement<T>(x, y, op, avgRanks);
    std::memcpy(dst + i * sizeof(T), &r, sizeof(T));
  }
}

void device(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t count, rr_dtype_t dtype, rr_op_t op, int avgRanks) {
  switch (dtype) {
    case RR_FLOAT32: return deviceLoop<float>(dst, a, b, count, op, avgRanks);
    case RR_FLOAT64: return deviceLoop<double>(dst, a, b, count, op, avgRanks);
    case RR_FLOAT16: return deviceLoop<Fp16>(dst, a, b, count, op, avgRanks);
    case RR_BFLOAT16: return deviceLoop<Bf16>(dst, a, b, count, op, avgRanks);
    case RR_INT8: return deviceLoop<int8_t>(dst, a, b, count, op, avgRanks);
    case RR_UINT8: return deviceLoop<uint8_t>(dst, a, b, count, op, avgRanks);
    case RR_INT32: return deviceLoop<int32_t>(dst, a, b, count, op, avgRanks);
    case RR_UINT32: return deviceLoop<uint32_t>(dst, a, b, count, op, avgRanks);
    case RR_INT64: return deviceLoop<int64_t>(dst, a, b, count, op, avgRanks);
    case RR_UINT64: return deviceLoop<uint64_t>(dst, a, b, count, op, avgRanks);
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
    const std::vector<uint8_t> a = values(dtype, count, rng), b = values(dtype, count, rng);
    for (int o = 0; o < rr::kNumOps; ++o) {
      const auto op = static_cast<rr_op_t>(o);
      for (int ranks : {0, 3}) {
        if (ranks > 0 && op != RR_AVG) continue;
        std::vector<uint8_t> want(count * es), got(count * es);
        rr::reduceReference(want.data(), a.data(), b.data(), count, dtype, op);
        if (ranks > 0) rr::finalizeAvg(want.data(), count, dtype, ranks);
        device(got.data(), a.data(), b.data(), count, dtype, op, ranks);
        for (size_t i = 0; i < count; ++i, ++compared) {
          if (std::memcmp(got.data() + i * es, want.data() + i * es, es) == 0) continue;
          if (++failures <= 10)
            std::printf("FAILED: %s %s%s element %zu differs from the reference\n",
                        rr::dtypeName(dtype), rr::opName(op), ranks > 0 ? " (last step, 3 ranks)" : "", i);
        }
      }
    }
  }
  std::printf("device element arithmetic vs the scalar reference: %ld elements compared, %ld differ\n",
              compared, failures);
  return failures == 0 ? 0 : 1;
}
