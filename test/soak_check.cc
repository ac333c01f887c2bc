// One rank of the soak, started by `ringreduce run -n 3` (under AddressSanitizer in CI):
// 10,000 random collectives (85% all-reduce, 5% each reduce_scatter, allgather, broadcast),
// sizes 0 to 4 MiB (log-uniform, so most are small and some are large), random dtype, op
// and root, up to 32 in flight at once; each result is checked against the locally computed
// one as it completes. Every rank draws the same sequence.
// Usage: soak_check [COLLECTIVES]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"
#include "test/join.h"
#include "test/test_values.h"

namespace {

struct Op {
  int kind;  // 0 all-reduce, 1 reduce_scatter, 2 allgather, 3 broadcast
  int root;
  rr_dtype_t dtype;
  rr_op_t op;
  size_t count;
  uint64_t seed;
  std::vector<uint8_t> buf, out;
  rr_request_t req = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  const long total = argc > 1 ? std::atol(argv[1]) : 10000;
  auto [comm, rank, n] = rr::test::joinFromEnv();
  std::mt19937_64 rng(77);
  std::deque<Op> inFlight;
  long submitted = 0, checked = 0, wrong = 0;
  size_t bytes = 0;
  auto finish = [&](Op& o) {
    if (rr_wait(o.req) != RR_SUCCESS) {
      std::fprintf(stderr, "rank %d: collective %ld failed: %s\n", rank, checked, rr_last_error());
      std::exit(1);
    }
    rr_request_free(o.req);
    const size_t es = rr::dtypeSize(o.dtype);
    const size_t nn = static_cast<size_t>(n);
    std::vector<uint8_t> want;
    const uint8_t* got = o.out.empty() ? o.buf.data() : o.out.data();
    size_t bytes = o.count * es;
    if (o.kind == 0) {
      want = rr::test::reducedSmall(o.count, o.dtype, o.op, n, o.seed);
    } else if (o.kind == 1) {
      const auto all = rr::test::reducedSmall(o.count * nn, o.dtype, o.op, n, o.seed);
      want.assign(all.begin() + static_cast<long>(static_cast<size_t>(rank) * bytes), all.end());
    } else if (o.kind == 2) {
      want.resize(bytes * nn + 1);
      for (int r = 0; r < n; ++r) rr::test::fillSmall(want.data() + static_cast<size_t>(r) * bytes, o.count, o.dtype, r, o.seed);
      bytes *= nn;
    } else {
      want.resize(bytes + 1);
      rr::test::fillSmall(want.data(), o.count, o.dtype, o.root, o.seed);
    }
    if (!rr::sameResult(got, want.data(), bytes / es, o.dtype, o.kind <= 1 ? o.op : RR_SUM)) {
      ++wrong;
      std::fprintf(stderr, "rank %d: collective %ld (kind %d, %s %s, count %zu) is wrong\n", rank,
                   checked, o.kind, rr::dtypeName(o.dtype), rr::opName(o.op), o.count);
    }
    ++checked;
  };
  while (submitted < total) {
    Op o;
    const int pick = static_cast<int>(rng() % 20);
    o.kind = pick < 17 ? 0 : pick - 16;
    o.root = static_cast<int>(rng() % static_cast<uint64_t>(n));
    o.dtype = static_cast<rr_dtype_t>(rng() % rr::kNumDtypes);
    o.op = static_cast<rr_op_t>(rng() % rr::kNumOps);
    if (o.op == RR_PROD) o.op = RR_SUM;
    const double maxBytes = std::exp2(std::uniform_real_distribution<double>(0, 22)(rng));  // 1 B..4 MiB
    const size_t es = rr::dtypeSize(o.dtype);
    o.count = static_cast<size_t>(maxBytes) / es;
    if (o.kind == 1 || o.kind == 2) o.count /= static_cast<size_t>(n);  // per-rank blocks
    if (rng() % 100 == 0) o.count = 0;
    o.seed = static_cast<uint64_t>(submitted) + 1;
    const size_t nn = static_cast<size_t>(n);
    const size_t in = o.kind == 1 ? o.count * nn : o.count;
    o.buf.resize(in * es + 1);
    rr::test::fillSmall(o.buf.data(), in, o.dtype, rank, o.seed);
    if (o.kind == 1) o.out.resize(o.count * es + 1);
    if (o.kind == 2) o.out.resize(o.count * nn * es + 1);
    bytes += in * es;
    inFlight.push_back(std::move(o));
    Op& b = inFlight.back();
    rr_result_t rc;
    switch (b.kind) {
      case 0: rc = rr_allreduce_async(comm, b.buf.data(), b.buf.data(), b.count, b.dtype, b.op, nullptr, &b.req); break;
      case 1: rc = rr_reduce_scatter_async(comm, b.buf.data(), b.out.data(), b.count, b.dtype, b.op, nullptr, &b.req); break;
      case 2: rc = rr_allgather_async(comm, b.buf.data(), b.out.data(), b.count, b.dtype, nullptr, &b.req); break;
      default: rc = rr_broadcast_async(comm, b.buf.data(), b.count, b.dtype, b.root, nullptr, &b.req);
    }
    if (rc != RR_SUCCESS) {
      std::fprintf(stderr, "rank %d: submit: %s\n", rank, rr_last_error());
      return 1;
    }
    ++submitted;
    if (inFlight.size() == 32) {
      finish(inFlight.front());
      inFlight.pop_front();
    }
  }
  while (!inFlight.empty()) {
    finish(inFlight.front());
    inFlight.pop_front();
  }
  rr_comm_destroy(comm);
  std::printf("rank %d: soak of %ld collectives (%.1f MiB in all) checked, %ld wrong\n", rank, checked,
              bytes / 1048576.0, wrong);
  return wrong == 0 ? 0 : 1;
}
