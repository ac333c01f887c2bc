// One rank of the mismatch test, started by `ringreduce run -n 4` (or -n 2): rank 2 (rank 1
// at n = 2) calls all-reduce with a different count. Every rank must fail with RR_ERR_MISMATCH, and the message must
// name both ranks and both counts; then the communicator stays poisoned.
//   (no argument)  every rank makes blocking calls: each pass starts at once, its header
//                  travelling with its data
//   async          the other ranks queue two all-reduces at once, so rank 0 proposes to
//                  fuse them, while rank 2 makes one blocking call (it starts alone and the
//                  proposal reaches it, or its header reaches the ranks that wait for one)
// With RR_TEST_SLOW_RANK (below), one rank is still in the first all-reduce when the
// second fails around it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"
#include "test/join.h"

int main(int argc, char** argv) {
  const bool async = argc > 1 && std::strcmp(argv[1], "async") == 0;
  // RR_TEST_SLOW_RANK=r: rank r alone keeps RR_TEST_PAUSE_AFTER_SENDS_MS, so it is still in
  // the first all-reduce, its last receive pending, when its neighbours fail the second
  // and both send it their abort: it must complete the first all the same.
  const char* slow = std::getenv("RR_TEST_SLOW_RANK");
  const char* me = std::getenv("RR_RANK");
  if (slow == nullptr || me == nullptr || std::strcmp(slow, me) != 0) unsetenv("RR_TEST_PAUSE_AFTER_SENDS_MS");
  auto [comm, rank, size] = rr::test::joinFromEnv();
  const int odd = size > 2 ? 2 : 1;  // the rank whose call differs
  std::vector<float> buf(8192, 1.0f);
  if (rr_allreduce(comm, buf.data(), buf.data(), 4096, RR_FLOAT32, RR_SUM, nullptr) != RR_SUCCESS) {
    std::fprintf(stderr, "rank %d: first all-reduce failed: %s\n", rank, rr_last_error());
    return 1;
  }
  const size_t count = rank == odd ? 8000 : 4096;
  rr_result_t rc = RR_SUCCESS;
  std::string msg;
  if (async && rank != odd) {
    std::vector<float> second(4096, 1.0f);
    rr_request_t a = nullptr, b = nullptr;
    if (rr_allreduce_async(comm, buf.data(), buf.data(), count, RR_FLOAT32, RR_SUM, nullptr, &a) != RR_SUCCESS) {
      std::fprintf(stderr, "rank %d: submitting failed: %s\n", rank, rr_last_error());
      return 1;
    }
    // The first may fail before the second is submitted: then the submission fails with
    // the same error (the communicator is poisoned).
    const rr_result_t submitted =
        rr_allreduce_async(comm, second.data(), second.data(), count, RR_FLOAT32, RR_SUM, nullptr, &b);
    const std::string submitError = submitted != RR_SUCCESS ? rr_last_error() : "";
    rc = rr_wait(a);
    msg = rr_last_error();
    const rr_result_t second_rc = submitted != RR_SUCCESS ? submitted : rr_wait(b);
    rr_request_free(a);
    if (b != nullptr) rr_request_free(b);
    if (second_rc != rc || (submitted != RR_SUCCESS && submitError != msg)) {
      std::printf("rank %d: the second request ended with %s, the first with %s: WRONG\n", rank,
                  rr_result_string(second_rc), rr_result_string(rc));
      return 1;
    }
  } else {
    rc = rr_allreduce(comm, buf.data(), buf.data(), count, RR_FLOAT32, RR_SUM, nullptr);
    msg = rr_last_error();
  }
  std::printf("rank %d: %s: %s\n", rank, rr_result_string(rc), msg.c_str());
  // The odd rank's neighbours each see a pair (1, 2) or (2, 3); every message names its call
  // and the other rank's.
  // With fusion proposals, rank 2 may meet its left neighbour's proposal instead of a pass
  // header: then that is the other call named.
  bool ok = rc == RR_ERR_MISMATCH && msg.find("rank " + std::to_string(odd) + " called op #2 allreduce(count=8000") != std::string::npos &&
            (msg.find("called op #2 allreduce(count=4096") != std::string::npos ||
             (async && msg.find("proposed fusing from op #2 allreduce(count=4096") != std::string::npos));
  rr_result_t again = rr_barrier(comm);
  ok = ok && again == RR_ERR_MISMATCH;
  rr_comm_destroy(comm);
  std::printf("rank %d: %s\n", rank, ok ? "mismatch reported" : "WRONG");
  return ok ? 0 : 1;
}
