// Every vectorised reducer against the scalar reference: every dtype and op, lengths that
// leave vector tails, unaligned heads, in place and out of place, bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/half.h"
#include "kernels/reduce.h"

namespace {

// Random bytes that form finite values of the dtype (no NaN, whose payload may differ).
void randomFill(uint8_t* p, size_t count, rr_dtype_t dtype, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> real(-1000.f, 1000.f);
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case RR_FLOAT32: { float v = real(rng); std::memcpy(p + 4 * i, &v, 4); break; }
      case RR_FLOAT64: { double v = real(rng) * 1.0000001; std::memcpy(p + 8 * i, &v, 8); break; }
      case RR_FLOAT16: {
        uint16_t v;
        do v = static_cast<uint16_t>(rng()); while ((v & 0x7c00) == 0x7c00);
        std::memcpy(p + 2 * i, &v, 2);
        break;
      }
      case RR_BFLOAT16: {
        uint16_t v;
        do v = static_cast<uint16_t>(rng()); while ((v & 0x7f80) == 0x7f80);
        std::memcpy(p + 2 * i, &v, 2);
        break;
      }
      default: {
        uint64_t v = rng();
        std::memcpy(p + rr::dtypeSize(dtype) * i, &v, rr::dtypeSize(dtype));
      }
    }
  }
}

void put(uint8_t* p, double v, rr_dtype_t dtype) {
  switch (dtype) {
    case RR_FLOAT32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case RR_FLOAT64: std::memcpy(p, &v, 8); break;
    case RR_FLOAT16: { uint16_t h = rr::floatToFp16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case RR_BFLOAT16: { uint16_t h = rr::floatToBf16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    default: break;
  }
}

}  // namespace

TEST_CASE("vectorised reducers match the scalar reference bit for bit") {
  std::mt19937_64 rng(42);
  for (rr::Isa isa : {rr::Isa::kBaseline, rr::Isa::kAvx2, rr::Isa::kAvx512}) {
    if (!rr::isaSupported(isa)) {
      WARN("skipping " << rr::isaName(isa) << ": this CPU lacks it");
      continue;
    }
    rr::ReduceFn fn = rr::reducerFor(isa);
    for (int d = 0; d < rr::kNumDtypes; ++d) {
      const auto dtype = static_cast<rr_dtype_t>(d);
      const size_t es = rr::dtypeSize(dtype);
      for (int o = 0; o < rr::kNumOps; ++o) {
        const auto op = static_cast<rr_op_t>(o);
        for (size_t count : {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 1003}) {
          for (size_t head : {0, 1, 3}) {
            INFO(rr::isaName(isa) << " " << rr::dtypeName(dtype) << " " << rr::opName(op)
                                  << " count " << count << " head " << head);
            std::vector<uint8_t> a((count + head + 1) * es), b(a.size()), want(a.size()),
                got(a.size());
            randomFill(a.data(), count + head + 1, dtype, rng);
            randomFill(b.data(), count + head + 1, dtype, rng);
            const size_t off = head * es;
            rr::reduceReference(want.data() + off, a.data() + off, b.data() + off, count, dtype, op);
            fn(got.data() + off, a.data() + off, b.data() + off, count, dtype, op);
            REQUIRE(std::memcmp(got.data() + off, want.data() + off, count * es) == 0);
            // in place: dst == a
            std::vector<uint8_t> inplace = a;
            fn(inplace.data() + off, inplace.data() + off, b.data() + off, count, dtype, op);
            REQUIRE(std::memcmp(inplace.data() + off, want.data() + off, count * es) == 0);
            // nothing outside [off, off + count) is written
            REQUIRE(std::memcmp(inplace.data() + off + count * es, a.data() + off + count * es, es) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("reference semantics: wrap-around, truncating average, fp16/bf16 in fp32") {
  int8_t a = 100, b = 100, r = 0;
  rr::reduceReference(&r, &a, &b, 1, RR_INT8, RR_SUM);
  REQUIRE(r == static_cast<int8_t>(-56));
  int32_t v = -7;
  rr::finalizeAvg(&v, 1, RR_INT32, 2);
  REQUIRE(v == -3);
  uint64_t u = 7;
  rr::finalizeAvg(&u, 1, RR_UINT64, 2);
  REQUIRE(u == 3);
  uint16_t h1 = rr::floatToFp16(1.5f), h2 = rr::floatToFp16(2.25f), hr = 0;
  rr::reduceReference(&hr, &h1, &h2, 1, RR_FLOAT16, RR_SUM);
  REQUIRE(rr::fp16ToFloat(hr) == 3.75f);
  uint16_t g1 = rr::floatToBf16(3.0f), g2 = rr::floatToBf16(-5.0f), gr = 0;
  rr::reduceReference(&gr, &g1, &g2, 1, RR_BFLOAT16, RR_MIN);
  REQUIRE(rr::bf16ToFloat(gr) == -5.0f);
  REQUIRE(rr::floatToBf16(1.0f + 1.0f / 256) == rr::floatToBf16(1.0f));  // ties to even
  REQUIRE(std::isnan(rr::bf16ToFloat(rr::floatToBf16(std::nanf("")))));
}

TEST_CASE("MIN and MAX propagate a NaN from either operand, on every reducer, at every lane") {
  for (rr::Isa isa : {rr::Isa::kBaseline, rr::Isa::kAvx2, rr::Isa::kAvx512}) {
    if (!rr::isaSupported(isa)) continue;
    rr::ReduceFn fn = rr::reducerFor(isa);
    for (rr_dtype_t dtype : {RR_FLOAT32, RR_FLOAT64, RR_FLOAT16, RR_BFLOAT16}) {
      const size_t es = rr::dtypeSize(dtype), count = 37;
      for (rr_op_t op : {RR_MIN, RR_MAX}) {
        for (size_t at = 0; at < count; ++at) {
          for (int side = 0; side < 2; ++side) {
            INFO(rr::isaName(isa) << " " << rr::dtypeName(dtype) << " " << rr::opName(op)
                                  << " NaN at " << at << " in operand " << side);
            std::vector<uint8_t> a(count * es), b(count * es), got(count * es), want(count * es);
            for (size_t i = 0; i < count; ++i) {
              const double x = static_cast<double>(i) - 10, y = 7.0 - static_cast<double>(i);
              put(a.data() + i * es, x, dtype);
              put(b.data() + i * es, y, dtype);
            }
            put((side == 0 ? a : b).data() + at * es, std::nan(""), dtype);
            fn(got.data(), a.data(), b.data(), count, dtype, op);
            rr::reduceReference(want.data(), a.data(), b.data(), count, dtype, op);
            for (size_t i = 0; i < count; ++i) {
              REQUIRE(std::isnan(rr::floatValueAt(got.data() + i * es, dtype)) == (i == at));
              REQUIRE(std::isnan(rr::floatValueAt(want.data() + i * es, dtype)) == (i == at));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("the float average's scale matches the scalar reference bit for bit") {
  std::mt19937_64 rng(7);
  for (rr::Isa isa : {rr::Isa::kBaseline, rr::Isa::kAvx2, rr::Isa::kAvx512}) {
    if (!rr::isaSupported(isa)) continue;
    rr::ScaleFn fn = rr::scalerFor(isa);
    for (rr_dtype_t dtype : {RR_FLOAT32, RR_FLOAT64, RR_FLOAT16, RR_BFLOAT16}) {
      const size_t es = rr::dtypeSize(dtype);
      for (size_t count : {0, 1, 7, 8, 9, 33, 1003}) {
        for (int ranks : {2, 3, 7}) {
          INFO(rr::isaName(isa) << " " << rr::dtypeName(dtype) << " count " << count << " ranks " << ranks);
          std::vector<uint8_t> a(count * es + 1), got(a.size()), want(a.size());
          randomFill(a.data(), count, dtype, rng);
          rr::scaleReference(want.data(), a.data(), count, dtype, ranks);
          fn(got.data(), a.data(), count, dtype, ranks);
          REQUIRE(std::memcmp(got.data(), want.data(), count * es) == 0);
        }
      }
    }
  }
}
