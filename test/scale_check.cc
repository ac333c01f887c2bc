// One rank of a real job at scale (started by `ringreduce run -n N`, N = 64, 128): init,
// 100 all-reduces of 4 KiB, 10 of 1 MiB, every result checked exactly, destroy. Rank 0
// prints the slowest rank's time to init and the time per collective (reported, not
// judged: docs/performance.md, "Thousands of ranks", records them).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"

namespace {

using Clock = std::chrono::steady_clock;

int fail(int rank, const char* what) {
  std::fprintf(stderr, "rank %d: FAILED: %s: %s\n", rank, what, rr_last_error());
  return 1;
}

}  // namespace

int main() {
  const auto t0 = Clock::now();
  rr_comm_t comm = nullptr;
  if (rr_comm_init_from_env(&comm) != RR_SUCCESS) return fail(-1, "init");
  double initS = std::chrono::duration<double>(Clock::now() - t0).count();
  int rank = 0, n = 1;
  rr_comm_rank(comm, &rank);
  rr_comm_size(comm, &n);
  long wrong = 0;
  double seconds[2] = {0, 0};
  const size_t counts[2] = {1024, 262144};  // 4 KiB and 1 MiB of fp32
  const int iters[2] = {100, 10};
  for (int k = 0; k < 2; ++k) {
    std::vector<float> buf(counts[k]);
    const auto start = Clock::now();
    for (int i = 0; i < iters[k]; ++i) {
      for (size_t j = 0; j < buf.size(); ++j) buf[j] = static_cast<float>((rank + i + j) % 4);
      if (rr_allreduce(comm, buf.data(), buf.data(), buf.size(), RR_FLOAT32, RR_SUM, nullptr) != RR_SUCCESS)
        return fail(rank, "allreduce");
      for (size_t j = 0; j < buf.size(); j += 97) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += static_cast<float>((r + i + j) % 4);
        wrong += buf[j] != want;
      }
    }
    seconds[k] = std::chrono::duration<double>(Clock::now() - start).count();
  }
  // The slowest rank's figures, and the total of wrong elements.
  double slowest[3] = {initS, seconds[0], seconds[1]};
  if (rr_allreduce(comm, slowest, slowest, 3, RR_FLOAT64, RR_MAX, nullptr) != RR_SUCCESS ||
      rr_allreduce(comm, &wrong, &wrong, 1, RR_INT64, RR_SUM, nullptr) != RR_SUCCESS)
    return fail(rank, "summary");
  if (rank == 0)
    std::printf("%d ranks: init %.2f s (slowest rank); 4 KiB all-reduce %.0f us; 1 MiB all-reduce "
                "%.1f ms; %ld wrong elements\n",
                n, slowest[0], slowest[1] / iters[0] * 1e6, slowest[2] / iters[1] * 1e3, wrong);
  if (rr_comm_destroy(comm) != RR_SUCCESS) return fail(rank, "destroy");
  return wrong == 0 ? 0 : 1;
}
