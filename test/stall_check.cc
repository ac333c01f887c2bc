// One rank of the stall test, started by `ringreduce run -n 4` with RR_STALL_WARN_S=1:
// after two all-reduces, the late rank (argument; 3 by default) sleeps for 3.5 s before it
// submits the third, and rank 0 must log that op #3 waits for it, whose last submitted op
// is #2 (the test script reads rank 0's log), also when the late rank is rank 0 itself,
// idle in user code. All three all-reduces must still succeed.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ringreduce/ringreduce.h"
#include "test/join.h"

int main(int argc, char** argv) {
  const int late = argc > 1 ? std::atoi(argv[1]) : 3;
  const rr::test::Member me = rr::test::joinFromEnv();
  rr_comm_t comm = me.comm;
  const int rank = me.rank;
  std::vector<float> buf(1024, 1.0f);
  for (int i = 0; i < 3; ++i) {
    if (i == 2 && rank == late) usleep(3500 * 1000);
    if (rr_allreduce(comm, buf.data(), buf.data(), buf.size(), RR_FLOAT32, RR_SUM, nullptr) != RR_SUCCESS) {
      std::fprintf(stderr, "rank %d: all-reduce %d failed: %s\n", rank, i, rr_last_error());
      return 1;
    }
  }
  rr_comm_destroy(comm);
  std::printf("rank %d: done, value %.0f\n", rank, buf[0]);
  return buf[0] == 64.0f ? 0 : 1;
}
