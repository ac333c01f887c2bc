// One rank of the soak, started by `ringreduce run -n 3` (under AddressSanitizer in CI):
// 10,000 random all-reduces, sizes 0 to 4 MiB (log-uniform, so most are small and some are
// large), random dtype and op, up to 32 in flight at once; each result is checked against
// the locally computed reduction as it completes. Every rank draws the same sequence.
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
#include "test/test_values.h"

namespace {

struct Op {
  rr_dtype_t dtype;
  rr_op_t op;
  size_t count;
  uint64_t seed;
  std::vector<uint8_t> buf;
  rr_request_t req = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  const long total = argc > 1 ? std::atol(argv[1]) : 10000;
  rr_comm_t comm = nullptr;
  if (rr_comm_init_from_env(&comm) != RR_SUCCESS) {
    std::fprintf(stderr, "init: %s\n", rr_last_error());
    return 1;
  }
  int rank = 0, n = 1;
  rr_comm_rank(comm, &rank);
  rr_comm_size(comm, &n);
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
    const auto want = rr::test::reducedSmall(o.count, o.dtype, o.op, n, o.seed);
    if (std::memcmp(o.buf.data(), want.data(), o.count * rr::dtypeSize(o.dtype)) != 0) {
      ++wrong;
      std::fprintf(stderr, "rank %d: collective %ld (%s %s, count %zu) is wrong\n", rank, checked,
                   rr::dtypeName(o.dtype), rr::opName(o.op), o.count);
    }
    ++checked;
  };
  while (submitted < total) {
    Op o;
    o.dtype = static_cast<rr_dtype_t>(rng() % rr::kNumDtypes);
    o.op = static_cast<rr_op_t>(rng() % rr::kNumOps);
    if (o.op == RR_PROD) o.op = RR_SUM;
    const double maxBytes = std::exp2(std::uniform_real_distribution<double>(0, 22)(rng));  // 1 B..4 MiB
    o.count = static_cast<size_t>(maxBytes) / rr::dtypeSize(o.dtype);
    if (rng() % 100 == 0) o.count = 0;
    o.seed = static_cast<uint64_t>(submitted) + 1;
    o.buf.resize(o.count * rr::dtypeSize(o.dtype) + 1);
    rr::test::fillSmall(o.buf.data(), o.count, o.dtype, rank, o.seed);
    bytes += o.count * rr::dtypeSize(o.dtype);
    inFlight.push_back(std::move(o));
    Op& back = inFlight.back();
    if (rr_allreduce_async(comm, back.buf.data(), back.buf.data(), back.count, back.dtype, back.op, nullptr, &back.req) != RR_SUCCESS) {
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
  std::printf("rank %d: soak of %ld all-reduces (%.1f MiB in all) checked, %ld wrong\n", rank, checked,
              bytes / 1048576.0, wrong);
  return wrong == 0 ? 0 : 1;
}
