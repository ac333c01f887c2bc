// One rank of the stream-ordering checks on the stand-in GPU (RR_TEST_FAKE_DEVICE=1, started
// by `ringreduce run -n N`); test/gpu_stream_check.cu is the same check on a real GPU.
//
//   order       on a stream of its own, then on stream NULL, each rank queues a slow kernel
//               that writes its bucket, calls rr_allreduce_async on that stream, queues a
//               kernel that checks the summed bucket, and only then synchronises. The sum is
//               right only if the all-reduce started after the writer and the checker ran
//               after the all-reduce.
//   concurrent  rank 0's all-reduce is in flight (the others submit only when rank 0 says
//               so, through a file): kernels on another stream of rank 0 must still run. A
//               hold that blocks the device (a waiting host function) fails here.
//   order-cold  order, with the checker kernel launched for the first time while the
//               all-reduce holds the stream: its lazy load is a barrier across the device
//               (fake_gpu.h, rules 5 and 8). The library queues a collective's device work
//               at the call, so the barrier waits only for work that needs no further CUDA
//               call, and the check passes. (When the progress thread launched each kernel
//               as segments landed, they queued behind the barrier and the all-reduce ended
//               in RR_ERR_TIMEOUT, on the stand-in and on an H200.)
//   hang        the last rank's stream never lets the all-reduce start (a kernel that waits
//               until the test is over): every rank must fail with RR_ERR_TIMEOUT naming the
//               unfinished device work and the rank whose GPU it is, never hang.
//
// Usage: stream_order_check MODE [DIR]  (DIR: where `concurrent` puts its signal file)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/fake_gpu.h"
#include "ringreduce/ringreduce.h"

namespace fake = rr::fake;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

int rank = 0, nranks = 1;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  std::exit(1);
}

void check(rr_result_t rc, const std::string& what) {
  if (rc != RR_SUCCESS) die(what + ": " + rr_result_string(rc) + ": " + rr_last_error());
}

void sync(fake::Stream* s, const std::string& what) {
  if (!fake::streamSynchronize(s, 60000ms))
    die(what + ": the stream did not finish within 60 s; stand-in state: " + fake::describeState());
}

constexpr size_t kCount = 300007;  // several segments per chunk

void order(rr_comm_t comm, bool cold) {
  std::vector<float> buf(kCount);
  fake::Stream* own = fake::createStream();
  // This program's kernels are loaded before any collective (as a trainer's are after its
  // first step, or all of them with CUDA_MODULE_LOADING=EAGER), so that the library's own
  // first launch is what meets the held stream under RR_TEST_KERNEL_LOADING=lazy.
  fake::loadKernel("writer");
  if (!cold) fake::loadKernel("checker");
  int early = 0, rounds = 0;
  for (fake::Stream* stream : {own, static_cast<fake::Stream*>(nullptr)}) {
    const std::string name = stream == nullptr ? "stream NULL" : "own stream";
    for (int iter = 0; iter < 3; ++iter, ++rounds) {
      const float value = static_cast<float>(rank + 1 + iter);
      fake::launch(stream, "writer", [&buf, value] {  // the writer: slow, then fills the bucket
        std::this_thread::sleep_for(20ms);
        for (float& x : buf) x = value;
      });
      rr_request_t req = nullptr;
      check(rr_allreduce_async(comm, buf.data(), buf.data(), kCount, RR_FLOAT32, RR_SUM, stream, &req),
            "rr_allreduce_async on " + name);
      early += !fake::streamQuery(stream);
      float want = 0;
      for (int r = 0; r < nranks; ++r) want += static_cast<float>(r + 1 + iter);
      size_t wrong = 0;
      fake::launch(stream, "checker", [&buf, &wrong, want] {  // the checker
        for (float x : buf) wrong += x != want;
      });
      sync(stream, name);
      check(rr_wait(req), "rr_wait on " + name);
      check(rr_request_free(req), "rr_request_free");
      if (wrong != 0)
        die(name + ": " + std::to_string(wrong) + " of " + std::to_string(kCount) +
            " elements are not " + std::to_string(want) + " after the all-reduce");
    }
  }
  fake::destroyStream(own);
  std::printf("rank %d of %d: stream ordering ok on its own stream and on stream NULL (%d rounds); "
              "the call returned while the writer was still running in %d of %d rounds\n",
              rank, nranks, rounds, early, rounds);
}

void concurrent(rr_comm_t comm, const std::string& dir) {
  const std::string go = dir + "/go";
  std::vector<float> buf(kCount, static_cast<float>(rank + 1));
  fake::Stream* stream = fake::createStream();
  fake::Stream* compute = fake::createStream();
  // Loaded before the all-reduce holds a stream, as the GPU check's compute kernel is by its
  // run alone (a first launch while the stream is held would wait for the release: rule 8).
  fake::loadKernel("compute");
  rr_request_t req = nullptr;
  if (rank != 0) {  // wait for rank 0's signal (bounded), then submit
    const auto until = Clock::now() + 60s;
    while (!std::ifstream(go).good()) {
      if (Clock::now() > until) die("rank 0 never signalled in 60 s");
      std::this_thread::sleep_for(1ms);
    }
  }
  check(rr_allreduce_async(comm, buf.data(), buf.data(), kCount, RR_FLOAT32, RR_SUM, stream, &req),
        "rr_allreduce_async");
  if (rank == 0) {
    int done = 0;
    if (rr_test(req, &done) != RR_IN_PROGRESS || done)
      die("the all-reduce finished before the other ranks submitted it");
    for (int i = 0; i < 20; ++i) {
      std::atomic<bool> ran{false};
      fake::launch(compute, "compute", [&ran] { ran = true; });
      if (!fake::streamSynchronize(compute, 2000ms) || !ran.load())
        die("a kernel on another stream did not run within 2 s while an all-reduce was in "
            "flight (kernel " + std::to_string(i) + " of 20); stand-in state: " + fake::describeState());
    }
    if (rr_test(req, &done) != RR_IN_PROGRESS || done)
      die("the all-reduce finished before the other ranks submitted it");
    std::ofstream(go) << "go\n";
  }
  sync(stream, "the all-reduce's stream");
  check(rr_wait(req), "rr_wait");
  check(rr_request_free(req), "rr_request_free");
  const float want = static_cast<float>(nranks * (nranks + 1) / 2);
  for (float x : buf)
    if (x != want) die("the all-reduce result is " + std::to_string(x) + ", expected " + std::to_string(want));
  fake::destroyStream(compute);
  fake::destroyStream(stream);
  std::printf("rank %d of %d: 20 kernels on another stream ran while the all-reduce was in flight\n",
              rank, nranks);
}

void hang(rr_comm_t comm) {
  std::vector<float> buf(kCount, 1.0f);
  fake::Stream* stream = fake::createStream();
  // A first all-reduce opens the GPU (its pinned staging: an allocation that synchronises
  // the device, so it would wait for the hung kernel below, as cudaHostAlloc would).
  check(rr_allreduce(comm, buf.data(), buf.data(), kCount, RR_FLOAT32, RR_SUM, stream), "warm-up");
  std::atomic<bool> over{false};
  const bool hung = rank == nranks - 1;
  if (hung)  // a kernel that never finishes while the collective waits for it
    fake::launch(stream, "hung kernel", [&over] {
      const auto until = Clock::now() + 120s;
      while (!over.load() && Clock::now() < until) std::this_thread::sleep_for(1ms);
    });
  const auto start = Clock::now();
  const rr_result_t rc = rr_allreduce(comm, buf.data(), buf.data(), kCount, RR_FLOAT32, RR_SUM, stream);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string message = rr_last_error();
  over = true;
  sync(stream, "the hung stream");
  // After a failed collective the library's queued kernels may still touch the buffers until
  // they run: free them as CUDA does, behind an implicit synchronisation (cudaFree).
  fake::synchronizeDevice("cudaFree");
  if (rc != RR_ERR_TIMEOUT)
    die(std::string("expected RR_ERR_TIMEOUT, got ") + rr_result_string(rc) + ": " + message);
  const std::string device = "device work";
  const std::string culprit = "rank " + std::to_string(nranks - 1);
  if (message.find(device) == std::string::npos || message.find(culprit) == std::string::npos)
    die("the timeout does not name the device work and " + culprit + ": " + message);
  std::printf("rank %d of %d: RR_ERR_TIMEOUT after %.2f s: %s\n", rank, nranks, took, message.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "order";
  const char* fakeEnv = std::getenv("RR_TEST_FAKE_DEVICE");
  if (fakeEnv == nullptr || std::string(fakeEnv) != "1") die("set RR_TEST_FAKE_DEVICE=1");
  rr_comm_t comm = nullptr;
  check(rr_comm_init_from_env(&comm), "rr_comm_init_from_env");
  check(rr_comm_rank(comm, &rank), "rank");
  check(rr_comm_size(comm, &nranks), "size");
  if (mode == "order" || mode == "order-cold") {
    order(comm, mode == "order-cold");
  } else if (mode == "concurrent") {
    if (argc < 3) die("concurrent needs a folder");
    concurrent(comm, argv[2]);
  } else if (mode == "hang") {
    hang(comm);
  } else {
    die("unknown mode " + mode);
  }
  check(rr_comm_destroy(comm), "rr_comm_destroy");
  return 0;
}
