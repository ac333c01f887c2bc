// One rank of the multi-process collective test, started by `ringreduce run -n N` or by
// mpirun. Every collective, every dtype and op, in place and out of place, for the counts
// 0, 1, n-1, n+1, a prime, and one larger than several segments. Integers must match the
// scalar reference exactly; floats (random values in [-1, 1]) within a stated tolerance:
// |got - want| <= tol * (|want| + 1) with tol = 1e-5 (fp32), 1e-12 (fp64), 2e-2 (fp16),
// 8e-2 (bf16), since the ring adds in a different order than the reference. Every
// all-reduce's result must also be the same bytes on every rank (a hash of it, gathered).
//
// --device: the same checks on GPU buffers (counts 0, 1, 7, 1 Mi + 3): each call's buffers are
// copied to GPU memory, the collective runs there on a stream of this program's, and the
// results are copied back and checked. Every rank uses GPU (local rank % GPU count). Exits
// 77 (skipped) saying why where CUDA has no device or the build has no CUDA.
// Usage: collectives_check [--quick] [--device]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/half.h"
#include "kernels/reduce.h"
#include "ringreduce/ringreduce.h"

#ifdef RR_TEST_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

int rank = 0, nranks = 1;
long checks = 0;

// Element i of rank r's input to the call numbered seed: a counter-based hash of (seed, r, i)
// (SplitMix64's mixing function), so that any slice can be made on its own and each element
// costs a few nanoseconds (a std::mt19937_64 stream here took four fifths of this program's
// time, more than the collectives it checks). Floats are uniform in [-1, 1) from the top 53
// bits; integers take the low bytes of the hash. first: the index of p[0].
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void fillInput(uint8_t* p, size_t count, rr_dtype_t dtype, int r, uint64_t seed, size_t first = 0) {
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  const uint64_t stream = mix(seed * 1000003 + static_cast<uint64_t>(r) + 1);
  const size_t es = rr::dtypeSize(dtype);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t bits = mix(stream + (first + i + 1) * kGolden);
    const double v = static_cast<double>(bits >> 11) * 0x1.0p-52 - 1.0;
    switch (dtype) {
      case RR_FLOAT32: { float f = static_cast<float>(v); std::memcpy(p + 4 * i, &f, 4); break; }
      case RR_FLOAT64: std::memcpy(p + 8 * i, &v, 8); break;
      case RR_FLOAT16: { uint16_t h = rr::floatToFp16(static_cast<float>(v)); std::memcpy(p + 2 * i, &h, 2); break; }
      case RR_BFLOAT16: { uint16_t h = rr::floatToBf16(static_cast<float>(v)); std::memcpy(p + 2 * i, &h, 2); break; }
      default: std::memcpy(p + es * i, &bits, es);
    }
  }
}

double asDouble(const uint8_t* p, rr_dtype_t dtype) {
  switch (dtype) {
    case RR_FLOAT32: { float f; std::memcpy(&f, p, 4); return f; }
    case RR_FLOAT64: { double d; std::memcpy(&d, p, 8); return d; }
    case RR_FLOAT16: { uint16_t h; std::memcpy(&h, p, 2); return rr::fp16ToFloat(h); }
    case RR_BFLOAT16: { uint16_t h; std::memcpy(&h, p, 2); return rr::bf16ToFloat(h); }
    default: return 0;
  }
}

double tolerance(rr_dtype_t dtype) {
  switch (dtype) {
    case RR_FLOAT32: return 1e-5;
    case RR_FLOAT64: return 1e-12;
    case RR_FLOAT16: return 2e-2;
    case RR_BFLOAT16: return 8e-2;
    default: return 0;
  }
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  std::exit(1);
}

void compare(const uint8_t* got, const uint8_t* want, size_t count, rr_dtype_t dtype,
             const std::string& what) {
  const size_t es = rr::dtypeSize(dtype);
  for (size_t i = 0; i < count; ++i) {
    bool ok;
    if (rr::dtypeIsFloat(dtype)) {
      const double g = asDouble(got + i * es, dtype), w = asDouble(want + i * es, dtype);
      ok = std::fabs(g - w) <= tolerance(dtype) * (std::fabs(w) + 1.0);
      if (!ok)
        die(what + ": element " + std::to_string(i) + " is " + std::to_string(g) + ", expected " +
            std::to_string(w));
    } else {
      ok = std::memcmp(got + i * es, want + i * es, es) == 0;
      if (!ok) die(what + ": element " + std::to_string(i) + " differs");
    }
  }
  ++checks;
}

void check(rr_result_t rc, const std::string& what) {
  if (rc != RR_SUCCESS) die(what + ": " + rr_result_string(rc) + ": " + rr_last_error());
}

// --device: the GPU images of the two host vectors a call uses.
bool onGpu = false;
#ifdef RR_TEST_CUDA
cudaStream_t stream = nullptr;
uint8_t* gpuA = nullptr;
uint8_t* gpuB = nullptr;
size_t gpuBytes = 0;

void cudaCheck(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(rc));
}
#endif

// Runs call(map, stream), where map(p) turns a pointer into a or b into the buffer the
// collective works on: p itself, or with --device its image in GPU memory, which is copied
// in before the call and back after it.
template <class Call>
rr_result_t run(std::vector<uint8_t>& a, std::vector<uint8_t>& b, Call call) {
#ifdef RR_TEST_CUDA
  if (onGpu) {
    if (a.size() > gpuBytes || b.size() > gpuBytes) die("a buffer is larger than its GPU image");
    cudaCheck(cudaMemcpy(gpuA, a.data(), a.size(), cudaMemcpyHostToDevice), "copy to the GPU");
    cudaCheck(cudaMemcpy(gpuB, b.data(), b.size(), cudaMemcpyHostToDevice), "copy to the GPU");
    auto map = [&](uint8_t* p) -> uint8_t* {
      if (p >= a.data() && p <= a.data() + a.size()) return gpuA + (p - a.data());
      if (p >= b.data() && p <= b.data() + b.size()) return gpuB + (p - b.data());
      die("a pointer outside the mirrored buffers");
    };
    const rr_result_t rc = call(map, static_cast<void*>(stream));
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    cudaCheck(cudaMemcpy(a.data(), gpuA, a.size(), cudaMemcpyDeviceToHost), "copy from the GPU");
    cudaCheck(cudaMemcpy(b.data(), gpuB, b.size(), cudaMemcpyDeviceToHost), "copy from the GPU");
    return rc;
  }
#endif
  (void)a;
  (void)b;
  return call([](uint8_t* p) { return p; }, nullptr);
}

// --device: picks this rank's GPU and allocates the images, or exits 77 saying why not.
void openGpu(size_t bytes) {
#ifdef RR_TEST_CUDA
  int count = 0;
  if (cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess || count == 0) {
    std::printf("rank %d: SKIPPED: no CUDA device: %s\n", rank,
                rc != cudaSuccess ? cudaGetErrorString(rc) : "the driver reports none");
    std::exit(77);
  }
  const char* local = std::getenv("RR_LOCAL_RANK");
  const int device = (local != nullptr ? std::atoi(local) : rank) % count;
  cudaCheck(cudaSetDevice(device), "cudaSetDevice");
  cudaCheck(cudaStreamCreate(&stream), "cudaStreamCreate");
  void* a = nullptr;
  void* b = nullptr;
  cudaCheck(cudaMalloc(&a, bytes), "cudaMalloc");
  cudaCheck(cudaMalloc(&b, bytes), "cudaMalloc");
  gpuA = static_cast<uint8_t*>(a);
  gpuB = static_cast<uint8_t*>(b);
  gpuBytes = bytes;
  onGpu = true;
  cudaDeviceProp prop{};
  cudaCheck(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::printf("rank %d: buffers on GPU %d (%s)\n", rank, device, prop.name);
#else
  (void)bytes;
  std::printf("rank %d: SKIPPED: this build has no CUDA support\n", rank);
  std::exit(77);
#endif
}

// Every rank must hold the same bytes (whatever the algorithm, sums in one order
// everywhere): each rank's FNV-1a hash of its result, gathered, must be rank 0's.
void sameOnEveryRank(rr_comm_t comm, const uint8_t* p, size_t bytes, const std::string& what) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  std::vector<uint64_t> all(static_cast<size_t>(nranks));
  check(rr_allgather(comm, &h, all.data(), 1, RR_UINT64, nullptr), what + ": gathering the hashes");
  for (int r = 1; r < nranks; ++r)
    if (all[static_cast<size_t>(r)] != all[0])
      die(what + ": the result's bytes on rank " + std::to_string(r) + " differ from rank 0's");
  ++checks;
}

// Elements [first, first + count) of the reduction of all ranks' inputs, folded in rank
// order with the scalar reference.
std::vector<uint8_t> reduced(size_t count, rr_dtype_t dtype, rr_op_t op, uint64_t seed, size_t first = 0) {
  const size_t es = rr::dtypeSize(dtype);
  std::vector<uint8_t> acc(count * es + 1), other(count * es + 1);
  fillInput(acc.data(), count, dtype, 0, seed, first);
  for (int r = 1; r < nranks; ++r) {
    fillInput(other.data(), count, dtype, r, seed, first);
    rr::reduceReference(acc.data(), acc.data(), other.data(), count, dtype, op);
  }
  if (op == RR_AVG) rr::finalizeAvg(acc.data(), count, dtype, nranks);
  return acc;
}

}  // namespace

int main(int argc, char** argv) {
  // --quick (or RR_TEST_QUICK=1, which the ASan run sets) takes fewer counts;
  // RR_TEST_QUICK=2 (the TSan run, where every element costs about ten times what it does
  // unsanitized, and the interleavings of threads, not the bytes, are what it checks) also a
  // smaller largest count: 20011 float64 still make 13 segments and more per chunk at n = 3 with
  // RR_SEGMENT_BYTES=4096, more than the 8 staging slots, so every slot is reused.
  const char* quickEnv = std::getenv("RR_TEST_QUICK");
  int quick = quickEnv != nullptr ? std::clamp(std::atoi(quickEnv), 0, 2) : 0;
  bool device = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") quick = std::max(quick, 1);
    device |= std::string(argv[i]) == "--device";
  }
  rr_comm_t comm = nullptr;
  check(rr_comm_init_from_env(&comm), "rr_comm_init_from_env");
  check(rr_comm_rank(comm, &rank), "rank");
  check(rr_comm_size(comm, &nranks), "size");
  const size_t n = static_cast<size_t>(nranks);
  std::vector<size_t> counts = {0, 1, n > 1 ? n - 1 : 2, n + 1, 1009, 300007};
  if (quick > 0) counts = {0, 1, n + 1, quick > 1 ? size_t{20011} : size_t{100003}};
  if (device) {
    counts = {0, 1, 7, (size_t{1} << 20) + 3};
    openGpu(counts.back() * 8 * n + 1);
  }
  uint64_t seed = 1;

  for (int d = 0; d < rr::kNumDtypes; ++d) {
    const auto dtype = static_cast<rr_dtype_t>(d);
    const size_t es = rr::dtypeSize(dtype);
    for (size_t count : counts) {
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        for (int o = 0; o < rr::kNumOps; ++o) {
          const auto op = static_cast<rr_op_t>(o);
          const std::string tag = std::string(rr::dtypeName(dtype)) + " " + rr::opName(op) +
                                  " count " + std::to_string(count) + (inPlace ? " in place" : "");
          // all-reduce
          ++seed;
          std::vector<uint8_t> send(count * es * n + 1), recv(count * es * n + 1);
          fillInput(send.data(), count, dtype, rank, seed);
          uint8_t* out = inPlace ? send.data() : recv.data();
          check(run(send, recv, [&](auto map, void* st) {
                  return rr_allreduce(comm, map(send.data()), map(out), count, dtype, op, st);
                }), "allreduce " + tag);
          compare(out, reduced(count, dtype, op, seed).data(), count, dtype, "allreduce " + tag);
          sameOnEveryRank(comm, out, count * es, "allreduce " + tag);
          // reduce_scatter: rank r receives block r
          ++seed;
          fillInput(send.data(), count * n, dtype, rank, seed);
          out = inPlace ? send.data() + static_cast<size_t>(rank) * count * es : recv.data();
          check(run(send, recv, [&](auto map, void* st) {
                  return rr_reduce_scatter(comm, map(send.data()), map(out), count, dtype, op, st);
                }), "reduce_scatter " + tag);
          compare(out, reduced(count, dtype, op, seed, static_cast<size_t>(rank) * count).data(), count,
                  dtype, "reduce_scatter " + tag);
        }
        const std::string tag = std::string(rr::dtypeName(dtype)) + " count " +
                                std::to_string(count) + (inPlace ? " in place" : "");
        // allgather: recv = blocks in rank order
        ++seed;
        std::vector<uint8_t> recv(count * es * n + 1), send(count * es + 1), want(count * es * n + 1);
        uint8_t* mine = inPlace ? recv.data() + static_cast<size_t>(rank) * count * es : send.data();
        fillInput(mine, count, dtype, rank, seed);
        check(run(send, recv, [&](auto map, void* st) {
                return rr_allgather(comm, map(mine), map(recv.data()), count, dtype, st);
              }), "allgather " + tag);
        for (int r = 0; r < nranks; ++r)
          fillInput(want.data() + static_cast<size_t>(r) * count * es, count, dtype, r, seed);
        compare(recv.data(), want.data(), count * n, dtype, "allgather " + tag);
        // broadcast from a root that moves around the ring
        ++seed;
        const int root = static_cast<int>(seed % n);
        fillInput(recv.data(), count, dtype, rank, seed);
        fillInput(want.data(), count, dtype, root, seed);
        check(run(recv, want, [&](auto map, void* st) {
                return rr_broadcast(comm, map(recv.data()), count, dtype, root, st);
              }), "broadcast " + tag);
        compare(recv.data(), want.data(), count, dtype, "broadcast " + tag + " root " + std::to_string(root));
      }
    }
  }
  check(rr_barrier(comm), "barrier");
  check(rr_comm_destroy(comm), "destroy");
  std::printf("rank %d of %d: %ld checks passed%s\n", rank, nranks, checks,
              onGpu ? " (GPU buffers)" : "");
  return 0;
}
