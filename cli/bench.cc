// `ringreduce bench`; see bench.h.
#include "cli/bench.h"
#include "cli/device_buffers.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/dtype.h"
#include "kernels/half.h"
#include "kernels/reduce.h"

namespace rr::cli {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

Buffer allocate(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 64, std::max<size_t>(bytes, 64)) != 0) throw std::bad_alloc();
  std::memset(p, 0, std::max<size_t>(bytes, 64));
  return Buffer(static_cast<uint8_t*>(p));
}

// Input of `rank` at element i: small integers, so every dtype and every reduction order
// gives the exact same result (sums stay below 5n, products are powers of two below 2^n).
double inputValue(int rank, size_t i, rr_op_t op) {
  if (op == RR_PROD) return (i + static_cast<size_t>(rank)) % 3 == 0 ? 2.0 : 1.0;
  return static_cast<double>((i * 7 + static_cast<size_t>(rank) * 3) % 5 + 1);
}

void store(uint8_t* p, size_t i, rr_dtype_t dtype, double v) {
  switch (dtype) {
    case RR_FLOAT32: { float x = static_cast<float>(v); std::memcpy(p + 4 * i, &x, 4); break; }
    case RR_FLOAT64: std::memcpy(p + 8 * i, &v, 8); break;
    case RR_FLOAT16: { uint16_t x = floatToFp16(static_cast<float>(v)); std::memcpy(p + 2 * i, &x, 2); break; }
    case RR_BFLOAT16: { uint16_t x = floatToBf16(static_cast<float>(v)); std::memcpy(p + 2 * i, &x, 2); break; }
    case RR_INT8: case RR_UINT8: p[i] = static_cast<uint8_t>(static_cast<int>(v)); break;
    case RR_INT32: case RR_UINT32: { uint32_t x = static_cast<uint32_t>(v); std::memcpy(p + 4 * i, &x, 4); break; }
    case RR_INT64: case RR_UINT64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(p + 8 * i, &x, 8); break; }
  }
}

void fill(uint8_t* p, size_t count, rr_dtype_t dtype, int rank, rr_op_t op) {
  for (size_t i = 0; i < count; ++i) store(p, i, dtype, inputValue(rank, i, op));
}

struct Shape {
  size_t sendCount, recvCount, count;  // count: the `count` argument of the call
  double busFactor;
};

Shape shapeOf(const std::string& coll, size_t elems, int n) {
  const size_t nn = static_cast<size_t>(n);
  if (coll == "allreduce") return {elems, elems, elems, 2.0 * (n - 1) / n};
  if (coll == "broadcast") return {elems, elems, elems, 1.0};
  if (coll == "allgather") return {elems / nn, elems / nn * nn, elems / nn, double(n - 1) / n};
  return {elems / nn * nn, elems / nn, elems / nn, double(n - 1) / n};  // reduce_scatter
}

rr_result_t call(rr_comm_t comm, const BenchOptions& o, const Shape& s, uint8_t* send,
                 uint8_t* recv) {
  if (o.collective == "allreduce") return rr_allreduce(comm, send, recv, s.count, o.dtype, o.op, nullptr);
  if (o.collective == "broadcast") return rr_broadcast(comm, recv, s.count, o.dtype, o.root, nullptr);
  if (o.collective == "allgather") return rr_allgather(comm, send, recv, s.count, o.dtype, nullptr);
  return rr_reduce_scatter(comm, send, recv, s.count, o.dtype, o.op, nullptr);
}

// The expected receive buffer, computed with the scalar reference from every rank's input.
void expected(const BenchOptions& o, const Shape& s, int rank, int n, uint8_t* out, uint8_t* tmp) {
  const size_t es = dtypeSize(o.dtype);
  if (o.collective == "broadcast") return fill(out, s.recvCount, o.dtype, o.root, o.op);
  if (o.collective == "allgather") {
    for (int r = 0; r < n; ++r) fill(out + static_cast<size_t>(r) * s.count * es, s.count, o.dtype, r, o.op);
    return;
  }
  const size_t total = s.sendCount;
  uint8_t* acc = tmp;
  uint8_t* other = tmp + total * es;
  fill(acc, total, o.dtype, 0, o.op);
  for (int r = 1; r < n; ++r) {
    fill(other, total, o.dtype, r, o.op);
    reduceReference(acc, acc, other, total, o.dtype, o.op);
  }
  if (o.op == RR_AVG) finalizeAvg(acc, total, o.dtype, n);
  const size_t offset = o.collective == "reduce_scatter" ? static_cast<size_t>(rank) * s.count * es : 0;
  std::memcpy(out, acc + offset, s.recvCount * es);
}

// Elements that differ from the expected ones (a float average within its rounding).
uint64_t countWrong(const uint8_t* got, const uint8_t* want, size_t count, rr_dtype_t dtype, rr_op_t op) {
  const size_t es = dtypeSize(dtype);
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += !sameResult(got + i * es, want + i * es, 1, dtype, op);
  return wrong;
}

[[noreturn]] void die(const char* what, rr_result_t rc) {
  std::fprintf(stderr, "ringreduce bench: %s failed: %s: %s\n", what, rr_result_string(rc), rr_last_error());
  std::exit(1);
}

}  // namespace

size_t parseSize(const std::string& text) {
  // A number (digits and at most one point, no exponent, no sign) and an optional suffix.
  size_t pos = 0;
  bool point = false, digits = false;
  for (; pos < text.size(); ++pos) {
    if (std::isdigit(static_cast<unsigned char>(text[pos]))) digits = true;
    else if (text[pos] == '.' && !point) point = true;
    else break;
  }
  const std::string suffix = text.substr(pos);
  double mult = 1;
  if (suffix == "K" || suffix == "k") mult = 1024;
  else if (suffix == "M" || suffix == "m") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g") mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B" && suffix != "b") digits = false;
  if (!digits)
    throw std::invalid_argument("'" + text + "' is not a size (a number of bytes with an optional K, M or G suffix)");
  const double v = std::strtod(text.substr(0, pos).c_str(), nullptr) * mult;
  if (!(v <= static_cast<double>(size_t{1} << 50)))
    throw std::invalid_argument("'" + text + "' is larger than 1 PiB");
  return static_cast<size_t>(v);
}

size_t benchBytesPerRank(const BenchOptions& o) {
  // send and recv of the largest size; with the check, the expected result and two more
  // for computing it.
  return (o.check ? 5 : 2) * o.maxBytes;
}

namespace {

// One rank's run of the benchmark: its buffers (and GPU buffers with --device), then each
// size checked and timed, rank 0 printing the rows.
class Bench {
 public:
  explicit Bench(const BenchOptions& o) : o_(o), es_(dtypeSize(o.dtype)) {
    if (rr_result_t rc = rr_comm_init_from_env(&comm_); rc != RR_SUCCESS) die("rr_comm_init_from_env", rc);
    rr_comm_rank(comm_, &rank_);
    rr_comm_size(comm_, &n_);
    reduces_ = o.collective == "allreduce" || o.collective == "reduce_scatter";
    table_ = o.format == "table";
    allocateBuffers();
  }
  ~Bench() {
    rr_comm_destroy(comm_);
    if (o_.device) {
      deviceFree(gpuSend_);
      deviceFree(gpuRecv_);
    }
  }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  int run() {
    printHeader();
    size_t lastSize = SIZE_MAX;
    for (size_t bytes = o_.minBytes; bytes <= o_.maxBytes;
         bytes = std::max(bytes + 1, static_cast<size_t>(static_cast<double>(bytes) * o_.stepFactor))) {
      const Shape s = shapeOf(o_.collective, bytes / es_, n_);
      const size_t sizeBytes = std::max(s.sendCount, s.recvCount) * es_;
      // Sizes that round to one count (below an element, or a step factor near 1) are one row.
      if (sizeBytes == lastSize) continue;
      lastSize = sizeBytes;
      const uint64_t wrong = o_.check ? check(s) : 0;
      row(s, sizeBytes, time(s), wrong);
    }
    printSummary();
    return totalWrong_ == 0 ? 0 : 1;
  }

 private:
  void allocateBuffers() {
    const Shape biggest = shapeOf(o_.collective, o_.maxBytes / es_, n_);
    const size_t recvBytes = std::max(biggest.recvCount, biggest.sendCount) * es_;
    try {
      send_ = allocate(biggest.sendCount * es_);
      recv_ = allocate(recvBytes);
      if (o_.check) {
        want_ = allocate(recvBytes);
        tmp_ = allocate(2 * biggest.sendCount * es_);
      }
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "ringreduce bench: rank %d cannot allocate %zu bytes for --maxbytes %zu\n", rank_,
                   benchBytesPerRank(o_), o_.maxBytes);
      std::exit(1);
    }
    // --device: the collective runs on GPU buffers; inputs and results go through host copies.
    if (o_.device) {
      try {
        gpu_ = pickDevice();
        gpuSend_ = static_cast<uint8_t*>(deviceAlloc(biggest.sendCount * es_, gpu_));
        gpuRecv_ = static_cast<uint8_t*>(deviceAlloc(recvBytes, gpu_));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ringreduce bench: --device on rank %d: %s\n", rank_, e.what());
        std::exit(1);
      }
    }
    sendBuf_ = o_.device ? gpuSend_ : send_.get();
    recvBuf_ = o_.device ? gpuRecv_ : recv_.get();
  }

  void printHeader() const {
    if (rank_ != 0 || !table_) return;
    std::printf("# ringreduce bench: %s, %d ranks, dtype %s, op %s, iters %d, warmup %d, check %s, buffers %s\n",
                o_.collective.c_str(), n_, dtypeName(o_.dtype), reduces_ ? opName(o_.op) : "none", o_.iters,
                o_.warmup, o_.check ? "on" : "off",
                o_.device ? fmt::format("GPU {} ({}, CUDA kernels)", gpu_, deviceName(gpu_)).c_str()
                          : fmt::format("host (reducer {})", isaName(bestIsa())).c_str());
    std::printf("#\n#%12s %14s %8s %6s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "root", "time",
                "algbw", "busbw", "#wrong");
    std::printf("#%12s %14s %8s %6s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
                "(GB/s)", "");
    std::fflush(stdout);
  }

  // One call on fresh inputs, its result against the locally computed one: the elements
  // that differ on every rank together.
  uint64_t check(const Shape& s) {
    fill(send_.get(), s.sendCount, o_.dtype, rank_, o_.op);
    if (o_.collective == "broadcast") fill(recv_.get(), s.recvCount, o_.dtype, rank_, o_.op);
    try {
      if (o_.device) {
        copyToDevice(gpuSend_, send_.get(), s.sendCount * es_);
        copyToDevice(gpuRecv_, recv_.get(), std::max(s.sendCount, s.recvCount) * es_);
      }
      if (rr_result_t rc = call(comm_, o_, s, sendBuf_, recvBuf_); rc != RR_SUCCESS) die(o_.collective.c_str(), rc);
      if (o_.device) copyToHost(recv_.get(), gpuRecv_, s.recvCount * es_);
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "ringreduce bench: --device on rank %d: %s\n", rank_, e.what());
      std::exit(1);
    }
    expected(o_, s, rank_, n_, want_.get(), tmp_.get());
    uint64_t wrong = countWrong(recv_.get(), want_.get(), s.recvCount, o_.dtype, reduces_ ? o_.op : RR_SUM);
    if (rr_result_t rc = rr_allreduce(comm_, &wrong, &wrong, 1, RR_UINT64, RR_SUM, nullptr); rc != RR_SUCCESS)
      die("check", rc);
    totalWrong_ += wrong;
    return wrong;
  }

  // The slowest rank's mean time per call over -n calls after -w warm-ups, in us.
  double time(const Shape& s) {
    for (int i = 0; i < o_.warmup; ++i)
      if (rr_result_t rc = call(comm_, o_, s, sendBuf_, recvBuf_); rc != RR_SUCCESS) die(o_.collective.c_str(), rc);
    if (rr_result_t rc = rr_barrier(comm_); rc != RR_SUCCESS) die("rr_barrier", rc);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i)
      if (rr_result_t rc = call(comm_, o_, s, sendBuf_, recvBuf_); rc != RR_SUCCESS) die(o_.collective.c_str(), rc);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                std::max(1, o_.iters);
    if (rr_result_t rc = rr_allreduce(comm_, &us, &us, 1, RR_FLOAT64, RR_MAX, nullptr); rc != RR_SUCCESS)
      die("timing", rc);
    return us;
  }

  void row(const Shape& s, size_t sizeBytes, double us, uint64_t wrong) {
    const double algbw = static_cast<double>(sizeBytes) / (us * 1e3);
    const double busbw = algbw * s.busFactor;
    busSum_ += busbw;
    ++rows_;
    const int root = o_.collective == "broadcast" ? o_.root : -1;
    const size_t count = std::max(s.sendCount, s.recvCount);
    const char* redop = reduces_ ? opName(o_.op) : "none";
    if (rank_ == 0 && table_) {
      std::printf(" %12zu %14zu %8s %6s %6d %10.2f %8.3f %8.3f %7s\n", sizeBytes, count, dtypeName(o_.dtype), redop,
                  root, us, algbw, busbw, o_.check ? std::to_string(wrong).c_str() : "N/A");
      std::fflush(stdout);
    }
    results_.push_back({{"size", sizeBytes}, {"count", count}, {"type", dtypeName(o_.dtype)}, {"redop", redop},
                        {"root", root}, {"time_us", us}, {"algbw_gbs", algbw}, {"busbw_gbs", busbw},
                        {"wrong", o_.check ? nlohmann::json(wrong) : nlohmann::json(nullptr)}});
  }

  void printSummary() const {
    if (rank_ != 0) return;
    const double avg = rows_ > 0 ? busSum_ / rows_ : 0;
    if (table_) {
      std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(totalWrong_),
                  totalWrong_ == 0 ? "OK" : "FAILED");
      std::printf("# Avg bus bandwidth    : %.4f\n#\n", avg);
      return;
    }
    const nlohmann::json doc = {{"collective", o_.collective}, {"ranks", n_}, {"dtype", dtypeName(o_.dtype)},
                                {"op", reduces_ ? opName(o_.op) : "none"}, {"iters", o_.iters},
                                {"warmup", o_.warmup}, {"check", o_.check}, {"device_buffers", o_.device},
                                {"results", results_}, {"wrong", totalWrong_}, {"avg_busbw_gbs", avg}};
    std::printf("%s\n", doc.dump(2).c_str());
  }

  const BenchOptions& o_;
  const size_t es_;
  rr_comm_t comm_ = nullptr;
  int rank_ = 0, n_ = 1;
  bool reduces_ = false, table_ = true;
  Buffer send_, recv_, want_, tmp_;
  uint8_t* gpuSend_ = nullptr;
  uint8_t* gpuRecv_ = nullptr;
  int gpu_ = -1;
  uint8_t* sendBuf_ = nullptr;
  uint8_t* recvBuf_ = nullptr;
  nlohmann::json results_ = nlohmann::json::array();
  double busSum_ = 0;
  int rows_ = 0;
  uint64_t totalWrong_ = 0;
};

}  // namespace

int runBench(const BenchOptions& o) { return Bench(o).run(); }

}  // namespace rr::cli
