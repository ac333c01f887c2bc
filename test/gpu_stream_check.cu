// One rank of the stream-ordering test on a real GPU (started by `ringreduce run -n N`):
// on a stream of its own, and then on the legacy default stream (stream NULL), each rank
// queues a slow kernel that writes its bucket, calls rr_allreduce_async on that stream,
// queues a kernel that checks the summed bucket, and only then synchronises. The sum is
// right only if the all-reduce started after the writer and the checker ran after the
// all-reduce. It also reports whether the call returned while the writer was still running
// (it must not wait for the GPU). Then, with more than one rank, the concurrency check: a
// compute kernel on another stream of rank 0 must run while rank 0's all-reduce is in flight
// (the other ranks submit theirs 300 ms later), as fast as alone: its time with the
// all-reduce in flight within 20% of its time alone (a hold that blocks the device, such as
// a waiting host function on Hopper, stalls it for the whole collective). Exits 77 (skipped)
// saying why where there is no GPU.
#include <cuda_runtime.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ringreduce/ringreduce.h"

namespace {

int rank = 0;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  std::exit(1);
}

void cudaCheck(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(rc));
}

void rrCheck(rr_result_t rc, const char* what) {
  if (rc != RR_SUCCESS) die(std::string(what) + ": " + rr_result_string(rc) + ": " + rr_last_error());
}

// Spins for `cycles` clock ticks, then writes value into every element.
__global__ void slowFill(float* buf, size_t n, float value, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    buf[i] = value;
}

// Counts the elements that differ from want.
__global__ void countWrong(const float* buf, size_t n, float want, unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    mine += buf[i] != want;
  if (mine > 0) atomicAdd(wrong, mine);
}

// Spins for `cycles` clock ticks: stands for a trainer's compute on another stream.
__global__ void compute(long long cycles, int* sink) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) *sink = 1;
}

// Milliseconds a compute kernel of `cycles` takes on `stream` (events around it).
float timeCompute(cudaStream_t stream, long long cycles, int* sink) {
  cudaEvent_t a, b;
  cudaCheck(cudaEventCreate(&a), "cudaEventCreate");
  cudaCheck(cudaEventCreate(&b), "cudaEventCreate");
  cudaCheck(cudaEventRecord(a, stream), "cudaEventRecord");
  compute<<<1, 32, 0, stream>>>(cycles, sink);
  cudaCheck(cudaGetLastError(), "compute launch");
  cudaCheck(cudaEventRecord(b, stream), "cudaEventRecord");
  cudaCheck(cudaEventSynchronize(b), "cudaEventSynchronize");
  float ms = 0;
  cudaCheck(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms;
}

// Rank 0 times a compute kernel on another stream alone and while its all-reduce (on its
// own stream) waits for the other ranks, which submit 300 ms later. Median of 3 each.
void concurrency(rr_comm_t comm, float* buf, size_t elems, cudaStream_t own, long long cycles) {
  cudaStream_t other = nullptr;
  cudaCheck(cudaStreamCreate(&other), "cudaStreamCreate");
  int* sink = nullptr;
  cudaCheck(cudaMalloc(&sink, sizeof *sink), "cudaMalloc");
  std::vector<float> alone, during;
  int overlapped = 0;
  for (int i = 0; i < 3; ++i) {
    if (rank == 0) alone.push_back(timeCompute(other, cycles, sink));
    rrCheck(rr_barrier(comm), "rr_barrier");
    if (rank != 0) usleep(300 * 1000);
    rr_request_t req = nullptr;
    rrCheck(rr_allreduce_async(comm, buf, buf, elems, RR_FLOAT32, RR_SUM, own, &req), "rr_allreduce_async");
    if (rank == 0) {
      during.push_back(timeCompute(other, cycles, sink));
      int done = 0;
      overlapped += rr_test(req, &done) == RR_IN_PROGRESS && !done;
    }
    rrCheck(rr_wait(req), "rr_wait");
    rrCheck(rr_request_free(req), "rr_request_free");
    cudaCheck(cudaStreamSynchronize(own), "cudaStreamSynchronize");
  }
  cudaFree(sink);
  cudaStreamDestroy(other);
  if (rank != 0) return;
  std::sort(alone.begin(), alone.end());
  std::sort(during.begin(), during.end());
  const float ratio = during[1] / alone[1];
  std::printf("rank 0: concurrency: a compute kernel on another stream took %.2f ms alone and "
              "%.2f ms while an all-reduce was in flight (ratio %.3f; %d of 3 overlapped)\n",
              alone[1], during[1], ratio, overlapped);
  if (overlapped < 3) die("the all-reduce was not in flight while the compute kernel ran");
  if (ratio > 1.2f) die("a compute kernel on another stream was slowed by more than 20% by an in-flight all-reduce");
}

}  // namespace

int main() {
  int count = 0;
  if (cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n",
                rc != cudaSuccess ? cudaGetErrorString(rc) : "the driver reports none");
    return 77;
  }
  rr_comm_t comm = nullptr;
  rrCheck(rr_comm_init_from_env(&comm), "rr_comm_init_from_env");
  int n = 1;
  rrCheck(rr_comm_rank(comm, &rank), "rank");
  rrCheck(rr_comm_size(comm, &n), "size");
  const char* local = std::getenv("RR_LOCAL_RANK");
  cudaCheck(cudaSetDevice((local != nullptr ? std::atoi(local) : rank) % count), "cudaSetDevice");
  int clockKhz = 0, device = 0;
  cudaCheck(cudaGetDevice(&device), "cudaGetDevice");
  cudaCheck(cudaDeviceGetAttribute(&clockKhz, cudaDevAttrClockRate, device), "clock rate");
  const long long cycles = static_cast<long long>(clockKhz) * 50;  // about 50 ms

  const size_t elems = size_t{16} << 20;  // 64 MiB of fp32
  float* buf = nullptr;
  unsigned long long* wrong = nullptr;
  cudaCheck(cudaMalloc(&buf, elems * sizeof(float)), "cudaMalloc");
  cudaCheck(cudaMalloc(&wrong, sizeof *wrong), "cudaMalloc");
  cudaStream_t own = nullptr;
  cudaCheck(cudaStreamCreate(&own), "cudaStreamCreate");

  int early = 0, rounds = 0;
  for (cudaStream_t stream : {own, static_cast<cudaStream_t>(nullptr)}) {
    const char* name = stream == nullptr ? "stream NULL (legacy default)" : "own stream";
    for (int iter = 0; iter < 3; ++iter, ++rounds) {
      cudaCheck(cudaMemsetAsync(wrong, 0, sizeof *wrong, stream), "cudaMemsetAsync");
      const float value = static_cast<float>(rank + 1 + iter);
      slowFill<<<264, 256, 0, stream>>>(buf, elems, value, cycles);
      cudaCheck(cudaGetLastError(), "slowFill launch");
      rr_request_t req = nullptr;
      rrCheck(rr_allreduce_async(comm, buf, buf, elems, RR_FLOAT32, RR_SUM, stream, &req),
              "rr_allreduce_async");
      early += cudaStreamQuery(stream) == cudaErrorNotReady;
      float want = 0;
      for (int r = 0; r < n; ++r) want += static_cast<float>(r + 1 + iter);
      countWrong<<<264, 256, 0, stream>>>(buf, elems, want, wrong);
      cudaCheck(cudaGetLastError(), "countWrong launch");
      cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      rrCheck(rr_wait(req), "rr_wait");
      rrCheck(rr_request_free(req), "rr_request_free");
      unsigned long long bad = 0;
      cudaCheck(cudaMemcpy(&bad, wrong, sizeof bad, cudaMemcpyDeviceToHost), "cudaMemcpy");
      if (bad != 0)
        die(std::string(name) + ": " + std::to_string(bad) + " of " + std::to_string(elems) +
            " elements are not " + std::to_string(want) + " after the all-reduce");
    }
  }
  if (n > 1) concurrency(comm, buf, elems, own, cycles / 2);
  rrCheck(rr_comm_destroy(comm), "rr_comm_destroy");
  std::printf("rank %d of %d: stream ordering ok on its own stream and on stream NULL (%d rounds); "
              "the call returned while the writer was still running in %d of %d rounds\n",
              rank, n, rounds, early, rounds);
  return 0;
}
