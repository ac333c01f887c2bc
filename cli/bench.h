// `ringreduce bench`: a ring benchmark in the style of nccl-tests' all_reduce_perf. Every
// size is first checked against a locally computed result (#wrong), then timed; time is the
// slowest rank's mean, algbw = size / time, busbw = algbw * nccl-tests' factor
// (all-reduce 2(n-1)/n, allgather and reduce_scatter (n-1)/n, broadcast 1), so that busbw
// reads as the link rate it achieved.
#pragma once

#include <cstddef>
#include <string>

#include "ringreduce/ringreduce.h"

namespace rr::cli {

struct BenchOptions {
  size_t minBytes = 1024;
  size_t maxBytes = 64 << 20;
  double stepFactor = 4;
  int iters = 20;
  int warmup = 5;
  rr_dtype_t dtype = RR_FLOAT32;
  rr_op_t op = RR_SUM;
  bool check = true;
  std::string collective = "allreduce";
  std::string format = "table";
  int root = 0;
  bool device = false;  // buffers in GPU memory (the GPU of the rank's local rank)
};

// Runs as one rank of a job (the launcher gave it a rank). Returns the exit status.
int runBench(const BenchOptions& options);

// "4K", "1M", "256m", "1G", "4096", "1.5M" -> bytes; throws std::invalid_argument naming
// the text for anything else (a sign, an exponent, nan, more than 1 PiB).
size_t parseSize(const std::string& text);
// Host memory one rank of the benchmark allocates for the largest size.
size_t benchBytesPerRank(const BenchOptions& options);

}  // namespace rr::cli
