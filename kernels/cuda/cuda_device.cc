// Device on the CUDA runtime: the engine's own non-blocking stream, a ring of events that
// turn queued work into pollable tickets, mapped pinned staging, and the stream ordering
// helpers of device.h. Every failed call throws DeviceError with CUDA's message.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <utility>

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

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    const ScopedDevice scope(ordinal_);
    try {
      // Non-blocking: a caller's stream held by holdStream (the legacy default stream
      // included) must never hold up the engine's own work.
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      for (auto& e : events_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      int sms = 0;
      check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal_), "cudaDeviceGetAttribute");
      maxBlocks_ = std::max(sms, 1) * 8;
      cudaDeviceProp prop{};
      check(cudaGetDeviceProperties(&prop, ordinal_), "cudaGetDeviceProperties");
      name_ = fmt::format("GPU {} ({}, sm_{}{})", ordinal_, prop.name, prop.major, prop.minor);
    } catch (...) {
      release();
      throw;
    }
  }

  ~CudaDevice() override {
    // No ScopedDevice here: a destructor must not throw.
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    if (previous != ordinal_) cudaSetDevice(ordinal_);
    cudaStreamSynchronize(stream_);
    release();
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
                         rr_dtype_t dtype, rr_op_t op, int avgRanks) override {
    check(static_cast<cudaError_t>(cuda::launchReduceCopyOut(dst, mine, in, out, count, dtype, op,
                                                             avgRanks, maxBlocks_, stream_)),
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

  void waitEvent(void* event) override {
    auto e = static_cast<cudaEvent_t>(event);
    const cudaError_t rc = cudaStreamWaitEvent(stream_, e, 0);
    cudaEventDestroy(e);
    check(rc, "cudaStreamWaitEvent");
  }

 private:
  static constexpr uint64_t kEvents = 256;  // far more than the engine keeps in flight

  void release() {
    for (auto& e : events_)
      if (e != nullptr) cudaEventDestroy(std::exchange(e, nullptr));
    if (stream_ != nullptr) cudaStreamDestroy(std::exchange(stream_, nullptr));
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

std::unique_ptr<Device> openCudaDevice(int ordinal) { return std::make_unique<CudaDevice>(ordinal); }

void* captureStream(void* stream, int device) {
  const ScopedDevice scope(device);
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  const cudaError_t rc = cudaEventRecord(e, static_cast<cudaStream_t>(stream));
  if (rc != cudaSuccess) cudaEventDestroy(e);
  check(rc, "cudaEventRecord on the caller's stream");
  return e;
}

void holdStream(void* stream, int device, void (*wait)(void*), void* arg) {
  const ScopedDevice scope(device);
  check(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), wait, arg),
        "cudaLaunchHostFunc on the caller's stream");
}

bool eventDone(void* event) {
  const cudaError_t rc = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (rc == cudaErrorNotReady) return false;
  check(rc, "cudaEventQuery on the caller's stream");
  return true;
}

void releaseEvent(void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

}  // namespace rr
