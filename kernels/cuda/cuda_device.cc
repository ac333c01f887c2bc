// Device on the CUDA runtime: the engine's own non-blocking stream, mapped pinned staging and
// flags that gate and signal its work (stream memory operations, MemOps below), and the two
// halves of stream ordering (device.h): an event recorded on the caller's stream that the
// engine's stream waits for, and a wait ON THE GPU that holds the caller's stream until the
// host releases it. Every failed call throws DeviceError with CUDA's message.
#include <cuda.h>  // driver API types only: no symbol of libcuda is linked
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cuda/launch.h"
#include "kernels/device.h"

namespace rr {
namespace {

void check(cudaError_t rc, const char* call) {
  if (rc == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so that later calls are not blamed for it
  throw DeviceError(fmt::format("{}: {} ({})", call, cudaGetErrorString(rc), cudaGetErrorName(rc)));
}

int deviceCount() {
  static const int count = [] {
    int n = 0;  // left untouched when the call fails
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

// Makes `device` current on the calling thread for a scope and then restores the caller's
// device (the submitting thread is the user's; its current device is not ours to change).
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    if (device < 0) return;
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) {
      check(cudaSetDevice(device), "cudaSetDevice");
      restore_ = true;
    }
  }
  ~ScopedDevice() {
    if (restore_) cudaSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0;
  bool restore_ = false;
};

// A driver API function of at least CUDA `version` (12040: 12.4), through the runtime's
// entry-point query so that libcuda is never linked; nullptr where the driver lacks it.
void* driverEntry(const char* name, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return fn;
}

// Stream memory operations (driver API, reached through the runtime's entry-point query so
// that libcuda is never linked): cuStreamWaitValue32 holds a stream until a flag in mapped
// pinned memory reaches a value, cuStreamWriteValue32 writes one once the work before it has
// completed (with a memory fence first). Where the device has none, one-thread kernels do
// the same by polling and writing (reduce_kernels.cu).
class MemOps {
 public:
  using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  using WriteValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

  // Probes both on `stream` (the engine's own, idle): a wait whose condition already holds,
  // and a write of the value `scratch` already has.
  // flagKernels (RR_GPU_FLAG_OPS=kernels) takes the kernels where the device has the
  // operations too, to measure one against the other.
  void init(cudaStream_t stream, const void* counter, void* scratch, bool flagKernels) {
    if (flagKernels) {
      how_ = "one-thread kernels that poll and write flags (RR_GPU_FLAG_OPS=kernels)";
      return;
    }
    auto wait = reinterpret_cast<WaitValue32>(driverEntry("cuStreamWaitValue32", 12000));
    auto write = reinterpret_cast<WriteValue32>(driverEntry("cuStreamWriteValue32", 12000));
    if (wait == nullptr || write == nullptr) {
      how_ = "one-thread kernels that poll and write flags (the driver has no stream memory operations)";
      return;
    }
    CUresult probe = wait(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(counter), 0,
                          CU_STREAM_WAIT_VALUE_GEQ);
    if (probe == CUDA_SUCCESS)
      probe = write(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(scratch),
                    *static_cast<volatile uint32_t*>(scratch), CU_STREAM_WRITE_VALUE_DEFAULT);
    if (probe != CUDA_SUCCESS) {
      how_ = fmt::format("one-thread kernels that poll and write flags (a stream memory operation "
                         "returned CUresult {}: none on this device)",
                         static_cast<int>(probe));
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (stream memory operation probe)");
      return;
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (stream memory operation probe)");
    wait_ = wait;
    write_ = write;
    how_ = "cuStreamWaitValue32 and cuStreamWriteValue32 on flags in mapped pinned memory "
           "(stream memory operations)";
  }

  void wait(cudaStream_t stream, const void* flag, uint32_t value, const char* what) const {
    if (wait_ != nullptr) {
      const CUresult rc = wait_(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flag), value,
                                CU_STREAM_WAIT_VALUE_GEQ);
      if (rc != CUDA_SUCCESS) throw DeviceError(fmt::format("cuStreamWaitValue32 on {}: CUresult {}", what, static_cast<int>(rc)));
      return;
    }
    check(static_cast<cudaError_t>(cuda::launchWaitFlag(flag, value, stream)), "the flag-wait kernel launch");
  }

  void write(cudaStream_t stream, void* flag, uint32_t value) const {
    if (write_ != nullptr) {
      const CUresult rc = write_(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flag), value,
                                 CU_STREAM_WRITE_VALUE_DEFAULT);
      if (rc != CUDA_SUCCESS)
        throw DeviceError(fmt::format("cuStreamWriteValue32 on the library's stream: CUresult {}", static_cast<int>(rc)));
      return;
    }
    check(static_cast<cudaError_t>(cuda::launchSignalFlag(flag, value, stream)), "the flag-write kernel launch");
  }

  const std::string& how() const { return how_; }

 private:
  WaitValue32 wait_ = nullptr;
  WriteValue32 write_ = nullptr;
  std::string how_;
};

// Loads every kernel of the library now, while no stream of this communicator is held.
// Lazy loading (CUDA's default since 12.2) loads a kernel at its first launch, and that load
// may synchronise the device: it waits for the work already queued on every stream of the
// process. When the progress thread launched the kernels as segments landed, a caller's
// stream held on the release counter did not get past its wait until those kernels had run,
// so the first launch of each deadlocked on an H200 (docs/gpu.md, the stand-in's rule 8). A
// collective's work is now queued at the call, where such a load only
// waits for work that completes without it; loading at open still keeps the load's stall out
// of the first collectives. cudaFuncGetAttributes loads a kernel; where the driver has
// cuFuncIsLoaded and cuFuncLoad (12.4), each kernel is checked and loaded explicitly if it
// is not. Returns what was done, for `ringreduce info` and the log.
std::string preloadKernels() {
  using IsLoaded = CUresult (*)(CUfunctionLoadingState*, CUfunction);
  using Load = CUresult (*)(CUfunction);
  const auto isLoaded = reinterpret_cast<IsLoaded>(driverEntry("cuFuncIsLoaded", 12040));
  const auto load = reinterpret_cast<Load>(driverEntry("cuFuncLoad", 12040));
  const std::vector<const void*> kernels = cuda::kernelSymbols();
  size_t confirmed = 0;
  for (const void* k : kernels) {
    cudaFuncAttributes attr{};
    check(cudaFuncGetAttributes(&attr, k), "cudaFuncGetAttributes (loading the kernels)");
    if (isLoaded == nullptr) continue;
    cudaFunction_t f = nullptr;
    check(cudaGetFuncBySymbol(&f, k), "cudaGetFuncBySymbol");
    CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
    if (isLoaded(&state, f) == CUDA_SUCCESS && state != CU_FUNCTION_LOADING_STATE_LOADED && load != nullptr &&
        load(f) == CUDA_SUCCESS)
      isLoaded(&state, f);
    confirmed += state == CU_FUNCTION_LOADING_STATE_LOADED ? 1 : 0;
  }
  if (isLoaded == nullptr)
    return fmt::format("its {} kernels loaded when it opened (cudaFuncGetAttributes; this driver "
                       "has no cuFuncIsLoaded to confirm it)", kernels.size());
  if (confirmed < kernels.size())  // each then loads at its first launch, at a call: slower, not stuck
    return fmt::format("{} of its {} kernels loaded when it opened (cuFuncIsLoaded: the others load "
                       "at their first launch)", confirmed, kernels.size());
  return fmt::format("its {} kernels loaded when it opened ({} of {} confirmed by cuFuncIsLoaded)",
                     kernels.size(), confirmed, kernels.size());
}

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, bool flagKernels, bool programs) : ordinal_(ordinal) {
    const ScopedDevice scope(ordinal_);
    try {
      // Non-blocking: the engine's stream is ordered with no caller's stream (the legacy
      // default stream included) except through the events it waits for.
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      int sms = 0;
      check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal_), "cudaDeviceGetAttribute");
      maxBlocks_ = std::max(sms, 1) * 8;
      cudaDeviceProp prop{};
      check(cudaGetDeviceProperties(&prop, ordinal_), "cudaGetDeviceProperties");
      name_ = fmt::format("GPU {} ({}, sm_{}{})", ordinal_, prop.name, prop.major, prop.minor);
      // The release counter and the flags, each on its own 64-byte line.
      void* words = nullptr;
      check(cudaHostAlloc(&words, kLine * (1 + kFlags), cudaHostAllocMapped | cudaHostAllocPortable),
            "cudaHostAlloc (release counter and flags)");
      words_ = static_cast<uint8_t*>(words);
      counter_ = new (words_) std::atomic<uint32_t>(0);
      for (int f = 0; f < kFlags; ++f) new (words_ + kLine * (1 + f)) std::atomic<uint32_t>(0);
      void* onDevice = nullptr;
      check(cudaHostGetDevicePointer(&onDevice, words, 0), "cudaHostGetDevicePointer");
      if (onDevice != words)
        throw DeviceError("pinned memory is mapped at a different device address: this platform "
                          "lacks unified virtual addressing");
      memOps_.init(stream_, counter_, at(kCancel), flagKernels);
      if (programs) openPrograms(sms);
      loaded_ = preloadKernels();
    } catch (...) {
      destroy();
      throw;
    }
  }

  ~CudaDevice() override {
    // No ScopedDevice here: a destructor must not throw. Cancel and ungate whatever work is
    // still queued, let every held stream go, wait (bounded) for the engine's stream, then free.
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    if (previous != ordinal_) cudaSetDevice(ordinal_);
    for (Flag f : {kCancel, kLanded, kSent}) raiseFlag(f, gated_);
    release(held_.load());
    for (int i = 0; i < 3000 && cudaStreamQuery(stream_) == cudaErrorNotReady; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    destroy();
    if (previous >= 0 && previous != ordinal_) cudaSetDevice(previous);
  }

  std::string describe() const override { return name_; }
  int ordinal() const override { return ordinal_; }

  void* allocStaging(size_t bytes) override {
    const ScopedDevice scope(ordinal_);
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc (pinned staging)");
    void* onDevice = nullptr;
    check(cudaHostGetDevicePointer(&onDevice, p, 0), "cudaHostGetDevicePointer");
    if (onDevice != p) {  // the kernels use one address on both sides (unified addressing)
      cudaFreeHost(p);
      throw DeviceError("pinned staging is mapped at a different device address: this platform "
                        "lacks unified virtual addressing");
    }
    return p;
  }
  void freeStaging(void* p) override { cudaFreeHost(p); }

  uint32_t flag(Flag f) const override { return at(f)->load(std::memory_order_acquire); }
  void raiseFlag(Flag f, uint32_t value) override { raise(*at(f), value); }

  void waitFlag(Flag f, uint32_t value) override {
    if (recording_.on) {
      noteQueued(value);
      recordFlag(cuda::ProgramStep::kWait, f, value);
      return;
    }
    const ScopedDevice scope(ordinal_);
    memOps_.wait(stream_, at(f), value, "the library's stream");
    noteQueued(value);
  }
  void signalFlag(Flag f, uint32_t value) override {
    if (recording_.on) {
      recordFlag(cuda::ProgramStep::kSignal, f, value);
      return;
    }
    const ScopedDevice scope(ordinal_);
    memOps_.write(stream_, at(f), value);
  }

  void reduceCopyOut(void* dst, const void* mine, const void* in, void* out, size_t count,
                     rr_dtype_t dtype, rr_op_t op, AvgStep avg, uint32_t program) override {
    if (recording_.on) {
      if (dtype != programDtype_ || (op != programOp_ && !(op == RR_SUM && programOp_ == RR_AVG)))
        throw DeviceError("a program's reduction has another dtype or op than its collective");
      noteQueued(program);
      if (count == 0) return;
      const auto p = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
      const bool vector = cuda::widestWord({p(dst), p(mine), p(in), out != nullptr ? p(out) : 0}) == 16;
      recording_.steps.push_back(cuda::ProgramStep{.kind = cuda::ProgramStep::kReduce, .dst = dst, .a = mine, .b = in,
                                         .out = out, .count = count, .avgRanks = avg.ranks,
                                         .avgFirst = avg.first, .avgLast = avg.last,
                                         .word = static_cast<uint8_t>(vector ? 16 : 0)});
      return;
    }
    const ScopedDevice scope(ordinal_);
    check(static_cast<cudaError_t>(cuda::launchReduceCopyOut(dst, mine, in, out, count, dtype, op, avg,
                                                             cancel(program), maxBlocks_, stream_)),
          "reduce-and-copy-out kernel launch");
  }

  void copy(void* dst, const void* src, size_t bytes, uint32_t program) override {
    if (recording_.on) {
      noteQueued(program);
      if (bytes == 0) return;
      const uint8_t word = cuda::widestWord({reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), bytes});
      recording_.steps.push_back(cuda::ProgramStep{.kind = cuda::ProgramStep::kCopy, .dst = dst, .a = src, .count = bytes,
                                         .word = word});
      return;
    }
    const ScopedDevice scope(ordinal_);
    check(static_cast<cudaError_t>(cuda::launchCopy(dst, src, bytes, cancel(program), maxBlocks_, stream_)),
          "copy kernel launch");
  }

  void beginProgram(rr_dtype_t dtype, rr_op_t op, uint32_t program) override {
    if (arena_ == nullptr) return;  // not opened for programs
    recording_.begin(program);
    programDtype_ = dtype;
    programOp_ = op;
  }
  void discardProgram() override { recording_.discard(); }
  void endProgram() override {
    if (!recording_.end()) return;
    const std::vector<cuda::ProgramStep>& steps = recording_.steps;
    const ScopedDevice scope(ordinal_);
    cuda::ProgramStep* at = place(steps.size());
    std::copy(steps.begin(), steps.end(), at);
    std::atomic_thread_fence(std::memory_order_release);  // the steps before the launch that reads them
    check(static_cast<cudaError_t>(cuda::launchProgram(at, static_cast<uint32_t>(steps.size()), programDtype_,
                                                       programOp_, cancel(recording_.program), barrier_,
                                                       programBlocks_, stream_)),
          "program kernel launch");
    cudaEvent_t done = nullptr;
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags (program)");
    const cudaError_t rc = cudaEventRecord(done, stream_);
    if (rc != cudaSuccess) cudaEventDestroy(done);
    check(rc, "cudaEventRecord (program)");
    const size_t begin = static_cast<size_t>(at - arena_);
    programs_.push_back(Placed{begin, begin + steps.size(), done});
  }

  void* captureStream(void* stream) override {
    const ScopedDevice scope(ordinal_);
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    const cudaError_t rc = cudaEventRecord(e, static_cast<cudaStream_t>(stream));
    if (rc != cudaSuccess) cudaEventDestroy(e);
    check(rc, "cudaEventRecord on the caller's stream");
    return e;
  }

  void waitEvent(void* event) override {
    const ScopedDevice scope(ordinal_);
    auto e = static_cast<cudaEvent_t>(event);
    const cudaError_t rc = cudaStreamWaitEvent(stream_, e, 0);
    cudaEventDestroy(e);
    check(rc, "cudaStreamWaitEvent");
  }

  bool eventDone(void* event) override {
    const cudaError_t rc = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (rc == cudaErrorNotReady) return false;
    check(rc, "cudaEventQuery on the caller's stream");
    return true;
  }

  void releaseEvent(void* event) override { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

  void holdStream(void* stream, uint64_t n) override {
    const ScopedDevice scope(ordinal_);
    memOps_.wait(static_cast<cudaStream_t>(stream), counter_, static_cast<uint32_t>(n), "the caller's stream");
    uint64_t h = held_.load();
    while (h < n && !held_.compare_exchange_weak(h, n)) {
    }
  }

  void release(uint64_t n) override {
    if (counter_ != nullptr) raise(*counter_, static_cast<uint32_t>(n));
  }

  std::string streamWait() const override { return memOps_.how() + "; " + loaded_; }

 private:
  static constexpr size_t kLine = 64;

  // Cyclic max: a flag only moves forward.
  static void raise(std::atomic<uint32_t>& word, uint32_t v) {
    uint32_t cur = word.load(std::memory_order_relaxed);
    while (static_cast<int32_t>(v - cur) > 0 && !word.compare_exchange_weak(cur, v, std::memory_order_release)) {
    }
  }
  std::atomic<uint32_t>* at(Flag f) const {
    return reinterpret_cast<std::atomic<uint32_t>*>(words_ + kLine * (1 + static_cast<size_t>(f)));
  }
  void recordFlag(cuda::ProgramStep::Kind kind, Flag f, uint32_t value) {
    recording_.steps.push_back(cuda::ProgramStep{.kind = kind, .value = value, .flag = reinterpret_cast<uint32_t*>(at(f))});
  }
  void noteQueued(uint32_t value) {
    if (static_cast<int32_t>(value - gated_) > 0) gated_ = value;
  }
  cuda::Cancel cancel(uint32_t program) {
    noteQueued(program);
    return cuda::Cancel{reinterpret_cast<const volatile uint32_t*>(at(kCancel)), program};
  }

  // Programs: the steps' arena (mapped pinned; a program's steps stay until its kernel has
  // finished, which an event after it says), the blocks' barrier counter, and the grid.
  static constexpr size_t kArenaSteps = 16384;  // 1 MiB
  struct Placed {
    size_t begin, end;  // arena_[begin, end)
    cudaEvent_t done;
  };
  void openPrograms(int sms) {
    int cooperative = 0;
    check(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, ordinal_), "cudaDeviceGetAttribute");
    if (cooperative == 0)
      throw DeviceError("RR_GPU_PROGRAM=1: this device has no cooperative launch");
    void* arena = nullptr;
    check(cudaHostAlloc(&arena, kArenaSteps * sizeof(cuda::ProgramStep), cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc (program steps)");
    arena_ = static_cast<cuda::ProgramStep*>(arena);
    void* barrier = nullptr;
    check(cudaMalloc(&barrier, sizeof(uint32_t)), "cudaMalloc (program barrier)");
    barrier_ = static_cast<uint32_t*>(barrier);
    programBlocks_ = std::clamp(sms, 1, 32);
  }
  // Room for n steps, contiguous: after the last program's, or from the start; waits
  // (bounded) for the programs whose steps are still there to finish.
  cuda::ProgramStep* place(size_t n) {
    if (n > kArenaSteps)
      throw DeviceError(fmt::format("a collective of {} device steps exceeds the program arena ({} steps)", n,
                                    kArenaSteps));
    size_t begin = programs_.empty() ? 0 : programs_.back().end;
    if (begin + n > kArenaSteps) begin = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      while (!programs_.empty()) {  // drop the finished, oldest first
        const cudaError_t rc = cudaEventQuery(programs_.front().done);
        if (rc == cudaErrorNotReady) break;
        cudaEventDestroy(programs_.front().done);
        programs_.pop_front();
        check(rc, "cudaEventQuery (program)");
      }
      const bool taken = std::any_of(programs_.begin(), programs_.end(),
                                     [&](const Placed& p) { return p.begin < begin + n && begin < p.end; });
      if (!taken) break;
      if (std::chrono::steady_clock::now() >= until)
        throw DeviceError(fmt::format("the program arena has had no room for {} steps for 60 s: the "
                                      "collectives queued before this one have not finished",
                                      n));
      std::this_thread::yield();
    }
    return arena_ + begin;
  }

  void destroy() {
    for (const Placed& p : programs_) cudaEventDestroy(p.done);
    programs_.clear();
    if (arena_ != nullptr) cudaFreeHost(std::exchange(arena_, nullptr));
    if (barrier_ != nullptr) cudaFree(std::exchange(barrier_, nullptr));
    if (stream_ != nullptr) cudaStreamDestroy(std::exchange(stream_, nullptr));
    if (words_ != nullptr) cudaFreeHost(std::exchange(words_, nullptr));
    counter_ = nullptr;
  }

  int ordinal_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  int maxBlocks_ = 1;
  uint8_t* words_ = nullptr;                  // mapped pinned: the counter, then the flags
  std::atomic<uint32_t>* counter_ = nullptr;  // the release counter; the GPU reads it
  std::atomic<uint64_t> held_{0};             // the largest n a stream was held for
  uint32_t gated_ = 0;  // the largest gate or program value queued (the destructor ungates to it)
  MemOps memOps_;
  std::string loaded_;  // what preloadKernels did
  cuda::ProgramStep* arena_ = nullptr;  // non-null: opened for programs
  uint32_t* barrier_ = nullptr;
  int programBlocks_ = 1;
  std::deque<Placed> programs_;
  ProgramRecording<cuda::ProgramStep> recording_;
  rr_dtype_t programDtype_ = RR_FLOAT32;
  rr_op_t programOp_ = RR_SUM;
};

}  // namespace

bool cudaBuilt() { return true; }

int pointerDevice(const void* p) {
  if (p == nullptr || deviceCount() == 0) return -1;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  // Managed memory is reachable from the host and is reduced there.
  return attr.type == cudaMemoryTypeDevice ? attr.device : -1;
}

int streamDevice(void* stream) {
  int device = 0;
  if (stream == nullptr) {
    check(cudaGetDevice(&device), "cudaGetDevice");
    return device;
  }
  check(cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &device), "cudaStreamGetDevice");
  return device;
}

std::unique_ptr<Device> openCudaDevice(int ordinal, bool flagKernels, bool programs) {
  return std::make_unique<CudaDevice>(ordinal, flagKernels, programs);
}

}  // namespace rr
