// fork() after init, as a data loader or an atexit handler meets it. Every rank runs an
// all-reduce, then rank 0 submits an async all-reduce that rank 1 joins only 300 ms later,
// and forks while it is in flight. The child holds copies of the parent's communicator and
// request, whose threads, locks, sockets and UCX state are the parent's:
//   - every call on them fails at once with RR_ERR_INVALID_ARGUMENT naming the process that
//     made them (a collective, rr_comm_rank, rr_wait, rr_test);
//   - rr_request_free and rr_comm_destroy return at once and touch nothing shared;
//   - a communicator of its own (one rank) works; the child then exits through exit(),
//     static destructors and atexit handlers included.
// The parent waits for the child (bounded: a child that hangs fails the test), then its
// in-flight request and 20 more all-reduces complete with the right results, and its
// destroy returns.
// Usage: fork_check
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ringreduce/ringreduce.h"
#include "test/join.h"

namespace {

int rank = 0, size = 0;

[[noreturn]] void die(const std::string& what) {
  std::printf("rank %d (process %d): FAILED: %s\n", rank, static_cast<int>(getpid()), what.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

// The child: everything inherited refused or let go of, then a communicator of its own.
void child(rr_comm_t inherited, rr_request_t inFlight, pid_t parent) {
  const std::string made = "created by process " + std::to_string(parent) + " used in a forked child";
  std::vector<float> v(1024, 1.0f);
  const auto refused = [&](rr_result_t rc, const char* call) {
    const std::string message = rr_last_error();
    if (rc != RR_ERR_INVALID_ARGUMENT || message.find(made) == std::string::npos)
      die(std::string(call) + " in the child returned " + rr_result_string(rc) + ": " + message);
  };
  refused(rr_allreduce(inherited, v.data(), v.data(), v.size(), RR_FLOAT32, RR_SUM, nullptr), "rr_allreduce");
  int r = -1, done = 0;
  refused(rr_comm_rank(inherited, &r), "rr_comm_rank");
  refused(rr_test(inFlight, &done), "rr_test");
  refused(rr_wait(inFlight), "rr_wait");
  const auto start = std::chrono::steady_clock::now();
  if (rr_request_free(inFlight) != RR_SUCCESS) die(std::string("rr_request_free: ") + rr_last_error());
  if (rr_comm_destroy(inherited) != RR_SUCCESS) die(std::string("rr_comm_destroy: ") + rr_last_error());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  rr_config_t alone = RR_CONFIG_INIT;
  alone.rank = 0;
  alone.size = 1;
  rr_comm_t own = nullptr;
  if (rr_comm_init(&alone, &own) != RR_SUCCESS) die(std::string("a communicator of its own: ") + rr_last_error());
  if (rr_allreduce(own, v.data(), v.data(), v.size(), RR_FLOAT32, RR_SUM, nullptr) != RR_SUCCESS || v[0] != 1.0f)
    die("an all-reduce on its own communicator");
  rr_comm_destroy(own);
  std::printf("rank %d's child: the inherited communicator and request refused, destroy and free returned in %.1f ms, "
              "a communicator of its own works\n", rank, ms);
  std::fflush(stdout);
  // The parent's communicator is let go of in the child, never freed, by design: its UCX
  // state, reachable from the parent's threads only, is what LeakSanitizer would count in
  // the child (test/lsan_fork_child.supp lets exactly that pass).
  std::exit(0);  // atexit handlers and static destructors run
}

}  // namespace

int main() {
  const rr::test::Member me = rr::test::joinFromEnv();
  rr_comm_t comm = me.comm;
  rank = me.rank;
  size = me.size;
  std::vector<float> v(4096, static_cast<float>(rank + 1));
  const float want = static_cast<float>(size * (size + 1) / 2);
  if (rr_allreduce(comm, v.data(), v.data(), v.size(), RR_FLOAT32, RR_SUM, nullptr) != RR_SUCCESS || v[0] != want)
    die(std::string("the first all-reduce: ") + rr_last_error());
  std::vector<float> late(1 << 16, static_cast<float>(rank + 1));
  if (rank == 1) usleep(300000);  // rank 0's request is in flight while it forks
  rr_request_t req = nullptr;
  if (rr_allreduce_async(comm, late.data(), late.data(), late.size(), RR_FLOAT32, RR_SUM, nullptr, &req) != RR_SUCCESS)
    die(std::string("rr_allreduce_async: ") + rr_last_error());
  if (rank == 0) {
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) child(comm, req, parent);
    int status = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        die("the child did not exit within 20 s (hung in the library?)");
      }
      usleep(10000);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      die("the child failed (" + std::string(WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                                                   : "exit " + std::to_string(WEXITSTATUS(status))) + ")");
  }
  if (rr_wait(req) != RR_SUCCESS) die(std::string("the request in flight at the fork: ") + rr_last_error());
  rr_request_free(req);
  for (float x : late)
    if (x != want) die("the request in flight at the fork: a wrong result");
  for (int i = 0; i < 20; ++i) {
    std::fill(v.begin(), v.end(), static_cast<float>(rank + 1));
    if (rr_allreduce(comm, v.data(), v.data(), v.size(), RR_FLOAT32, RR_SUM, nullptr) != RR_SUCCESS)
      die(std::string("an all-reduce after the fork: ") + rr_last_error());
    for (float x : v)
      if (x != want) die("an all-reduce after the fork: a wrong result");
  }
  if (rr_comm_destroy(comm) != RR_SUCCESS) die(std::string("destroy: ") + rr_last_error());
  std::printf("rank %d: after the fork, the request in flight and 20 all-reduces right, destroy returned\n", rank);
  return 0;
}
