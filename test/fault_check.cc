// One rank of the fault tests (test/fault_test.sh starts the ranks itself, since a launcher
// would stop them all at the first failure). Every rank starts a 64 MiB all-reduce; the
// victim rank breaks it in one of these ways:
//
//   kill    SIGKILLs itself in the middle          stop   SIGSTOPs itself in the middle
//   count   calls with a different count           exit   exits without calling
//   link    (netns test) the victim only marks that it started; the script then sets its
//           link down and writes the time it did
//   abort   calls rr_comm_abort from a second thread in the middle
//   late    is late in user code: submits only after RR_TIMEOUT_MS + 1.5 s (the others
//           must name it as the rank that has not submitted, not their innocent neighbour)
//   stopsmall  every rank runs a loop of small asynchronous all-reduces (fused); the victim
//           SIGSTOPs itself in the middle of it
//   stopfree   as stop, then each survivor unmaps its bucket once its error has returned,
//           and when every survivor has, resumes the victim and waits 300 ms before it
//           destroys the communicator: nothing the library queued may read the caller's
//           memory after the error (a read of the unmapped bucket is a SIGSEGV)
//
// With RR_TEST_CULPRIT set, every survivor's error must contain that text (the rank named);
// with RR_TEST_DESTROY_BOUND_S, every survivor's destroy of the failed communicator must
// return within that many seconds (its waits for peers share one bound).
// Every other rank must fail with the expected code, naming the failure; it prints the time
// from the fault (a timestamp the victim or the script writes to RR_TEST_FAULT_FILE) to its
// error. Then the survivors destroy the communicator, form a new one among themselves at
// RR_TEST_ADDR2 (new size, ranks renumbered), and check an all-reduce; the process's open fd
// and thread counts must be back at their values before the first init.
// Usage: fault_check MODE VICTIM EXPECTED_CODE
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ringreduce/ringreduce.h"
#include "test/join.h"

namespace {

double nowSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

int countEntries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n - (std::strcmp(dir, "/proc/self/fd") == 0 ? 1 : 0);  // the DIR's own fd
}

// The threads of this process. pthread_join returns once the kernel has woken the joiner,
// which it does before the exiting thread leaves /proc/self/task: read until two reads
// 10 ms apart agree (at most 1 s), or the count is `want` (-1: any).
int countThreads(int want = -1) {
  int n = countEntries("/proc/self/task");
  for (int i = 0; i < 100 && n != want; ++i) {
    usleep(10000);
    const int again = countEntries("/proc/self/task");
    if (again == n && want < 0) break;
    n = again;
  }
  return n;
}

// The fault file holds the time of the fault and the victim's process id (written in one
// write at fclose, so a reader sees all of it or nothing).
void markFault() {
  if (const char* f = std::getenv("RR_TEST_FAULT_FILE")) {
    if (FILE* out = std::fopen(f, "w")) {
      std::fprintf(out, "%.6f %d\n", nowSeconds(), static_cast<int>(getpid()));
      std::fclose(out);
    }
  }
}

double faultTime(int* pid = nullptr) {
  const char* f = std::getenv("RR_TEST_FAULT_FILE");
  double t = 0;
  int p = 0;
  for (int i = 0; i < 100 && f != nullptr; ++i) {
    if (FILE* in = std::fopen(f, "r")) {
      const int got = std::fscanf(in, "%lf %d", &t, &p);
      std::fclose(in);
      if (got >= 1) {  // the scripts that write the file themselves write the time alone
        if (pid != nullptr) *pid = got == 2 ? p : 0;
        return t;
      }
    }
    usleep(20000);
  }
  return t;
}

// stopfree: this survivor's error has returned and its bucket is unmapped; once every
// survivor's is (files beside the fault file, at most 20 s), the victim is resumed and
// takes in what was queued to it while this process goes on for 300 ms. One survivor
// resumes it, once: a later SIGCONT discards any pending stop signal, and the victim's
// LeakSanitizer stops its threads at exit with PTRACE_ATTACH's SIGSTOP, so a second
// SIGCONT arriving then left it spinning for good (seen once in CI, under ASan).
void resumeVictimOnceFreed(int rank, int size, int victim) {
  const std::string base = std::getenv("RR_TEST_FAULT_FILE");
  if (FILE* out = std::fopen((base + ".freed." + std::to_string(rank)).c_str(), "w")) std::fclose(out);
  for (int i = 0; i < 1000; ++i) {
    int freed = 0;
    for (int r = 0; r < size; ++r)
      freed += r != victim && access((base + ".freed." + std::to_string(r)).c_str(), F_OK) == 0;
    if (freed == size - 1) break;
    usleep(20000);
  }
  int pid = 0;
  faultTime(&pid);
  const int resumer = victim == 0 ? 1 : 0;
  if (rank == resumer && pid > 0) kill(pid, SIGCONT);
  usleep(300000);
}

}  // namespace

int report(rr_comm_t comm, int rank, int size, int victim, int expected, rr_result_t rc,
           double errorAt, const std::string& message, int fds0, int threads0);

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: fault_check MODE VICTIM EXPECTED_CODE\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int victim = std::atoi(argv[2]);
  const int expected = std::atoi(argv[3]);
  // ThreadSanitizer starts a helper thread at the first pthread_create; start it now so
  // that the counts compare the library's threads only.
  std::thread([] {}).join();
  const int fds0 = countEntries("/proc/self/fd");
  const int threads0 = countThreads();

  // The buckets are filled before init, not between init and the first collective (the
  // barrier): there a survivor's first touch of 128 MiB once outlasted the victim's wait
  // of RR_TIMEOUT_MS (3 s) under ThreadSanitizer, and the barrier failed on every rank.
  const size_t count = (64u << 20) / 4;
  std::vector<float> buf(count + 1, 1.0f);
  // stopfree: a survivor's bucket in memory of its own, unmapped after the error. The
  // launcher's RR_RANK says which rank this is before init (fault_test.sh sets it).
  const char* launchedAs = std::getenv("RR_RANK");
  const size_t mappedBytes = count * sizeof(float);
  void* mapped = nullptr;
  if (mode == "stopfree" && (launchedAs == nullptr || std::atoi(launchedAs) != victim)) {
    mapped = mmap(nullptr, mappedBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return 1;
    std::fill(static_cast<float*>(mapped), static_cast<float*>(mapped) + count, 1.0f);
  }
  auto [comm, rank, size] = rr::test::joinFromEnv();
  if (mapped != nullptr && rank == victim) {  // RR_RANK was not set: the victim needs none
    munmap(mapped, mappedBytes);
    mapped = nullptr;
  }
  if (rr_barrier(comm) != RR_SUCCESS) {
    std::fprintf(stderr, "rank %d: barrier: %s\n", rank, rr_last_error());
    return 1;
  }

  if (mode == "stopsmall") {  // a loop of small all-reduces, fused in flight
    std::vector<std::vector<float>> small(32, std::vector<float>(256, 1.0f));
    std::vector<rr_request_t> reqs(small.size());
    rr_result_t rc = RR_SUCCESS;
    double errorAt = 0;
    std::string message;
    for (int round = 0; round < 100000 && rc == RR_SUCCESS; ++round) {
      if (rank == victim && round == 50) {
        markFault();
        raise(SIGSTOP);
      }
      for (size_t k = 0; k < small.size(); ++k)
        rr_allreduce_async(comm, small[k].data(), small[k].data(), small[k].size(), RR_FLOAT32, RR_MAX, nullptr, &reqs[k]);
      for (auto* r : reqs) {
        const rr_result_t w = rr_wait(r);
        if (w != RR_SUCCESS && rc == RR_SUCCESS) {
          rc = w;
          errorAt = nowSeconds();
          message = rr_last_error();
        }
        rr_request_free(r);
      }
    }
    return report(comm, rank, size, victim, expected, rc, errorAt, message, fds0, threads0);
  }

  if (rank == victim) {
    if (mode == "late") {
      markFault();
      const char* t = std::getenv("RR_TIMEOUT_MS");
      usleep(static_cast<useconds_t>((t != nullptr ? std::atoi(t) : 3000) + 1500) * 1000);
    }
    if (mode == "exit") {
      markFault();
      std::_Exit(0);
    }
    rr_request_t req = nullptr;
    const size_t mine = mode == "count" ? count - 1 : count;
    if (mode == "count") markFault();  // the call itself is the fault
    if (rr_allreduce_async(comm, buf.data(), buf.data(), mine, RR_FLOAT32, RR_SUM, nullptr, &req) != RR_SUCCESS) return 1;
    usleep(20000);  // in the middle of the 64 MiB all-reduce
    if (mode == "kill") {
      markFault();
      raise(SIGKILL);
    }
    if (mode == "stop" || mode == "stopfree") {
      markFault();
      raise(SIGSTOP);
    }
    if (mode == "abort") {
      std::thread([comm] { markFault(); rr_comm_abort(comm); }).join();
    }
    if (mode == "link") markFault();  // the script sets the link down once it sees this
    rr_result_t rc = rr_wait(req);
    std::printf("rank %d (victim): %s: %s\n", rank, rr_result_string(rc), rr_last_error());
    rr_request_free(req);
    rr_comm_destroy(comm);
    return 0;
  }

  if (mapped != nullptr) {
    auto* data = static_cast<float*>(mapped);
    const rr_result_t rc = rr_allreduce(comm, data, data, count, RR_FLOAT32, RR_SUM, nullptr);
    const double errorAt = nowSeconds();
    const std::string message = rr_last_error();
    munmap(mapped, mappedBytes);
    resumeVictimOnceFreed(rank, size, victim);
    return report(comm, rank, size, victim, expected, rc, errorAt, message, fds0, threads0);
  }
  const rr_result_t rc = rr_allreduce(comm, buf.data(), buf.data(), count, RR_FLOAT32, RR_SUM, nullptr);
  const double errorAt = nowSeconds();
  return report(comm, rank, size, victim, expected, rc, errorAt, rr_last_error(), fds0, threads0);
}

// A survivor's error: the expected code, the culprit named (RR_TEST_CULPRIT), every later
// call failing the same way; then recovery among the survivors.
int report(rr_comm_t comm, int rank, int size, int victim, int expected, rr_result_t rc,
           double errorAt, const std::string& message, int fds0, int threads0) {
  rr_result_t async = RR_SUCCESS;
  rr_comm_get_async_error(comm, &async);
  const rr_result_t later = rr_barrier(comm);
  std::printf("rank %d: %s after %.3f s: %s\n", rank, rr_result_string(rc), errorAt - faultTime(),
              message.c_str());
  bool ok = rc == expected && async == rc && later == rc;
  const char* culprit = std::getenv("RR_TEST_CULPRIT");
  if (ok && culprit != nullptr && message.find(culprit) == std::string::npos) {
    std::printf("rank %d: WRONG: the error does not name '%s'\n", rank, culprit);
    ok = false;
  }
  if (!ok)
    std::printf("rank %d: WRONG: got %s (async %s, next call %s), expected %s\n", rank,
                rr_result_string(rc), rr_result_string(async), rr_result_string(later),
                rr_result_string(static_cast<rr_result_t>(expected)));
  const double destroyStart = nowSeconds();
  rr_comm_destroy(comm);
  const double destroySeconds = nowSeconds() - destroyStart;
  if (const char* bound = std::getenv("RR_TEST_DESTROY_BOUND_S")) {
    const bool within = destroySeconds <= std::atof(bound);
    std::printf("rank %d: %sdestroy returned in %.2f s (bound %s s)\n", rank, within ? "" : "WRONG: ", destroySeconds,
                bound);
    ok = ok && within;
  }

  // Recovery: the survivors form a new communicator in the same processes.
  rr_config_t cfg = RR_CONFIG_INIT;
  cfg.size = size - 1;
  cfg.rank = rank < victim ? rank : rank - 1;
  cfg.addr = std::getenv("RR_TEST_ADDR2");
  cfg.timeout_ms = 60000;
  if (rr_comm_init(&cfg, &comm) != RR_SUCCESS) {
    std::printf("rank %d: WRONG: the survivors could not form a new communicator: %s\n", rank, rr_last_error());
    return 1;
  }
  std::vector<float> v(1 << 20, static_cast<float>(cfg.rank + 1));
  if (rr_allreduce(comm, v.data(), v.data(), v.size(), RR_FLOAT32, RR_SUM, nullptr) != RR_SUCCESS) {
    std::printf("rank %d: WRONG: all-reduce on the new communicator: %s\n", rank, rr_last_error());
    return 1;
  }
  const float want = static_cast<float>(cfg.size * (cfg.size + 1) / 2);
  bool correct = true;
  for (float x : v)
    if (x != want) correct = false;
  rr_comm_destroy(comm);
  const int fds1 = countEntries("/proc/self/fd"), threads1 = countThreads(threads0);
  std::printf("rank %d: recovered as rank %d of %d, all-reduce %s; fds %d -> %d, threads %d -> %d\n",
              rank, cfg.rank, cfg.size, correct ? "correct" : "WRONG", fds0, fds1, threads0, threads1);
  return ok && correct && fds0 == fds1 && threads0 == threads1 ? 0 : 1;
}
