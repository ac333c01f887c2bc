// The device reduction kernels: reduce-and-copy-out for the reduce-scatter half of the ring
// (docs/gpu.md) and a copy for the all-gather half. Arithmetic is device_math.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.h"

namespace rr::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // 16-byte vectors per thread per iteration, loaded before use

template <class T>
union Pack {
  static constexpr int kElems = 16 / sizeof(T);
  uint4 v;
  T e[kElems];
};

// Whether the collective of this kernel failed (kCancel >= program, cyclically; cuda_device.cc):
// then the kernel leaves every buffer as it is. One read of mapped memory per block.
__device__ bool cancelled(const volatile uint32_t* cancel, uint32_t program) {
  __shared__ bool skip;
  if (threadIdx.x == 0) skip = cancel != nullptr && static_cast<int32_t>(*cancel - program) >= 0;
  __syncthreads();
  return skip;
}

template <class T, rr_op_t Op>
__global__ void __launch_bounds__(kThreads)
reduceCopyOutKernel(T* dst, const T* mine, const T* in, T* out, size_t count, AvgStep avg,
                    bool vector, const volatile uint32_t* cancel, uint32_t program) {
  if (cancelled(cancel, program)) return;
  constexpr int V = Pack<T>::kElems;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t vectors = vector ? count / V : 0;
  auto* dst4 = reinterpret_cast<uint4*>(dst);
  auto* out4 = reinterpret_cast<uint4*>(out);
  const auto* mine4 = reinterpret_cast<const uint4*>(mine);
  const auto* in4 = reinterpret_cast<const uint4*>(in);
  for (size_t base = tid; base < vectors; base += stride * kUnroll) {
    Pack<T> a[kUnroll], b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < vectors) {
        a[u].v = mine4[i];
        b[u].v = in4[i];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t i = base + u * stride;
      if (i < vectors) {
#pragma unroll
        for (int j = 0; j < V; ++j) a[u].e[j] = reduceElement<T>(a[u].e[j], b[u].e[j], Op, avg);
        dst4[i] = a[u].v;
        if (out != nullptr) out4[i] = a[u].v;
      }
    }
  }
  for (size_t i = vectors * V + tid; i < count; i += stride) {
    const T r = reduceElement<T>(mine[i], in[i], Op, avg);
    dst[i] = r;
    if (out != nullptr) out[i] = r;
  }
}

template <class W>
__global__ void __launch_bounds__(kThreads)
copyKernel(W* dst, const W* src, size_t words, const volatile uint32_t* cancel, uint32_t program) {
  if (cancelled(cancel, program)) return;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
    dst[i] = src[i];
}

int blocksFor(size_t work, int maxBlocks) {
  const size_t perBlock = static_cast<size_t>(kThreads) * kUnroll;
  const size_t wanted = (work + perBlock - 1) / perBlock;
  return static_cast<int>(std::clamp<size_t>(wanted, 1, static_cast<size_t>(std::max(maxBlocks, 1))));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <class T, rr_op_t Op>
int launchTyped(void* dst, const void* mine, const void* in, void* out, size_t count,
                AvgStep avg, const Cancel& c, int maxBlocks, cudaStream_t stream) {
  const bool vector = aligned16(dst) && aligned16(mine) && aligned16(in) &&
                      (out == nullptr || aligned16(out));
  const size_t work = vector ? count / Pack<T>::kElems + count % Pack<T>::kElems : count;
  reduceCopyOutKernel<T, Op><<<blocksFor(work, maxBlocks), kThreads, 0, stream>>>(
      static_cast<T*>(dst), static_cast<const T*>(mine), static_cast<const T*>(in),
      static_cast<T*>(out), count, avg, vector, c.flag, c.program);
  return static_cast<int>(cudaGetLastError());
}

template <class T>
int launchOp(void* dst, const void* mine, const void* in, void* out, size_t count, rr_op_t op,
             AvgStep avg, const Cancel& c, int maxBlocks, cudaStream_t stream) {
  switch (op) {
    case RR_SUM:
    case RR_AVG: return launchTyped<T, RR_SUM>(dst, mine, in, out, count, op == RR_AVG ? avg : AvgStep{}, c, maxBlocks, stream);
    case RR_PROD: return launchTyped<T, RR_PROD>(dst, mine, in, out, count, AvgStep{}, c, maxBlocks, stream);
    case RR_MIN: return launchTyped<T, RR_MIN>(dst, mine, in, out, count, AvgStep{}, c, maxBlocks, stream);
    case RR_MAX: return launchTyped<T, RR_MAX>(dst, mine, in, out, count, AvgStep{}, c, maxBlocks, stream);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

// The fallback of holdStream (cuda_device.cc) where the device has no stream memory
// operations: one thread that waits until (int32_t)(*flag - value) >= 0, the same cyclic
// comparison as cuStreamWaitValue32's GEQ. The host writes the flag in mapped pinned memory.
__global__ void waitFlagKernel(const volatile uint32_t* flag, uint32_t value) {
  while (static_cast<int32_t>(*flag - value) < 0) __nanosleep(2000);
}

// The fallback of a stream memory write (cuStreamWriteValue32): the kernels before it on the
// stream have completed; their writes are made visible to the host before the flag's.
__global__ void signalFlagKernel(volatile uint32_t* flag, uint32_t value) {
  __threadfence_system();
  *flag = value;
}

}  // namespace

int launchReduceCopyOut(void* dst, const void* mine, const void* in, void* out, size_t count,
                        rr_dtype_t dtype, rr_op_t op, AvgStep avg, Cancel c, int maxBlocks,
                        void* stream) {
  if (count == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case RR_FLOAT32: return launchOp<float>(dst, mine, in, out, count, op, avg, c, maxBlocks, s);
    case RR_FLOAT64: return launchOp<double>(dst, mine, in, out, count, op, avg, c, maxBlocks, s);
    case RR_FLOAT16: return launchOp<Fp16>(dst, mine, in, out, count, op, avg, c, maxBlocks, s);
    case RR_BFLOAT16: return launchOp<Bf16>(dst, mine, in, out, count, op, avg, c, maxBlocks, s);
    case RR_INT8: return launchOp<int8_t>(dst, mine, in, out, count, op, avg, c, maxBlocks, s);
    case RR_UINT8: return launchOp<uint8_t>(dst, mine, in, out, count, op, avg, c, maxBlocks, s);
    case RR_INT32: return launchOp<int32_t>(dst, mine, in, out, count, op, avg, c, maxBlocks, s);
    case RR_UINT32: return launchOp<uint32_t>(dst, mine, in, out, count, op, avg, c, maxBlocks, s);
    case RR_INT64: return launchOp<int64_t>(dst, mine, in, out, count, op, avg, c, maxBlocks, s);
    case RR_UINT64: return launchOp<uint64_t>(dst, mine, in, out, count, op, avg, c, maxBlocks, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

int launchCopy(void* dst, const void* src, size_t bytes, Cancel c, int maxBlocks, void* stream) {
  if (bytes == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  auto launch = [&](auto word) {
    using W = decltype(word);
    const size_t words = bytes / sizeof(W);
    copyKernel<W><<<blocksFor(words / kUnroll + 1, maxBlocks), kThreads, 0, s>>>(
        static_cast<W*>(dst), static_cast<const W*>(src), words, c.flag, c.program);
    return static_cast<int>(cudaGetLastError());
  };
  switch (widestWord({reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), bytes})) {
    case 16: return launch(uint4{});
    case 8: return launch(uint64_t{});
    case 4: return launch(uint32_t{});
    case 2: return launch(uint16_t{});
    default: return launch(uint8_t{});
  }
}

namespace {

template <class T>
void addReduceKernels(std::vector<const void*>& out) {
  out.push_back(reinterpret_cast<const void*>(&reduceCopyOutKernel<T, RR_SUM>));
  out.push_back(reinterpret_cast<const void*>(&reduceCopyOutKernel<T, RR_PROD>));
  out.push_back(reinterpret_cast<const void*>(&reduceCopyOutKernel<T, RR_MIN>));
  out.push_back(reinterpret_cast<const void*>(&reduceCopyOutKernel<T, RR_MAX>));
}

}  // namespace

std::vector<const void*> kernelSymbols() {
  std::vector<const void*> out;
  addReduceKernels<float>(out);
  addReduceKernels<double>(out);
  addReduceKernels<Fp16>(out);
  addReduceKernels<Bf16>(out);
  addReduceKernels<int8_t>(out);
  addReduceKernels<uint8_t>(out);
  addReduceKernels<int32_t>(out);
  addReduceKernels<uint32_t>(out);
  addReduceKernels<int64_t>(out);
  addReduceKernels<uint64_t>(out);
  out.push_back(reinterpret_cast<const void*>(&copyKernel<uint4>));
  out.push_back(reinterpret_cast<const void*>(&copyKernel<uint64_t>));
  out.push_back(reinterpret_cast<const void*>(&copyKernel<uint32_t>));
  out.push_back(reinterpret_cast<const void*>(&copyKernel<uint16_t>));
  out.push_back(reinterpret_cast<const void*>(&copyKernel<uint8_t>));
  out.push_back(reinterpret_cast<const void*>(&waitFlagKernel));
  out.push_back(reinterpret_cast<const void*>(&signalFlagKernel));
  for (const void* k : programKernelSymbols()) out.push_back(k);
  return out;
}

int launchWaitFlag(const void* flag, uint32_t value, void* stream) {
  waitFlagKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const volatile uint32_t*>(flag), value);
  return static_cast<int>(cudaGetLastError());
}

int launchSignalFlag(void* flag, uint32_t value, void* stream) {
  signalFlagKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<volatile uint32_t*>(flag), value);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace rr::cuda
