// bench/overlap: how much of the communication the asynchronous API hides behind compute.
//
// It replays ResNet-50's gradient profile: its 161 parameter tensors (25,557,032 fp32
// parameters, torchvision's order), grouped in reverse order into 25 MiB buckets as DDP
// does. Each tensor's backward compute is modelled as a wait proportional to its parameter
// count (a sleep, so it leaves the CPU to the engine); a bucket is submitted with
// rr_allreduce_async as soon as its last tensor is "computed", and the step waits for all
// buckets at the end.
//
//   1. comm alone: every bucket submitted back to back, no compute (the bound)
//   2. for compute = comm / 0.5 and comm / 1.0: step time, exposed communication
//      (step - compute) and scaling efficiency (compute / step)
//   3. fusion: 1,000 buckets of 4-64 KiB submitted back to back, with RR_FUSION_BYTES at its
//      default and at 0 (two communicators, one after the other)
//
// Every figure is the median over steps of the slowest rank. Usage, under a launcher:
//   ringreduce run -n 2 build/bench/overlap [--steps 10]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ringreduce/ringreduce.h"

namespace {

using Clock = std::chrono::steady_clock;
rr_comm_t comm = nullptr;
int rank = 0, nranks = 1;

void check(rr_result_t rc, const char* what) {
  if (rc != RR_SUCCESS) {
    std::fprintf(stderr, "overlap: %s failed: %s: %s\n", what, rr_result_string(rc), rr_last_error());
    std::exit(1);
  }
}

// torchvision resnet50().parameters(), in order: element counts.
std::vector<size_t> resnet50() {
  std::vector<size_t> t = {64 * 3 * 7 * 7, 64, 64};
  size_t inplanes = 64;
  const size_t planes[4] = {64, 128, 256, 512};
  const int blocks[4] = {3, 4, 6, 3};
  for (int l = 0; l < 4; ++l) {
    const size_t p = planes[l];
    for (int b = 0; b < blocks[l]; ++b) {
      t.insert(t.end(), {p * inplanes, p, p, p * p * 9, p, p, 4 * p * p, 4 * p, 4 * p});
      if (b == 0) t.insert(t.end(), {4 * p * inplanes, 4 * p, 4 * p});
      inplanes = 4 * p;
    }
  }
  t.insert(t.end(), {1000 * 2048, 1000});
  return t;
}

double slowest(double seconds) {
  check(rr_allreduce(comm, &seconds, &seconds, 1, RR_FLOAT64, RR_MAX, nullptr), "max");
  return seconds;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Bucket {
  size_t first, last;  // tensor indices [first, last], last < first in backward order
  std::vector<float> data;
};

// One step: backward over the tensors in reverse, `compute` seconds spread by size.
double step(std::vector<Bucket>& buckets, const std::vector<size_t>& tensors, double compute) {
  size_t total = 0;
  for (size_t n : tensors) total += n;
  std::vector<rr_request_t> reqs(buckets.size());
  check(rr_barrier(comm), "barrier");
  const auto start = Clock::now();
  double done = 0;
  size_t b = 0;
  for (size_t i = tensors.size(); i-- > 0;) {
    done += compute * static_cast<double>(tensors[i]) / static_cast<double>(total);
    if (compute > 0)
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(done)));
    if (i == buckets[b].last) {
      check(rr_allreduce_async(comm, buckets[b].data.data(), buckets[b].data.data(), buckets[b].data.size(),
                               RR_FLOAT32, RR_AVG, nullptr, &reqs[b]), "submit");
      ++b;
    }
  }
  for (auto& r : reqs) {
    check(rr_wait(r), "wait");
    rr_request_free(r);
  }
  return slowest(std::chrono::duration<double>(Clock::now() - start).count());
}

double smallBuckets(int steps) {
  std::mt19937 rng(7);
  std::vector<std::vector<float>> bufs(1000);
  for (auto& b : bufs) b.assign((4096 + rng() % (60 * 1024 + 1)) / 4, 1.0f);
  std::vector<double> times;
  std::vector<rr_request_t> reqs(bufs.size());
  for (int s = 0; s < steps + 1; ++s) {
    check(rr_barrier(comm), "barrier");
    const auto start = Clock::now();
    for (size_t i = 0; i < bufs.size(); ++i)
      check(rr_allreduce_async(comm, bufs[i].data(), bufs[i].data(), bufs[i].size(), RR_FLOAT32, RR_SUM, nullptr, &reqs[i]), "submit");
    for (auto& r : reqs) {
      check(rr_wait(r), "wait");
      rr_request_free(r);
    }
    const double t = slowest(std::chrono::duration<double>(Clock::now() - start).count());
    if (s > 0) times.push_back(t);  // the first step warms up
  }
  return median(times);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 10;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--steps" && i + 1 < argc) steps = std::max(1, std::atoi(argv[++i]));
  check(rr_comm_init_from_env(&comm), "init");
  rr_comm_rank(comm, &rank);
  rr_comm_size(comm, &nranks);

  const std::vector<size_t> tensors = resnet50();
  size_t params = 0;
  for (size_t n : tensors) params += n;
  std::vector<Bucket> buckets;
  size_t bytes = 0;
  for (size_t i = tensors.size(); i-- > 0;) {
    if (buckets.empty() || bytes >= (25u << 20)) {
      buckets.push_back({i, i, {}});
      bytes = 0;
    }
    buckets.back().last = i;
    bytes += tensors[i] * 4;
  }
  for (auto& b : buckets) {
    size_t n = 0;
    for (size_t i = b.last; i <= b.first; ++i) n += tensors[i];
    b.data.assign(n, 1.0f);
  }
  if (rank == 0) {
    std::printf("# ResNet-50: %zu tensors, %zu parameters (%.1f MiB fp32), %zu buckets of 25 MiB:", tensors.size(),
                params, params * 4.0 / (1 << 20), buckets.size());
    for (auto& b : buckets) std::printf(" %.1f", b.data.size() * 4.0 / (1 << 20));
    std::printf(" MiB; %d ranks\n", nranks);
  }

  std::vector<double> alone;
  step(buckets, tensors, 0);  // warm-up
  for (int s = 0; s < steps; ++s) alone.push_back(step(buckets, tensors, 0));
  const double commAlone = median(alone);
  // The last bucket can only start when the backward pass ends: its all-reduce alone is
  // exposed whatever the engine does, so compute / (compute + that) bounds the efficiency.
  std::vector<Bucket> last(1, Bucket{buckets.back().first, buckets.back().last, buckets.back().data});
  std::vector<size_t> lastTensors(tensors.begin() + static_cast<long>(last[0].last),
                                  tensors.begin() + static_cast<long>(last[0].first) + 1);
  last[0].first -= last[0].last;
  last[0].last = 0;
  std::vector<double> lastAlone;
  for (int s = 0; s < steps; ++s) lastAlone.push_back(step(last, lastTensors, 0));
  const double tail = median(lastAlone);
  if (rank == 0) {
    std::printf("# comm alone (all buckets back to back): %.1f ms; the last bucket alone: %.1f ms\n",
                commAlone * 1e3, tail * 1e3);
    std::printf("# %-10s %10s %10s %12s %10s %8s\n", "comm/comp", "compute", "step", "exposed",
                "efficiency", "bound");
  }
  for (double ratio : {0.5, 1.0}) {
    const double compute = commAlone / ratio;
    std::vector<double> times;
    for (int s = 0; s < steps; ++s) times.push_back(step(buckets, tensors, compute));
    const double t = median(times);
    if (rank == 0)
      std::printf("  %-10.1f %8.1fms %8.1fms %10.1fms %10.3f %8.3f\n", ratio, compute * 1e3, t * 1e3,
                  (t - compute) * 1e3, compute / t, compute / (compute + tail));
  }

  const double fused = smallBuckets(steps);
  check(rr_comm_destroy(comm), "destroy");
  setenv("RR_FUSION_BYTES", "0", 1);
  check(rr_comm_init_from_env(&comm), "init without fusion");
  const double unfused = smallBuckets(steps);
  check(rr_comm_destroy(comm), "destroy");
  if (rank == 0)
    std::printf("# 1000 buckets of 4-64 KiB (fp32 sum): fusion on %.1f ms, off %.1f ms per step; "
                "fusion saves %.0f%%\n",
                fused * 1e3, unfused * 1e3, 100.0 * (1.0 - fused / unfused));
  return 0;
}
