// Gloo's all-reduce timed as `ringreduce bench` times its own: fp32 sum, in place, sizes
// from MIN to MAX bytes by a factor of 4, WARMUP untimed calls then ITERS timed back to
// back, the slowest rank's mean time; busbw = bytes / time x 2(n-1)/n. Results are checked
// once per size (every element must be the sum of the ranks' values). Ranks meet through a
// FileStore in DIR over Gloo's TCP transport on 127.0.0.1 (or GLOO_HOST).
// Usage (rank and size from RR_RANK/RR_SIZE, e.g. under `ringreduce run -n N`):
//   gloo_allreduce ALGO DIR [MIN MAX ITERS WARMUP]      ALGO: ring | halving_doubling | bcube
// Prints "bytes time_us busbw_GBs" per size (rank 0), as bench/peers.sh reads it.
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

int envInt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) {
    std::fprintf(stderr, "gloo_allreduce: %s is not set (start it with ringreduce run -n N)\n", name);
    std::exit(2);
  }
  return std::atoi(v);
}

// One all-reduce of `count` floats at `buf` with the algorithm named.
void allreduce(const std::string& algo, const std::shared_ptr<gloo::Context>& ctx, float* buf, size_t count) {
  if (algo == "ring") {
    gloo::AllreduceRing<float>(ctx, {buf}, static_cast<int>(count)).run();
  } else if (algo == "halving_doubling") {
    gloo::AllreduceHalvingDoubling<float>(ctx, {buf}, static_cast<int>(count)).run();
  } else {
    gloo::AllreduceOptions opts(ctx);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
    opts.setOutput(buf, count);
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gloo_allreduce ring|halving_doubling|bcube DIR [MIN MAX ITERS WARMUP]\n");
    return 2;
  }
  const std::string algo = argv[1];
  if (algo != "ring" && algo != "halving_doubling" && algo != "bcube") {
    std::fprintf(stderr, "gloo_allreduce: unknown algorithm '%s'\n", algo.c_str());
    return 2;
  }
  const int rank = envInt("RR_RANK"), n = envInt("RR_SIZE");
  const size_t minBytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 4096;
  const size_t maxBytes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : size_t{256} << 20;
  const int iters = argc > 5 ? std::atoi(argv[5]) : 10, warmup = argc > 6 ? std::atoi(argv[6]) : 2;
  const char* host = std::getenv("GLOO_HOST");
  gloo::transport::tcp::attr attr(host != nullptr ? host : "127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[2]);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(120));
  ctx->connectFullMesh(store, device);
  std::vector<float> buf(maxBytes / sizeof(float));
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
    const size_t count = bytes / sizeof(float);
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(rank + 1);
    allreduce(algo, ctx, buf.data(), count);
    long wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += buf[i] != static_cast<float>(n * (n + 1) / 2);
    for (int i = 0; i < warmup; ++i) allreduce(algo, ctx, buf.data(), count);
    float sync = 0;
    gloo::AllreduceRing<float>(ctx, {&sync}, 1).run();  // a barrier
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) allreduce(algo, ctx, buf.data(), count);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    // The slowest rank's time and every rank's wrong count, in one all-reduce of maxima.
    float stats[2] = {static_cast<float>(us), static_cast<float>(wrong)};
    gloo::AllreduceRing<float>(ctx, {stats}, 2, gloo::ReductionFunction<float>::max).run();
    if (rank == 0)
      std::printf("%12zu %12.2f %8.3f %s\n", bytes, stats[0], bytes / (stats[0] * 1e3) * 2.0 * (n - 1) / n,
                  stats[1] > 0 ? "WRONG" : "");
    std::fflush(stdout);
  }
  return 0;
}
