// Launchers of the device reduction kernels (reduce_kernels.cu). No CUDA types here: a
// stream is a cudaStream_t passed as void*, and each launcher returns the cudaError_t of the
// launch as an int (0: launched).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/reduce.h"
#include "ringreduce/ringreduce.h"

namespace rr::cuda {

// A kernel of a failed collective does nothing: it returns at once when flag != NULL and
// (int32_t)(*flag - program) >= 0 (the device's kCancel flag, kernels/device.h).
struct Cancel {
  const volatile uint32_t* flag = nullptr;
  uint32_t program = 0;
};

// dst[i] = mine[i] op in[i] for i < count (RR_AVG: as `avg` says, see kernels/reduce.h),
// and out[i] = dst[i] in the same pass when out is not NULL. dst may be mine (in place); in and out are typically mapped pinned host memory.
// 16-byte vector loads when all four pointers are 16-byte aligned, else element by element.
int launchReduceCopyOut(void* dst, const void* mine, const void* in, void* out, size_t count,
                        rr_dtype_t dtype, rr_op_t op, AvgStep avg, Cancel cancel, int maxBlocks,
                        void* stream);

// dst[0..bytes) = src[0..bytes), in the widest of 16/8/4/2/1-byte words that both pointers
// and the length allow. Either side may be device or mapped pinned host memory.
int launchCopy(void* dst, const void* src, size_t bytes, Cancel cancel, int maxBlocks, void* stream);

// A one-thread kernel on `stream` that returns once (int32_t)(*flag - value) >= 0; `flag` is
// mapped pinned host memory. The fallback of a stream memory wait (cuStreamWaitValue32).
int launchWaitFlag(const void* flag, uint32_t value, void* stream);
// A one-thread kernel that writes `value` to `flag` once the work before it on `stream` has
// completed: the fallback of a stream memory write (cuStreamWriteValue32).
int launchSignalFlag(void* flag, uint32_t value, void* stream);

// One step of a program (program_kernel.cu): a collective's whole device work run by one
// kernel in place of a stream entry per wait, reduction, copy and signal (RR_GPU_PROGRAM=1).
// 64 bytes, read by the kernel from mapped pinned memory.
struct alignas(16) ProgramStep {
  enum Kind : uint32_t { kWait, kSignal, kReduce, kCopy };
  uint32_t kind = kWait;
  uint32_t value = 0;               // kWait: until (int32_t)(*flag - value) >= 0; kSignal: written
  uint32_t* flag = nullptr;         // kWait, kSignal: a flag in mapped pinned memory
  void* dst = nullptr;              // kReduce: dst = a op b (and out = dst); kCopy: dst = a
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  uint64_t count = 0;               // kReduce: elements; kCopy: bytes
  int32_t avgRanks = 0;             // kReduce: AvgStep
  uint8_t avgFirst = 0, avgLast = 0;
  uint8_t word = 1;                 // kReduce: 16 when every pointer is 16-byte aligned, else 0;
                                    // kCopy: the widest word (16/8/4/2/1) the pointers and length allow
  uint8_t pad = 0;
};
static_assert(sizeof(ProgramStep) == 64, "a program step is one 64-byte line");

// The widest word of 16, 8, 4, 2, 1 bytes that divides every one of `values`.
uint8_t widestWord(std::initializer_list<uintptr_t> values);

// Launches the program steps[0..n) of a collective of `dtype` and `op` on `stream` as one
// cooperative kernel of `blocks` blocks. `barrier` (4 bytes of device memory) is zeroed on
// the stream first: the blocks meet there after each reduction and copy. Every wait also
// watches `cancel`: once (int32_t)(*cancel - program) >= 0 the kernel returns.
int launchProgram(const ProgramStep* steps, uint32_t n, rr_dtype_t dtype, rr_op_t op, Cancel cancel,
                  uint32_t* barrier, int blocks, void* stream);
// The program kernels (each dtype and op), for kernelSymbols.
std::vector<const void*> programKernelSymbols();

// Every kernel above (each dtype and op of the reduction and of the program, each word of the
// copy, the wait and the signal),
// as the host symbols that cudaFuncGetAttributes and cudaGetFuncBySymbol take: the device
// loads them all when it opens (cuda_device.cc, preloadKernels).
std::vector<const void*> kernelSymbols();

}  // namespace rr::cuda
