// One rank of test/culprit_test.sh: every rank runs blocking all-reduces of 12 KiB in a
// loop (RR_ALGO chooses the algorithm), results checked; the victim rank stops itself
// (SIGSTOP, from a thread, at a moment that falls inside a pass or between two) after 20
// rounds. Every other rank must fail with RR_ERR_TIMEOUT whose message names the victim and
// no other rank as the one that holds the job up ("rank V has not reported", "has not
// submitted", "waiting for data from rank V", "rank 0 has not answered" where rank 0 is the
// victim).
// Usage: culprit_check VICTIM
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ringreduce/ringreduce.h"
#include "test/join.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: culprit_check VICTIM\n");
    return 2;
  }
  const int victim = std::atoi(argv[1]);
  auto [comm, rank, size] = rr::test::joinFromEnv();
  std::vector<float> buf(3072);
  const float want = static_cast<float>(size * (size + 1) / 2);
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < 1000000; ++round) {
    if (rank == victim && round == 20) {
      std::random_device rd;
      const int us = static_cast<int>(rd() % 3000);
      std::thread([us] {
        usleep(static_cast<useconds_t>(us));
        raise(SIGSTOP);  // stops the whole process
      }).detach();
    }
    std::fill(buf.begin(), buf.end(), static_cast<float>(rank + 1));
    const rr_result_t rc = rr_allreduce(comm, buf.data(), buf.data(), buf.size(), RR_FLOAT32, RR_SUM, nullptr);
    if (rc != RR_SUCCESS) {
      const std::string message = rr_last_error();
      std::printf("rank %d: %s: %s\n", rank, rr_result_string(rc), message.c_str());
      rr_comm_destroy(comm);
      if (rank == victim) return 0;
      // The victim, and no other rank, as the one that holds the job up.
      const std::string v = "rank " + std::to_string(victim) + " ";
      bool named = false;
      for (const char* how : {"has not reported", "has not submitted", "has not answered"})
        named = named || message.find(v + how) != std::string::npos;
      for (const char* how : {"waiting for data from ", "waiting for "})
        named = named || message.find(how + v) != std::string::npos;
      bool wrong = false;
      for (int r = 0; r < size; ++r)
        for (const char* how : {" has not reported", " has not submitted"})
          wrong = wrong || (r != victim && message.find("rank " + std::to_string(r) + how) != std::string::npos);
      if (rc != RR_ERR_TIMEOUT || wrong || !named) {
        std::printf("rank %d: WRONG: expected a timeout naming rank %d\n", rank, victim);
        return 1;
      }
      return 0;
    }
    for (float x : buf)
      if (x != want) {
        std::printf("rank %d: WRONG: round %d: got %g, want %g\n", rank, round, static_cast<double>(x),
                    static_cast<double>(want));
        return 1;
      }
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) break;
  }
  std::printf("rank %d: WRONG: no error within 60 s\n", rank);
  rr_comm_destroy(comm);
  return 1;
}
