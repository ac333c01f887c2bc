// One rank of the asynchronous test, started by `ringreduce run -n 4`: submits 1,000
// collectives without waiting (random sizes up to 64 KiB and a few up to 1 MiB, random
// dtypes and ops, mostly all-reduces with some broadcasts, allgathers and reduce_scatters
// in between), then waits for all of them and checks every result, so fusion sees
// interleaved dtypes and ops. Every rank draws the same sequence from the same seed.
// Integers must be exact; floats (small integers) too, since their sums are exact.
// Usage: async_check [OPS]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/reduce.h"
#include "ringreduce/ringreduce.h"
#include "test/test_values.h"

namespace {

int rank = 0, nranks = 1;

void fill(uint8_t* p, size_t count, rr_dtype_t dtype, int r, uint64_t seed) {
  rr::test::fillSmall(p, count, dtype, r, seed);
}

struct Op {
  int kind;  // 0 allreduce, 1 broadcast, 2 allgather, 3 reduce_scatter
  rr_dtype_t dtype;
  rr_op_t op;
  size_t count;
  int root;
  bool inPlace;
  std::vector<uint8_t> send, recv, want;
  rr_request_t req = nullptr;
};

void expect(Op& o, uint64_t seed) {
  const size_t es = rr::dtypeSize(o.dtype);
  const size_t n = static_cast<size_t>(nranks);
  if (o.kind == 1) {
    o.want.resize(o.count * es + 1);
    fill(o.want.data(), o.count, o.dtype, o.root, seed);
    return;
  }
  if (o.kind == 2) {
    o.want.resize(o.count * n * es + 1);
    for (int r = 0; r < nranks; ++r) fill(o.want.data() + static_cast<size_t>(r) * o.count * es, o.count, o.dtype, r, seed);
    return;
  }
  const size_t total = o.kind == 0 ? o.count : o.count * n;
  const std::vector<uint8_t> acc = rr::test::reducedSmall(total, o.dtype, o.op, nranks, seed);
  const size_t offset = o.kind == 3 ? static_cast<size_t>(rank) * o.count * es : 0;
  o.want.assign(acc.begin() + static_cast<long>(offset), acc.begin() + static_cast<long>(offset + o.count * es));
}

void check(rr_result_t rc, const std::string& what) {
  if (rc != RR_SUCCESS) {
    std::fprintf(stderr, "rank %d: FAILED: %s: %s: %s\n", rank, what.c_str(), rr_result_string(rc), rr_last_error());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int numOps = argc > 1 ? std::atoi(argv[1]) : 1000;
  rr_comm_t comm = nullptr;
  check(rr_comm_init_from_env(&comm), "init");
  rr_comm_rank(comm, &rank);
  rr_comm_size(comm, &nranks);
  const size_t n = static_cast<size_t>(nranks);
  std::mt19937_64 rng(2026);
  std::vector<Op> ops(static_cast<size_t>(numOps));
  for (int i = 0; i < numOps; ++i) {
    Op& o = ops[static_cast<size_t>(i)];
    const int pick = static_cast<int>(rng() % 20);
    o.kind = pick < 17 ? 0 : pick - 16;
    o.dtype = static_cast<rr_dtype_t>(rng() % rr::kNumDtypes);
    o.op = static_cast<rr_op_t>(rng() % rr::kNumOps);
    if (o.op == RR_PROD) o.op = RR_MAX;  // products of 4 small integers overflow int8 wrap-free checks
    const size_t maxBytes = rng() % 50 == 0 ? (1 << 20) : (64 << 10);
    o.count = rng() % (maxBytes / rr::dtypeSize(o.dtype) + 1);
    if (o.kind >= 2) o.count /= n;
    o.root = static_cast<int>(rng() % n);
    o.inPlace = rng() % 2 == 0;
    const size_t es = rr::dtypeSize(o.dtype);
    const uint64_t seed = static_cast<uint64_t>(i) + 1;
    expect(o, seed);
    switch (o.kind) {
      case 0:
        o.send.resize(o.count * es + 1);
        fill(o.send.data(), o.count, o.dtype, rank, seed);
        o.recv.resize(o.count * es + 1);
        break;
      case 1:
        o.recv.resize(o.count * es + 1);
        fill(o.recv.data(), o.count, o.dtype, rank, seed);
        break;
      case 2:
        o.recv.resize(o.count * n * es + 1);
        o.send.resize(o.count * es + 1);
        fill(o.inPlace ? o.recv.data() + static_cast<size_t>(rank) * o.count * es : o.send.data(), o.count, o.dtype, rank, seed);
        break;
      default:
        o.send.resize(o.count * n * es + 1);
        fill(o.send.data(), o.count * n, o.dtype, rank, seed);
        o.recv.resize(o.count * es + 1);
    }
  }
  // Everything is prepared: submit all of them back to back.
  for (auto& o : ops) {
    const size_t es = rr::dtypeSize(o.dtype);
    switch (o.kind) {
      case 0:
        check(rr_allreduce_async(comm, o.send.data(), o.inPlace ? o.send.data() : o.recv.data(), o.count, o.dtype, o.op, nullptr, &o.req), "submit");
        break;
      case 1:
        check(rr_broadcast_async(comm, o.recv.data(), o.count, o.dtype, o.root, nullptr, &o.req), "submit");
        break;
      case 2:
        check(rr_allgather_async(comm, o.inPlace ? o.recv.data() + static_cast<size_t>(rank) * o.count * es : o.send.data(),
                                 o.recv.data(), o.count, o.dtype, nullptr, &o.req), "submit");
        break;
      default:
        check(rr_reduce_scatter_async(comm, o.send.data(), o.inPlace ? o.send.data() + static_cast<size_t>(rank) * o.count * es : o.recv.data(),
                                      o.count, o.dtype, o.op, nullptr, &o.req), "submit");
    }
  }
  int tested = 0;
  for (auto& o : ops) {
    int done = 0;
    rr_result_t rc = rr_test(o.req, &done);
    if (rc != RR_IN_PROGRESS && rc != RR_SUCCESS) check(rc, "rr_test");
    tested += done;
  }
  long wrong = 0;
  for (int i = 0; i < numOps; ++i) {
    Op& o = ops[static_cast<size_t>(i)];
    check(rr_wait(o.req), "op " + std::to_string(i));
    int done = 0;
    check(rr_test(o.req, &done), "rr_test after wait");
    if (!done) { std::fprintf(stderr, "rank %d: op %d waited but not done\n", rank, i); return 1; }
    check(rr_request_free(o.req), "free");
    const size_t es = rr::dtypeSize(o.dtype);
    const uint8_t* got = o.kind == 0 ? (o.inPlace ? o.send.data() : o.recv.data())
                         : o.kind == 3 && o.inPlace ? o.send.data() + static_cast<size_t>(rank) * o.count * es
                                                    : o.recv.data();
    const size_t bytes = o.kind == 2 ? o.count * n * es : o.count * es;
    if (!rr::sameResult(got, o.want.data(), bytes / es, o.dtype, o.kind == 0 || o.kind == 3 ? o.op : RR_SUM)) {
      ++wrong;
      std::fprintf(stderr, "rank %d: op %d (kind %d, %s %s, count %zu, %s) is wrong\n", rank, i, o.kind,
                   rr::dtypeName(o.dtype), rr::opName(o.op), o.count, o.inPlace ? "in place" : "out of place");
    }
  }
  check(rr_comm_destroy(comm), "destroy");
  std::printf("rank %d: %d collectives in flight, %d done before the first wait, %ld wrong\n", rank, numOps, tested, wrong);
  return wrong == 0 ? 0 : 1;
}
