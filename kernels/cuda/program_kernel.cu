// The program kernel (RR_GPU_PROGRAM=1): a collective's whole device work in one cooperative
// kernel that reads its steps (launch.h, ProgramStep) from mapped pinned memory and runs them
// in order, in place of a stream entry per wait, reduction, copy and signal.
//
// The rules it keeps, which separate kernels on a stream got from the stream:
// - In order: every block waits for a gate itself (thread 0 polls the flag with a system-scope
//   acquire load); after each reduction or copy the blocks meet at a grid barrier (a counter
//   in device memory, zeroed on the stream before the launch; cooperative launch keeps every
//   block resident, so the barrier cannot wait for a block that never runs).
// - Visible before signalled: after a block's threads meet (__syncthreads), its thread 0
//   fences at system scope (cumulative over the block's writes) before it arrives at the
//   grid barrier, and block 0 writes a signal with a system-scope release store after it.
// - Nothing stale: a staging slot is written again by the host for a later unit, and the
//   bucket by other blocks, all within this kernel's life, where a kernel boundary no longer
//   invalidates the caches: every load of a step's operands bypasses the L1 and asks memory
//   again (ld.global.cv), and the steps themselves are read that way.
// - Cancel: every wait and barrier also polls the cancel flag; once it reaches the program,
//   every block returns (it never lowers, so every block sees it).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.h"

namespace rr::cuda {
namespace {

constexpr int kThreads = 256;

__device__ uint32_t loadAcquireSys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ uint32_t loadAcquireGpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ void storeReleaseSys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ bool reached(uint32_t flag, uint32_t value) { return static_cast<int32_t>(flag - value) >= 0; }

// A load that asks memory again (no stale L1 or L2 line of mapped memory).
template <class T>
__device__ T loadCv(const T* p) {
  if constexpr (sizeof(T) == 16) {
    const uint4 v = __ldcv(reinterpret_cast<const uint4*>(p));
    T t;
    std::memcpy(&t, &v, sizeof t);
    return t;
  } else if constexpr (sizeof(T) == 8) {
    const unsigned long long v = __ldcv(reinterpret_cast<const unsigned long long*>(p));
    T t;
    std::memcpy(&t, &v, sizeof t);
    return t;
  } else if constexpr (sizeof(T) == 4) {
    const unsigned int v = __ldcv(reinterpret_cast<const unsigned int*>(p));
    T t;
    std::memcpy(&t, &v, sizeof t);
    return t;
  } else if constexpr (sizeof(T) == 2) {
    const unsigned short v = __ldcv(reinterpret_cast<const unsigned short*>(p));
    T t;
    std::memcpy(&t, &v, sizeof t);
    return t;
  } else {
    static_assert(sizeof(T) == 1);
    const unsigned char v = __ldcv(reinterpret_cast<const unsigned char*>(p));
    T t;
    std::memcpy(&t, &v, sizeof t);
    return t;
  }
}

template <class T>
union Pack {
  static constexpr int kElems = 16 / sizeof(T);
  uint4 v;
  T e[kElems];
};

template <class T, rr_op_t Op>
__device__ void reduceStep(const ProgramStep& s) {
  constexpr int V = Pack<T>::kElems;
  const AvgStep avg{s.avgRanks, s.avgFirst != 0, s.avgLast != 0};
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  T* dst = static_cast<T*>(s.dst);
  T* out = static_cast<T*>(s.out);
  const T* mine = static_cast<const T*>(s.a);
  const T* in = static_cast<const T*>(s.b);
  const size_t vectors = s.word == 16 ? s.count / V : 0;
  for (size_t i = tid; i < vectors; i += stride) {
    Pack<T> a, b;
    a.v = loadCv(reinterpret_cast<const uint4*>(mine) + i);
    b.v = loadCv(reinterpret_cast<const uint4*>(in) + i);
#pragma unroll
    for (int j = 0; j < V; ++j) a.e[j] = reduceElement<T>(a.e[j], b.e[j], Op, avg);
    reinterpret_cast<uint4*>(dst)[i] = a.v;
    if (out != nullptr) reinterpret_cast<uint4*>(out)[i] = a.v;
  }
  for (size_t i = vectors * V + tid; i < s.count; i += stride) {
    const T r = reduceElement<T>(loadCv(mine + i), loadCv(in + i), Op, avg);
    dst[i] = r;
    if (out != nullptr) out[i] = r;
  }
}

template <class W>
__device__ void copyWords(void* dst, const void* src, size_t bytes) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t words = bytes / sizeof(W);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
    static_cast<W*>(dst)[i] = loadCv(static_cast<const W*>(src) + i);
}

__device__ void copyStep(const ProgramStep& s) {
  switch (s.word) {
    case 16: return copyWords<uint4>(s.dst, s.a, s.count);
    case 8: return copyWords<uint64_t>(s.dst, s.a, s.count);
    case 4: return copyWords<uint32_t>(s.dst, s.a, s.count);
    case 2: return copyWords<uint16_t>(s.dst, s.a, s.count);
    default: return copyWords<uint8_t>(s.dst, s.a, s.count);
  }
}

// Thread 0 of each block polls until `flag` reaches `value` (or the program is cancelled:
// returns false). The other threads wait at the block's barrier after it.
__device__ bool pollUntil(const uint32_t* flag, uint32_t value, bool gpuScope, const Cancel& c) {
  for (unsigned spins = 0;; ++spins) {
    const uint32_t v = gpuScope ? loadAcquireGpu(flag) : loadAcquireSys(flag);
    if (reached(v, value)) return true;
    if (c.flag != nullptr && reached(loadAcquireSys(const_cast<const uint32_t*>(c.flag)), c.program)) return false;
    if (spins > 64) __nanosleep(200);
  }
}

template <class T, rr_op_t Op>
__global__ void __launch_bounds__(kThreads)
programKernel(const ProgramStep* steps, uint32_t n, const volatile uint32_t* cancel, uint32_t program,
              uint32_t* barrier) {
  __shared__ uint4 stepWords[sizeof(ProgramStep) / 16];
  __shared__ bool stop;
  const ProgramStep& s = *reinterpret_cast<const ProgramStep*>(stepWords);
  const Cancel c{cancel, program};
  uint32_t meetings = 0;
  if (threadIdx.x == 0)
    stop = cancel != nullptr && reached(loadAcquireSys(const_cast<const uint32_t*>(cancel)), program);
  __syncthreads();
  if (stop) return;
  for (uint32_t i = 0; i < n; ++i) {
    if (threadIdx.x < sizeof(ProgramStep) / 16)
      stepWords[threadIdx.x] = loadCv(reinterpret_cast<const uint4*>(steps + i) + threadIdx.x);
    __syncthreads();
    if (s.kind == ProgramStep::kWait) {
      if (threadIdx.x == 0) stop = !pollUntil(s.flag, s.value, false, c);
    } else if (s.kind == ProgramStep::kSignal) {
      // The barrier after the step before it has made every block's writes visible.
      if (blockIdx.x == 0 && threadIdx.x == 0) storeReleaseSys(s.flag, s.value);
    } else {
      if (s.kind == ProgramStep::kReduce)
        reduceStep<T, Op>(s);
      else
        copyStep(s);
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence_system();  // cumulative: the block's writes, ordered before it by the barrier
        ++meetings;
        atomicAdd(barrier, 1u);
        stop = !pollUntil(barrier, meetings * gridDim.x, true, c);
      }
    }
    __syncthreads();  // the step is read again only after every thread is done with it
    if (stop) return;
  }
}

template <class T, rr_op_t Op>
int launchTyped(const ProgramStep* steps, uint32_t n, const Cancel& c, uint32_t* barrier, int blocks,
                cudaStream_t stream) {
  const volatile uint32_t* cancel = c.flag;
  uint32_t program = c.program;
  void* args[] = {&steps, &n, &cancel, &program, &barrier};
  return static_cast<int>(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&programKernel<T, Op>),
                                                      dim3(blocks), dim3(kThreads), args, 0, stream));
}

template <class T>
int launchOp(const ProgramStep* steps, uint32_t n, rr_op_t op, const Cancel& c, uint32_t* barrier, int blocks,
             cudaStream_t stream) {
  switch (op) {
    case RR_SUM:
    case RR_AVG: return launchTyped<T, RR_SUM>(steps, n, c, barrier, blocks, stream);
    case RR_PROD: return launchTyped<T, RR_PROD>(steps, n, c, barrier, blocks, stream);
    case RR_MIN: return launchTyped<T, RR_MIN>(steps, n, c, barrier, blocks, stream);
    case RR_MAX: return launchTyped<T, RR_MAX>(steps, n, c, barrier, blocks, stream);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

template <class T>
void addProgramKernels(std::vector<const void*>& out) {
  out.push_back(reinterpret_cast<const void*>(&programKernel<T, RR_SUM>));
  out.push_back(reinterpret_cast<const void*>(&programKernel<T, RR_PROD>));
  out.push_back(reinterpret_cast<const void*>(&programKernel<T, RR_MIN>));
  out.push_back(reinterpret_cast<const void*>(&programKernel<T, RR_MAX>));
}

}  // namespace

uint8_t widestWord(std::initializer_list<uintptr_t> values) {
  uintptr_t all = 0;
  for (uintptr_t v : values) all |= v;
  for (uint8_t w : {16, 8, 4, 2})
    if (all % w == 0) return w;
  return 1;
}

int launchProgram(const ProgramStep* steps, uint32_t n, rr_dtype_t dtype, rr_op_t op, Cancel c,
                  uint32_t* barrier, int blocks, void* stream) {
  if (n == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  if (cudaError_t rc = cudaMemsetAsync(barrier, 0, sizeof(uint32_t), s); rc != cudaSuccess) return static_cast<int>(rc);
  switch (dtype) {
    case RR_FLOAT32: return launchOp<float>(steps, n, op, c, barrier, blocks, s);
    case RR_FLOAT64: return launchOp<double>(steps, n, op, c, barrier, blocks, s);
    case RR_FLOAT16: return launchOp<Fp16>(steps, n, op, c, barrier, blocks, s);
    case RR_BFLOAT16: return launchOp<Bf16>(steps, n, op, c, barrier, blocks, s);
    case RR_INT8: return launchOp<int8_t>(steps, n, op, c, barrier, blocks, s);
    case RR_UINT8: return launchOp<uint8_t>(steps, n, op, c, barrier, blocks, s);
    case RR_INT32: return launchOp<int32_t>(steps, n, op, c, barrier, blocks, s);
    case RR_UINT32: return launchOp<uint32_t>(steps, n, op, c, barrier, blocks, s);
    case RR_INT64: return launchOp<int64_t>(steps, n, op, c, barrier, blocks, s);
    case RR_UINT64: return launchOp<uint64_t>(steps, n, op, c, barrier, blocks, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

std::vector<const void*> programKernelSymbols() {
  std::vector<const void*> out;
  addProgramKernels<float>(out);
  addProgramKernels<double>(out);
  addProgramKernels<Fp16>(out);
  addProgramKernels<Bf16>(out);
  addProgramKernels<int8_t>(out);
  addProgramKernels<uint8_t>(out);
  addProgramKernels<int32_t>(out);
  addProgramKernels<uint32_t>(out);
  addProgramKernels<int64_t>(out);
  addProgramKernels<uint64_t>(out);
  return out;
}

}  // namespace rr::cuda
