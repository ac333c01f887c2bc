// Device on the CUDA runtime: the engine's own non-blocking stream, a ring of events that
// turn queued work into pollable tickets, mapped pinned staging, and the two halves of
// stream ordering (device.h): an event recorded on the caller's stream that the engine's
// stream waits for, and a wait ON THE GPU that holds the caller's stream until the host
// releases it (StreamWaiter below). Every failed call throws DeviceError with CUDA's message.
#include <cuda.h>  // driver API types only: no symbol of libcuda is linked
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

// How the caller's stream waits for a request: cuStreamWaitValue32 on the release counter
// (a stream memory operation of the driver API, reached through the runtime's entry-point
// query so that libcuda is never linked), or, where the device has no stream memory
// operations, a one-thread kernel on the caller's stream that polls the counter.
class StreamWaiter {
 public:
  using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

  // Probes the memory wait on `stream` (the engine's own, idle) with an already true condition.
  void init(cudaStream_t stream, const void* counter) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t rc = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000,
                                                           cudaEnableDefault, &found);
    if (rc != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
      cudaGetLastError();
      how_ = "a polling kernel on the caller's stream (the driver has no cuStreamWaitValue32)";
      return;
    }
    auto wait = reinterpret_cast<WaitValue32>(fn);
    const CUresult probe = wait(stream, reinterpret_cast<CUdeviceptr>(counter), 0, CU_STREAM_WAIT_VALUE_GEQ);
    if (probe != CUDA_SUCCESS) {
      how_ = fmt::format("a polling kernel on the caller's stream (cuStreamWaitValue32 returned "
                         "CUresult {}: no stream memory operations on this device)",
                         static_cast<int>(probe));
      return;
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (stream memory wait probe)");
    wait_ = wait;
    how_ = "cuStreamWaitValue32 on a counter in mapped pinned memory (stream memory operations)";
  }

  void hold(cudaStream_t stream, const void* counter, uint32_t value) const {
    if (wait_ != nullptr) {
      const CUresult rc = wait_(stream, reinterpret_cast<CUdeviceptr>(counter), value, CU_STREAM_WAIT_VALUE_GEQ);
      if (rc != CUDA_SUCCESS)
        throw DeviceError(fmt::format("cuStreamWaitValue32 on the caller's stream: CUresult {}", static_cast<int>(rc)));
      return;
    }
    check(static_cast<cudaError_t>(cuda::launchWaitFlag(counter, value, stream)),
          "the stream-wait kernel launch on the caller's stream");
  }

  const std::string& how() const { return how_; }

 private:
  WaitValue32 wait_ = nullptr;
  std::string how_;
};

// Loads every kernel of the library now, while no stream of this communicator is held.
// Lazy loading (CUDA's default since 12.2) loads a kernel at its first launch, and that load
// may synchronise the device: it waits for the work already queued on every stream of the
// process. A caller's stream held on the release counter (StreamWaiter) does not get past
// its wait until the engine's kernels have run, so the first launch of each of them
// deadlocked on an H200 (bench/RESULTS.md, "GPU kernels and device buffers"). cudaFuncGetAttributes loads a kernel; where the driver has
// cuFuncIsLoaded and cuFuncLoad (12.4), each kernel is checked and loaded explicitly if it
// is not. Returns what was done, for `ringreduce info` and the log.
std::string preloadKernels() {
  using IsLoaded = CUresult (*)(CUfunctionLoadingState*, CUfunction);
  using Load = CUresult (*)(CUfunction);
  auto entry = [](const char* name) -> void* {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12040, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return fn;
  };
  const auto isLoaded = reinterpret_cast<IsLoaded>(entry("cuFuncIsLoaded"));
  const auto load = reinterpret_cast<Load>(entry("cuFuncLoad"));
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
  if (confirmed < kernels.size())
    throw DeviceError(fmt::format(
        "{} of the library's {} kernels are still not loaded after cudaFuncGetAttributes and "
        "cuFuncLoad; the first launch of one would load it lazily, and that load waits for "
        "every stream, a held caller's stream included (set CUDA_MODULE_LOADING=EAGER)",
        kernels.size() - confirmed, kernels.size()));
  return fmt::format("its {} kernels loaded when it opened ({} of {} confirmed by cuFuncIsLoaded)",
                     kernels.size(), confirmed, kernels.size());
}

// The program's own kernels load lazily too (the library cannot load them): the first launch
// of one while a collective holds its stream is a barrier across the device, behind which the
// library's next kernel waits, so that collective stalls until RR_TIMEOUT_MS ends it (seen on
// an H200 in test/gpu_stream_check; it passes with CUDA_MODULE_LOADING=EAGER). Says so where
// the driver reports lazy loading on.
std::string lazyLoadingHazard() {
  using GetMode = CUresult (*)(CUmoduleLoadingMode*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuModuleGetLoadingMode", &fn, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return {};
  }
  CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
  if (reinterpret_cast<GetMode>(fn)(&mode) != CUDA_SUCCESS || mode != CU_MODULE_LAZY_LOADING) return {};
  return "CUDA loads kernels lazily here (CUDA_MODULE_LOADING is not EAGER): a kernel of this "
         "program launched for the first time while a collective holds its stream stops the "
         "GPU until that collective ends, which needs the GPU, so the collective fails with "
         "RR_ERR_TIMEOUT; set CUDA_MODULE_LOADING=EAGER, or run each kernel once before the "
         "first collective";
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    const ScopedDevice scope(ordinal_);
    try {
      // Non-blocking: the engine's stream is ordered with no caller's stream (the legacy
      // default stream included) except through the events it waits for.
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      for (auto& e : events_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      int sms = 0;
      check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal_), "cudaDeviceGetAttribute");
      maxBlocks_ = std::max(sms, 1) * 8;
      cudaDeviceProp prop{};
      check(cudaGetDeviceProperties(&prop, ordinal_), "cudaGetDeviceProperties");
      name_ = fmt::format("GPU {} ({}, sm_{}{})", ordinal_, prop.name, prop.major, prop.minor);
      void* counter = nullptr;
      check(cudaHostAlloc(&counter, 64, cudaHostAllocMapped | cudaHostAllocPortable),
            "cudaHostAlloc (release counter)");
      counter_ = new (counter) std::atomic<uint32_t>(0);
      void* onDevice = nullptr;
      check(cudaHostGetDevicePointer(&onDevice, counter, 0), "cudaHostGetDevicePointer");
      if (onDevice != counter)
        throw DeviceError("pinned memory is mapped at a different device address: this platform "
                          "lacks unified virtual addressing");
      waiter_.init(stream_, counter_);
      loaded_ = preloadKernels();
      hazard_ = lazyLoadingHazard();
    } catch (...) {
      destroy();
      throw;
    }
  }

  ~CudaDevice() override {
    // No ScopedDevice here: a destructor must not throw. Let every held stream go, wait
    // (bounded) for the engine's stream, then free.
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    if (previous != ordinal_) cudaSetDevice(ordinal_);
    release(held_.load());
    for (int i = 0; i < 3000 && cudaStreamQuery(stream_) == cudaErrorNotReady; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    destroy();
    if (previous >= 0 && previous != ordinal_) cudaSetDevice(previous);
  }

  std::string describe() const override { return name_; }
  int ordinal() const override { return ordinal_; }
  void makeCurrent() override { check(cudaSetDevice(ordinal_), "cudaSetDevice"); }

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

  uint64_t reduceCopyOut(void* dst, const void* mine, const void* in, void* out, size_t count,
                         rr_dtype_t dtype, rr_op_t op, AvgStep avg) override {
    check(static_cast<cudaError_t>(cuda::launchReduceCopyOut(dst, mine, in, out, count, dtype, op,
                                                             avg, maxBlocks_, stream_)),
          "reduce-and-copy-out kernel launch");
    return record();
  }

  uint64_t copy(void* dst, const void* src, size_t bytes) override {
    check(static_cast<cudaError_t>(cuda::launchCopy(dst, src, bytes, maxBlocks_, stream_)),
          "copy kernel launch");
    return record();
  }

  bool finished(uint64_t ticket) override {
    if (ticket <= completed_) return true;
    const cudaError_t rc = cudaEventQuery(events_[ticket % kEvents]);
    if (rc == cudaErrorNotReady) return false;
    check(rc, "cudaEventQuery");
    completed_ = ticket;  // one stream: everything before it has completed too
    return true;
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
    waiter_.hold(static_cast<cudaStream_t>(stream), counter_, static_cast<uint32_t>(n));
    uint64_t h = held_.load();
    while (h < n && !held_.compare_exchange_weak(h, n)) {
    }
  }

  void release(uint64_t n) override {
    // Cyclic max: the counter only moves forward.
    const auto v = static_cast<uint32_t>(n);
    uint32_t cur = counter_ != nullptr ? counter_->load(std::memory_order_relaxed) : v;
    while (counter_ != nullptr && static_cast<int32_t>(v - cur) > 0 &&
           !counter_->compare_exchange_weak(cur, v, std::memory_order_release)) {
    }
  }

  std::string streamWait() const override { return waiter_.how() + "; " + loaded_; }
  std::string hazard() const override { return hazard_; }

 private:
  static constexpr uint64_t kEvents = 256;  // far more than the engine keeps in flight

  void destroy() {
    for (auto& e : events_)
      if (e != nullptr) cudaEventDestroy(std::exchange(e, nullptr));
    if (stream_ != nullptr) cudaStreamDestroy(std::exchange(stream_, nullptr));
    if (counter_ != nullptr) cudaFreeHost(std::exchange(counter_, nullptr));
  }

  uint64_t record() {
    const uint64_t t = ++issued_;
    if (t > kEvents && !finished(t - kEvents)) {  // the slot is still in use: wait for it
      check(cudaEventSynchronize(events_[t % kEvents]), "cudaEventSynchronize");
      completed_ = t - kEvents;
    }
    check(cudaEventRecord(events_[t % kEvents], stream_), "cudaEventRecord");
    return t;
  }

  int ordinal_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t events_[kEvents] = {};
  uint64_t issued_ = 0;
  uint64_t completed_ = 0;
  int maxBlocks_ = 1;
  std::atomic<uint32_t>* counter_ = nullptr;  // in mapped pinned memory; the GPU reads it
  std::atomic<uint64_t> held_{0};             // the largest n a stream was held for
  StreamWaiter waiter_;
  std::string loaded_;  // what preloadKernels did
  std::string hazard_;  // lazyLoadingHazard()
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

std::unique_ptr<Device> openCudaDevice(int ordinal) { return std::make_unique<CudaDevice>(ordinal); }

}  // namespace rr
