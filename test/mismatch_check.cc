// One rank of the mismatch test, started by `ringreduce run -n 4`: rank 2 calls all-reduce
// with a different count. Every rank must fail with RR_ERR_MISMATCH, and the message must
// name both ranks and both counts; then the communicator stays poisoned.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"

int main() {
  rr_comm_t comm = nullptr;
  if (rr_comm_init_from_env(&comm) != RR_SUCCESS) {
    std::fprintf(stderr, "init: %s\n", rr_last_error());
    return 1;
  }
  int rank = 0;
  rr_comm_rank(comm, &rank);
  std::vector<float> buf(8192, 1.0f);
  if (rr_allreduce(comm, buf.data(), buf.data(), 4096, RR_FLOAT32, RR_SUM, nullptr) != RR_SUCCESS) {
    std::fprintf(stderr, "rank %d: first all-reduce failed: %s\n", rank, rr_last_error());
    return 1;
  }
  const size_t count = rank == 2 ? 8000 : 4096;
  rr_result_t rc = rr_allreduce(comm, buf.data(), buf.data(), count, RR_FLOAT32, RR_SUM, nullptr);
  const std::string msg = rr_last_error();
  std::printf("rank %d: %s: %s\n", rank, rr_result_string(rc), msg.c_str());
  // Rank 2's neighbours each see a pair (1, 2) or (2, 3); every message names rank 2's call
  // and the other rank's.
  bool ok = rc == RR_ERR_MISMATCH && msg.find("rank 2 called op #2 allreduce(count=8000") != std::string::npos &&
            msg.find("called op #2 allreduce(count=4096") != std::string::npos;
  rr_result_t again = rr_barrier(comm);
  ok = ok && again == RR_ERR_MISMATCH;
  rr_comm_destroy(comm);
  std::printf("rank %d: %s\n", rank, ok ? "mismatch reported" : "WRONG");
  return ok ? 0 : 1;
}
