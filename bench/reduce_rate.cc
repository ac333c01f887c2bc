// The host reducer's rate, the reduce term of bench/model.py: fp32 sum of 64 MiB into
// itself with the reducer this CPU selects, best of 5, in GB/s of reduced output. Checked
// against the scalar reference first (verify, then time).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/reduce.h"

int main() {
  const size_t count = (64u << 20) / 4;
  std::vector<float> a(count, 1.0f), b(count, 2.0f), want(count);
  rr::reduceReference(want.data(), a.data(), b.data(), count, RR_FLOAT32, RR_SUM);
  rr::ReduceFn reduce = rr::bestReducer();
  reduce(a.data(), a.data(), b.data(), count, RR_FLOAT32, RR_SUM);
  if (std::memcmp(a.data(), want.data(), count * 4) != 0) {
    std::printf("FAILED: the reducer differs from the reference\n");
    return 1;
  }
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    reduce(a.data(), a.data(), b.data(), count, RR_FLOAT32, RR_SUM);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("reduce rate (%s, fp32 sum, 64 MiB in place): %.2f GB/s of output (%.2f GB/s "
              "read + written)\n",
              rr::isaName(rr::bestIsa()), count * 4 / best / 1e9, 3 * count * 4 / best / 1e9);
  return 0;
}
