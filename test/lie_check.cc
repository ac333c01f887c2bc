// One rank of test/lie_test.sh. Rank RR_TEST_LIE_RANK tells the lie RR_TEST_LIE (a build
// with -Dtest_lies: base/test_lies.h); the others are honest and must fail: init or a
// collective returns an error (printed "rank R: FAILED ...: MESSAGE", which the script
// matches against the lie's pattern: the lie found, or an honest rank's report of it in an
// abort frame), never RR_SUCCESS with a wrong result, and never a timeout (a lie that made
// a rank wait). The work, in order: 8 async all-reduces of
// 4 KiB (fused where RR_FUSION_BYTES lets them), 3 blocking ones of 1 KiB (recursive
// doubling) and 3 of 256 KiB (the ring; frames of 64 KiB and more, pulled where UCX's
// shared memory reads its peers' memory). A lie named abort-* makes the liar call
// rr_comm_abort first. Under AddressSanitizer an honest rank that wrote outside its buffers
// stops with a report (and a non-zero exit).
// Usage: lie_check
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"

namespace {

int rank = -1;
int size = 0;
bool liar = false;
rr_comm_t comm = nullptr;  // destroyed before the process ends: LeakSanitizer counts the rest

// A file per rank that has judged, in RR_TEST_LIE_DIR; the liar waits for the others'.
std::string mark(int r) {
  const char* dir = std::getenv("RR_TEST_LIE_DIR");
  return dir == nullptr ? std::string() : std::string(dir) + "/judged." + std::to_string(r);
}

// An honest rank's verdict on the error it got; exits.
[[noreturn]] void judge(rr_result_t rc, const std::string& message, const char* where) {
  std::fflush(stdout);
  if (liar) {
    std::printf("rank %d (the liar): %s: %s\n", rank, where, rc == RR_SUCCESS ? "success" : message.c_str());
    std::fflush(stdout);
    for (int i = 0; i < 1000 && !mark(0).empty(); ++i) {
      int judged = 0;
      for (int r = 0; r < size; ++r) judged += r != rank && access(mark(r).c_str(), F_OK) == 0;
      if (size > 0 && judged == size - 1) break;
      usleep(10000);
    }
    rr_comm_destroy(comm);
    std::exit(0);
  }
  const bool named = rc != RR_SUCCESS && rc != RR_ERR_TIMEOUT;
  std::printf("rank %d: %s: %s: %s: %s\n", rank, named ? "FAILED" : "WRONG", where, rr_result_string(rc), message.c_str());
  std::fflush(stdout);
  if (FILE* f = mark(rank).empty() ? nullptr : std::fopen(mark(rank).c_str(), "w")) std::fclose(f);
  rr_comm_destroy(comm);
  std::exit(named ? 0 : 1);
}

}  // namespace

int main() {
  const char* lie = std::getenv("RR_TEST_LIE");
  const char* liarRank = std::getenv("RR_TEST_LIE_RANK");
  const char* launched = std::getenv("RR_RANK");
  liar = lie != nullptr && liarRank != nullptr && launched != nullptr && std::string(liarRank) == launched;
  rank = launched != nullptr ? std::atoi(launched) : -1;
  const char* launchedSize = std::getenv("RR_SIZE");
  size = launchedSize != nullptr ? std::atoi(launchedSize) : 0;  // the liar may wait before init succeeds
  rr_result_t rc = rr_comm_init_from_env(&comm);
  if (rc != RR_SUCCESS) judge(rc, rr_last_error(), "init");
  rr_comm_size(comm, &size);
  if (liar && std::string(lie).rfind("abort", 0) == 0) rr_comm_abort(comm);
  const float want = static_cast<float>(size * (size + 1) / 2);
  const auto right = [want](const std::vector<float>& v) {
    for (float x : v)
      if (x != want) return false;
    return true;
  };
  // Fused: 8 async all-reduces of 4 KiB.
  std::vector<std::vector<float>> small(8, std::vector<float>(1024, static_cast<float>(rank + 1)));
  std::vector<rr_request_t> reqs(small.size(), nullptr);
  for (size_t i = 0; i < small.size(); ++i) {
    rc = rr_allreduce_async(comm, small[i].data(), small[i].data(), small[i].size(), RR_FLOAT32, RR_SUM, nullptr, &reqs[i]);
    if (rc != RR_SUCCESS) judge(rc, rr_last_error(), "allreduce_async");
  }
  rr_result_t first = RR_SUCCESS;
  std::string message;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const rr_result_t w = rr_wait(reqs[i]);
    if (w != RR_SUCCESS && first == RR_SUCCESS) {
      first = w;
      message = rr_last_error();
    }
    rr_request_free(reqs[i]);
    if (w == RR_SUCCESS && !right(small[i]) && !liar) judge(RR_SUCCESS, "a wrong result returned as success", "fused");
  }
  if (first != RR_SUCCESS) judge(first, message, "fused");
  for (size_t count : {size_t{256}, size_t{65536}}) {
    for (int i = 0; i < 3; ++i) {
      std::vector<float> v(count, static_cast<float>(rank + 1));
      rc = rr_allreduce(comm, v.data(), v.data(), v.size(), RR_FLOAT32, RR_SUM, nullptr);
      if (rc != RR_SUCCESS) judge(rc, rr_last_error(), "allreduce");
      if (!right(v) && !liar) judge(RR_SUCCESS, "a wrong result returned as success", "allreduce");
    }
  }
  judge(RR_SUCCESS, "every collective succeeded: the lie went unnoticed", "end");
}
