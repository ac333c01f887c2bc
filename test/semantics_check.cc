// One rank of the checks that results mean what the header says (started by
// `ringreduce run -n N`), each a regression test of a wrong result found by trying the library
// as a careless user would. With RR_TEST_FAKE_DEVICE=1 the same checks run on the device path.
//
//   fusion-order   async all-reduces that read what an earlier one wrote (x -> x twice,
//                  x -> y then y -> z), 100 rounds: fusion must never change a result
//   avg-overflow   a float average that fits never overflows: fp16 avg of 40000, bf16 of
//                  3e38, fp32 of FLT_MAX, fp64 of DBL_MAX; an integer average is the wrapped
//                  sum divided (uint8 avg(200, 200) on 2 ranks is 72, as documented)
//   nan            MIN and MAX propagate NaN, whichever rank holds it (every rank position,
//                  every float dtype): every element of the result is NaN
//   rank-order     results whose bits depend on the order of the operands (MIN and MAX of
//                  +0 and -0, a SUM of NaNs with a different payload on each rank) are the
//                  same bytes on every rank: each algorithm reduces in one order everywhere
//   setting-mismatch VAR VALUE RANK
//                  rank RANK runs with VAR=VALUE (a job-wide setting: RR_FUSION_BYTES,
//                  RR_SEGMENT_BYTES, RR_ALGO, RR_SOCKETS_PER_LINK), every other rank with its
//                  default: init fails on every rank, naming the setting, two ranks and
//                  both values. (Where init succeeds, the ranks run 64 async in-place int32
//                  all-reduces of 1,200 bytes each and report any wrong element: a rank with a
//                  smaller RR_FUSION_BYTES once got wrong data, then a corrupted heap.)
//   memory-mismatch  rank 1's buckets are on a (fake) GPU, the others' in host memory: a
//                  1 KiB all-reduce, which a host bucket runs by recursive doubling (on the
//                  pair's own link at n = 2) and a device bucket on the ring's links (by the
//                  ring at n > 2), fails on every rank with a mismatch naming the collective
//                  and both kinds of memory
//   barrier        a barrier on one rank against an all-reduce of uint8 MAX on the others
//                  (what a barrier sends) is a mismatch naming the barrier, on every rank
//   waiters        the documented way to overlap: one thread submits 64 async all-reduces,
//                  four threads wait for them; every result exact
//   destroy-idle   (n=2) rank 1 destroys its communicator with an all-reduce rank 0 never
//                  joins: the destroy returns at once, the request fails RR_ERR_ABORTED
//                  naming the destroy; rank 0, idle, sees it in rr_comm_get_async_error
//   abort-blocking (n=2) rank 0 is in a blocking all-reduce (which runs on its own thread,
//                  RR_INLINE_BLOCKING) that rank 1 does not join; another thread of rank 0
//                  calls rr_comm_abort: the call fails RR_ERR_ABORTED well before
//                  RR_TIMEOUT_MS, and rank 1's later all-reduce fails naming rank 0
//   blocking-threads  two threads per rank each make 300 blocking all-reduces of one shape
//                  on the same communicator (each thread's pass runs on its own thread or on
//                  the progress thread, whichever holds the engine): which calls meet is
//                  not defined, but every value is rank + 1, so every result is exact
//   init-report    prints how rr_comm_init_from_env ended (test/init_fault_test.sh)
//
// Usage: semantics_check MODE
#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/half.h"
#include "ringreduce/ringreduce.h"

namespace {

int rank = 0, nranks = 1;
rr_comm_t comm = nullptr;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  std::exit(1);
}

void check(rr_result_t rc, const std::string& what) {
  if (rc != RR_SUCCESS) die(what + ": " + rr_result_string(rc) + ": " + rr_last_error());
}

void fusionOrder() {
  const size_t count = 256;
  const float sum = static_cast<float>(nranks * (nranks + 1) / 2);
  long wrong = 0;
  for (int round = 0; round < 100; ++round) {
    // x -> x twice: the second reads the first's result.
    std::vector<float> x(count, static_cast<float>(rank + 1));
    rr_request_t a = nullptr, b = nullptr, c = nullptr;
    check(rr_allreduce_async(comm, x.data(), x.data(), count, RR_FLOAT32, RR_SUM, nullptr, &a), "x -> x");
    check(rr_allreduce_async(comm, x.data(), x.data(), count, RR_FLOAT32, RR_SUM, nullptr, &b), "x -> x again");
    check(rr_wait(a), "wait");
    check(rr_wait(b), "wait");
    rr_request_free(a);
    rr_request_free(b);
    for (float v : x) wrong += v != sum * static_cast<float>(nranks);
    // x -> y, then y -> z.
    std::vector<float> in(count, static_cast<float>(rank + 1)), y(count, -1.0f), z(count, -1.0f);
    check(rr_allreduce_async(comm, in.data(), y.data(), count, RR_FLOAT32, RR_SUM, nullptr, &a), "x -> y");
    check(rr_allreduce_async(comm, y.data(), z.data(), count, RR_FLOAT32, RR_SUM, nullptr, &b), "y -> z");
    check(rr_allreduce_async(comm, z.data(), z.data(), count, RR_FLOAT32, RR_MAX, nullptr, &c), "z -> z");
    for (rr_request_t r : {a, b, c}) {
      check(rr_wait(r), "wait");
      rr_request_free(r);
    }
    for (size_t i = 0; i < count; ++i)
      wrong += (y[i] != sum) + (z[i] != sum * static_cast<float>(nranks));
  }
  if (wrong != 0) die(std::to_string(wrong) + " elements wrong when a collective reads an earlier one's output");
  std::printf("rank %d of %d: fusion keeps submission order: 100 rounds of x->x->x and x->y->z exact\n",
              rank, nranks);
}

// Puts v into element i of buf as dtype; reads it back.
void put(std::vector<uint8_t>& buf, size_t i, double v, rr_dtype_t dtype) {
  uint8_t* p = buf.data() + i * rr::dtypeSize(dtype);
  switch (dtype) {
    case RR_FLOAT32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case RR_FLOAT64: std::memcpy(p, &v, 8); break;
    case RR_FLOAT16: { uint16_t h = rr::floatToFp16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case RR_BFLOAT16: { uint16_t h = rr::floatToBf16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    default: { const int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, rr::dtypeSize(dtype)); }
  }
}
double get(const std::vector<uint8_t>& buf, size_t i, rr_dtype_t dtype) {
  const uint8_t* p = buf.data() + i * rr::dtypeSize(dtype);
  switch (dtype) {
    case RR_FLOAT32: { float f; std::memcpy(&f, p, 4); return f; }
    case RR_FLOAT64: { double d; std::memcpy(&d, p, 8); return d; }
    case RR_FLOAT16: { uint16_t h; std::memcpy(&h, p, 2); return rr::fp16ToFloat(h); }
    case RR_BFLOAT16: { uint16_t h; std::memcpy(&h, p, 2); return rr::bf16ToFloat(h); }
    case RR_UINT8: return *p;
    default: return 0;
  }
}

void avgOverflow() {
  struct Case {
    rr_dtype_t dtype;
    double value;
  };
  const size_t count = 1009;  // several chunks: every rank position starts a chain
  for (const Case c : {Case{RR_FLOAT16, 40000.0}, Case{RR_BFLOAT16, 3e38}, Case{RR_FLOAT32, FLT_MAX},
                       Case{RR_FLOAT64, DBL_MAX}}) {
    std::vector<uint8_t> buf(count * rr::dtypeSize(c.dtype));
    for (size_t i = 0; i < count; ++i) put(buf, i, c.value, c.dtype);
    const double want = get(buf, 0, c.dtype);  // the value as the dtype holds it
    check(rr_allreduce(comm, buf.data(), buf.data(), count, c.dtype, RR_AVG, nullptr), "avg");
    for (size_t i = 0; i < count; ++i) {
      const double got = get(buf, i, c.dtype);
      if (!std::isfinite(got) || std::fabs(got - want) > 1e-2 * std::fabs(want))
        die(std::string("avg of ") + rr::dtypeName(c.dtype) + " " + std::to_string(want) + " on every rank is " +
            std::to_string(got) + " at element " + std::to_string(i));
    }
  }
  if (nranks == 2) {  // the documented integer rule: the wrapped sum, divided
    std::vector<uint8_t> u(count, 200);
    check(rr_allreduce(comm, u.data(), u.data(), count, RR_UINT8, RR_AVG, nullptr), "uint8 avg");
    for (uint8_t v : u)
      if (v != 72) die("uint8 avg(200, 200) is " + std::to_string(v) + ", documented as (400 mod 256) / 2 = 72");
  }
  std::printf("rank %d of %d: float averages that fit do not overflow (fp16 40000, bf16 3e38, "
              "fp32 FLT_MAX, fp64 DBL_MAX)\n", rank, nranks);
}

void nan() {
  const size_t count = 1009;
  long checked = 0;
  for (rr_dtype_t dtype : {RR_FLOAT32, RR_FLOAT64, RR_FLOAT16, RR_BFLOAT16}) {
    for (rr_op_t op : {RR_MIN, RR_MAX}) {
      for (int holder = 0; holder < nranks; ++holder) {
        std::vector<uint8_t> buf(count * rr::dtypeSize(dtype));
        for (size_t i = 0; i < count; ++i)
          put(buf, i, rank == holder ? std::nan("") : static_cast<double>(rank) - 1.5, dtype);
        check(rr_allreduce(comm, buf.data(), buf.data(), count, dtype, op, nullptr), "min/max");
        for (size_t i = 0; i < count; ++i, ++checked)
          if (!std::isnan(get(buf, i, dtype)))
            die(std::string(rr::opName(op)) + " of " + rr::dtypeName(dtype) + " with a NaN on rank " +
                std::to_string(holder) + " is " + std::to_string(get(buf, i, dtype)) + " at element " +
                std::to_string(i));
      }
    }
  }
  std::printf("rank %d of %d: MIN and MAX propagate NaN from every rank position (%ld elements)\n",
              rank, nranks, checked);
}

// A quiet NaN whose payload names `tag` (the bits of one element of `dtype`).
void putNan(std::vector<uint8_t>& buf, size_t i, unsigned tag, rr_dtype_t dtype) {
  uint8_t* p = buf.data() + i * rr::dtypeSize(dtype);
  switch (dtype) {
    case RR_FLOAT32: { const uint32_t b = 0x7fc00000U | tag << 8; std::memcpy(p, &b, 4); break; }
    case RR_FLOAT64: { const uint64_t b = 0x7ff8000000000000ULL | uint64_t{tag} << 40; std::memcpy(p, &b, 8); break; }
    case RR_FLOAT16: { const uint16_t b = static_cast<uint16_t>(0x7e00U | tag); std::memcpy(p, &b, 2); break; }
    default: { const uint16_t b = static_cast<uint16_t>(0x7fc0U | tag); std::memcpy(p, &b, 2); }  // bf16
  }
}

void rankOrder() {
  const size_t count = 1009;
  long checked = 0;
  for (rr_dtype_t dtype : {RR_FLOAT32, RR_FLOAT64, RR_FLOAT16, RR_BFLOAT16}) {
    for (rr_op_t op : {RR_MIN, RR_MAX, RR_SUM}) {
      const size_t bytes = count * rr::dtypeSize(dtype);
      std::vector<uint8_t> buf(bytes), all(bytes * static_cast<size_t>(nranks));
      for (size_t i = 0; i < count; ++i) {
        if (op == RR_SUM)
          putNan(buf, i, static_cast<unsigned>(rank) + 1, dtype);
        else
          put(buf, i, (i + static_cast<size_t>(rank)) % 2 == 1 ? -0.0 : 0.0, dtype);
      }
      const std::string what = std::string(rr::opName(op)) + " of " + rr::dtypeName(dtype) +
                               (op == RR_SUM ? " NaNs with each rank's payload" : " +0 and -0");
      check(rr_allreduce(comm, buf.data(), buf.data(), count, dtype, op, nullptr), what);
      check(rr_allgather(comm, buf.data(), all.data(), bytes, RR_UINT8, nullptr), what + ": gathering the results");
      for (size_t i = 0; i < count; ++i, ++checked) {
        const double v = get(buf, i, dtype);
        if (op == RR_SUM ? !std::isnan(v) : v != 0.0)
          die(what + " is " + std::to_string(v) + " at element " + std::to_string(i));
      }
      for (int r = 1; r < nranks; ++r) {
        const uint8_t* theirs = all.data() + static_cast<size_t>(r) * bytes;
        for (size_t b = 0; b < bytes; ++b)
          if (theirs[b] != all[b])
            die(what + ": rank " + std::to_string(r) + "'s result differs from rank 0's at element " +
                std::to_string(b / rr::dtypeSize(dtype)));
      }
    }
  }
  std::printf("rank %d of %d: results whose bits depend on the operands' order are the same on every rank "
              "(%ld elements)\n", rank, nranks, checked);
}

// Rank r's 64 async in-place int32 all-reduces of 300 elements, each element a fixed
// function of rank, request and index; the number of wrong elements.
long fusedBatch() {
  constexpr int kRequests = 64;
  constexpr size_t kCount = 300;  // 1,200 bytes
  std::vector<std::vector<int32_t>> bufs(kRequests, std::vector<int32_t>(kCount));
  std::vector<rr_request_t> reqs(kRequests, nullptr);
  for (int q = 0; q < kRequests; ++q) {
    for (size_t i = 0; i < kCount; ++i) bufs[q][i] = (rank + 1) * 1000 + q * 100 + static_cast<int32_t>(i);
    check(rr_allreduce_async(comm, bufs[q].data(), bufs[q].data(), kCount, RR_INT32, RR_SUM, nullptr, &reqs[q]),
          "allreduce_async");
  }
  long wrong = 0;
  for (int q = 0; q < kRequests; ++q) {
    check(rr_wait(reqs[q]), "wait");
    rr_request_free(reqs[q]);
    for (size_t i = 0; i < kCount; ++i) {
      const int64_t want = 1000LL * nranks * (nranks + 1) / 2 + int64_t{nranks} * (q * 100 + static_cast<int64_t>(i));
      wrong += bufs[q][i] != want;
    }
  }
  return wrong;
}

// setting-mismatch: init itself must fail (main), so this runs only where it did not.
void settingMismatch(const std::string& var) {
  const long wrong = fusedBatch();
  die("init succeeded with " + var + " different on one rank; 64 fused all-reduces then had " + std::to_string(wrong) +
      " wrong elements");
}

void memoryMismatch() {
  std::vector<float> buf(256, 1.0f);
  const rr_result_t rc = rr_allreduce(comm, buf.data(), buf.data(), buf.size(), RR_FLOAT32, RR_SUM, nullptr);
  const std::string message = rr_last_error();
  // Ranks that meet the other kind of memory say so; the others hear it in an abort frame.
  if (rc != RR_ERR_MISMATCH && !(rc == RR_ERR_PEER_LOST && message.find("aborted the job") != std::string::npos))
    die(std::string("expected RR_ERR_MISMATCH, got ") + rr_result_string(rc) + ": " + message);
  for (const char* want : {"ranks disagree on how to run op #1 allreduce(count=256, dtype=float, op=sum)",
                           "host memory", "GPU memory", "every rank's bucket must be in the same kind of memory"})
    if (message.find(want) == std::string::npos)
      die("the mismatch does not name the collective and both kinds of memory: " + message);
  std::printf("rank %d: %s\n", rank, message.c_str());
}

void barrier() {
  std::vector<uint8_t> a(static_cast<size_t>(nranks), 0);
  const rr_result_t rc = rank == 0 ? rr_barrier(comm)
                                   : rr_allreduce(comm, a.data(), a.data(), a.size(), RR_UINT8, RR_MAX, nullptr);
  const std::string message = rr_last_error();
  if (rc != RR_ERR_MISMATCH || message.find("barrier") == std::string::npos)
    die(std::string("a barrier against an all-reduce gave ") + rr_result_string(rc) + ": " + message);
  std::printf("rank %d of %d: a barrier never matches an all-reduce: %s\n", rank, nranks, message.c_str());
}

void waiters() {
  const size_t count = 4099, ops = 64;
  std::vector<std::vector<double>> bufs(ops, std::vector<double>(count));
  std::vector<rr_request_t> reqs(ops);
  for (size_t k = 0; k < ops; ++k) {
    for (double& v : bufs[k]) v = static_cast<double>(rank + 1) * static_cast<double>(k + 1);
    check(rr_allreduce_async(comm, bufs[k].data(), bufs[k].data(), count, RR_FLOAT64, RR_SUM, nullptr, &reqs[k]),
          "submit");
  }
  std::vector<std::thread> threads;
  std::vector<int> failed(4, 0);
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t k = t; k < ops; k += 4) failed[t] += rr_wait(reqs[k]) != RR_SUCCESS;
    });
  for (auto& th : threads) th.join();
  const double sum = nranks * (nranks + 1) / 2.0;
  for (size_t k = 0; k < ops; ++k) {
    rr_request_free(reqs[k]);
    for (double v : bufs[k])
      if (v != sum * static_cast<double>(k + 1)) die("request " + std::to_string(k) + " is wrong");
  }
  for (int f : failed)
    if (f != 0) die("a wait failed");
  std::printf("rank %d of %d: 64 requests from one thread, waited for by four: exact\n", rank, nranks);
}

void destroyIdle() {
  using Clock = std::chrono::steady_clock;
  if (rank == 1) {
    float x = 1;
    rr_request_t req = nullptr;
    check(rr_allreduce_async(comm, &x, &x, 1, RR_FLOAT32, RR_SUM, nullptr, &req), "submit");
    const auto t0 = Clock::now();
    check(rr_comm_destroy(comm), "rr_comm_destroy");
    comm = nullptr;
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    const rr_result_t rc = rr_wait(req);
    const std::string message = rr_last_error();
    rr_request_free(req);
    if (took > 5) die("rr_comm_destroy with a request nobody joins took " + std::to_string(took) + " s");
    if (rc != RR_ERR_ABORTED || message.find("rr_comm_destroy") == std::string::npos)
      die(std::string("the cancelled request gave ") + rr_result_string(rc) + ": " + message);
    std::printf("rank 1: destroy returned in %.2f s; the request: %s\n", took, message.c_str());
    return;
  }
  rr_result_t async = RR_SUCCESS;
  for (int i = 0; i < 500 && async == RR_SUCCESS; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    check(rr_comm_get_async_error(comm, &async), "rr_comm_get_async_error");
  }
  float x = 1;
  const rr_result_t next = rr_allreduce(comm, &x, &x, 1, RR_FLOAT32, RR_SUM, nullptr);
  const std::string message = rr_last_error();
  if (async != RR_ERR_ABORTED || next != RR_ERR_ABORTED || message.find("rank 1") == std::string::npos)
    die(std::string("idle rank 0: async error ") + rr_result_string(async) + ", next call " +
        rr_result_string(next) + ": " + message);
  std::printf("rank 0 (idle): async error and next call: %s\n", message.c_str());
}

void abortBlocking() {
  using Clock = std::chrono::steady_clock;
  std::vector<float> x(1024, 1.0f);
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const rr_result_t rc = rr_allreduce(comm, x.data(), x.data(), x.size(), RR_FLOAT32, RR_SUM, nullptr);
    const std::string message = rr_last_error();
    if (rc == RR_SUCCESS || message.find("rank 0") == std::string::npos)
      die(std::string("rank 1 after rank 0's abort: ") + rr_result_string(rc) + ": " + message);
    std::printf("rank 1: %s: %s\n", rr_result_string(rc), message.c_str());
    return;
  }
  std::thread aborter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    rr_comm_abort(comm);
  });
  const auto t0 = Clock::now();
  const rr_result_t rc = rr_allreduce(comm, x.data(), x.data(), x.size(), RR_FLOAT32, RR_SUM, nullptr);
  const std::string message = rr_last_error();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  aborter.join();
  if (rc != RR_ERR_ABORTED || message.find("rr_comm_abort") == std::string::npos)
    die(std::string("the blocking call gave ") + rr_result_string(rc) + ": " + message);
  if (took > 10) die("the aborted blocking call returned after " + std::to_string(took) + " s");
  std::printf("rank 0: the blocking call returned %.2f s after it began: %s\n", took, message.c_str());
}

void blockingThreads() {
  const size_t count = 3001;
  const float want = static_cast<float>(nranks * (nranks + 1) / 2);
  std::vector<long> wrong(2, 0);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      std::vector<float> x(count);
      for (int i = 0; i < 300 && errors[t].empty(); ++i) {
        std::fill(x.begin(), x.end(), static_cast<float>(rank + 1));
        if (rr_allreduce(comm, x.data(), x.data(), count, RR_FLOAT32, RR_SUM, nullptr) != RR_SUCCESS) {
          errors[t] = rr_last_error();
          break;
        }
        for (float v : x) wrong[t] += v != want;
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 2; ++t) {
    if (!errors[t].empty()) die("thread " + std::to_string(t) + ": " + errors[t]);
    if (wrong[t] != 0) die("thread " + std::to_string(t) + ": " + std::to_string(wrong[t]) + " wrong elements");
  }
  std::printf("rank %d of %d: 2 threads x 300 blocking all-reduces on one communicator: exact\n", rank, nranks);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "init-report") {  // for test/init_fault_test.sh: how init ended, on one line
    const char* r = std::getenv("RR_RANK");
    const rr_result_t rc = rr_comm_init_from_env(&comm);
    std::printf("rank %s: init: %s: %s\n", r != nullptr ? r : "?", rr_result_string(rc),
                rc == RR_SUCCESS ? "" : rr_last_error());
    if (rc == RR_SUCCESS) {
      // One all-reduce of 1 MiB over the links init made (pulled frames where UCX's shared
      // memory reads its peers' memory): each rank's own rank number, summed.
      std::vector<float> v(1 << 18, static_cast<float>(std::atoi(r != nullptr ? r : "0")));
      int size = 0;
      rr_comm_size(comm, &size);
      const rr_result_t ar = rr_allreduce(comm, v.data(), v.data(), v.size(), RR_FLOAT32, RR_SUM, nullptr);
      const float want = static_cast<float>(size * (size - 1) / 2);
      const bool right = ar == RR_SUCCESS && std::all_of(v.begin(), v.end(), [want](float x) { return x == want; });
      std::printf("rank %s: allreduce: %s\n", r != nullptr ? r : "?",
                  right ? "right" : ar == RR_SUCCESS ? "wrong values" : rr_last_error());
      rr_comm_destroy(comm);
    }
    return 0;
  }
  if (mode == "setting-mismatch") {  // before init: the setting is read there
    if (argc < 5) die("usage: semantics_check setting-mismatch VAR VALUE RANK");
    const std::string var = argv[2], value = argv[3], odd = argv[4];
    const char* r = std::getenv("RR_RANK");
    const std::string me = r != nullptr ? r : "?";
    if (me == odd) setenv(var.c_str(), value.c_str(), 1);
    const rr_result_t rc = rr_comm_init_from_env(&comm);
    const std::string message = rc == RR_SUCCESS ? "" : rr_last_error();
    if (rc == RR_SUCCESS) {
      check(rr_comm_rank(comm, &rank), "rank");
      check(rr_comm_size(comm, &nranks), "size");
      settingMismatch(var);
    }
    // Rank 0 compares every rank with itself: the first rank that differs from it is named
    // (rank 1 where rank 0 is the odd one).
    const std::string named = odd == "0" ? "1" : odd;
    const std::string want = "rank 0 has " + var + "=";
    const std::string theirs = "rank " + named + " has " + var + "=";
    if (rc != RR_ERR_INVALID_ARGUMENT || message.find("ranks differ in a job-wide setting") == std::string::npos ||
        message.find(want) == std::string::npos || message.find(theirs) == std::string::npos ||
        message.find(var + "=" + value) == std::string::npos)
      die("init did not fail naming " + var + ", ranks 0 and " + named + " and their values: " + rr_result_string(rc) +
          ": " + message);
    std::printf("rank %s: init: %s\n", me.c_str(), message.c_str());
    return 0;
  }
  if (mode == "memory-mismatch") {  // rank 1's buckets on a fake GPU, read at init
    const char* r = std::getenv("RR_RANK");
    if (r != nullptr && std::string(r) == "1") setenv("RR_TEST_FAKE_DEVICE", "1", 1);
  }
  check(rr_comm_init_from_env(&comm), "rr_comm_init_from_env");
  check(rr_comm_rank(comm, &rank), "rank");
  check(rr_comm_size(comm, &nranks), "size");
  if (mode == "fusion-order") fusionOrder();
  else if (mode == "avg-overflow") avgOverflow();
  else if (mode == "nan") nan();
  else if (mode == "rank-order") rankOrder();
  else if (mode == "memory-mismatch") memoryMismatch();
  else if (mode == "barrier") barrier();
  else if (mode == "waiters") waiters();
  else if (mode == "destroy-idle") destroyIdle();
  else if (mode == "abort-blocking") abortBlocking();
  else if (mode == "blocking-threads") blockingThreads();
  else die("unknown mode '" + mode + "'");
  if (comm != nullptr) rr_comm_destroy(comm);
  return 0;
}
