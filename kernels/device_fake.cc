// Device on the stand-in GPU (kernels/fake_gpu.h), for RR_TEST_FAKE_DEVICE=1: the same
// contract as the CUDA device, with the stand-in's streams in place of CUDA's. Its kernels
// are the scalar reference; its staging is filled with a pattern so that bytes never written
// are not zeros; allocating and freeing staging synchronise the device, as cudaHostAlloc and
// cudaFreeHost do; its kernels are loaded when it opens, as the CUDA device's are.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kernels/device.h"
#include "kernels/dtype.h"
#include "kernels/fake_gpu.h"
#include "kernels/reduce.h"

namespace rr {
namespace {

class FakeDevice final : public Device {
 public:
  FakeDevice(bool holdByHostFunction, int lazyLoadingMs, size_t queueDepth, bool programs)
      : hostFunction_(holdByHostFunction), programs_(programs), stream_(fake::createStream(/*nonBlocking=*/true)) {
    if (queueDepth > 0) fake::setQueueDepthForTests(queueDepth);
    if (lazyLoadingMs > 0) {  // the design that hung on an H200: kernels load at first launch
      fake::setSyncLimitForTests(std::chrono::milliseconds(lazyLoadingMs));
      return;
    }
    // As the CUDA device (preloadKernels in cuda_device.cc): every kernel loaded at open.
    try {
      for (int t = RR_FLOAT32; t <= RR_UINT64; ++t)
        for (rr_op_t op : {RR_SUM, RR_PROD, RR_MIN, RR_MAX})
          fake::loadKernel(reduceKernel(static_cast<rr_dtype_t>(t), op));
      fake::loadKernel("copy");
      if (programs_) fake::loadKernel("program");
    } catch (const std::exception& e) {
      fake::destroyStream(stream_);
      throw DeviceError(e.what());
    }
  }

  ~FakeDevice() override {
    // As the CUDA device: let every held stream go, then free the counter behind an implicit
    // synchronisation (cudaFreeHost), so no stream still reads it. A stand-in hung past its
    // limit (a test that hung it on purpose) leaks its stream and counter instead.
    for (Flag f : {kCancel, kLanded, kSent}) raiseFlag(f, gated_);
    release(held_.load());
    try {
      fake::destroyStream(stream_);
      fake::synchronizeDevice("cudaFreeHost");
      delete counter_;
    } catch (const std::exception&) {
      new std::shared_ptr(flags_);  // leaked with the stream: its waits still read the flags
    }
  }

  std::string describe() const override { return "fake GPU (host memory, for tests)"; }
  int ordinal() const override { return 0; }

  void* allocStaging(size_t bytes) override {
    sync("cudaHostAlloc");
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes) != 0) throw DeviceError("fake device: out of memory");
    std::memset(p, 0xa5, bytes);
    return p;
  }
  void freeStaging(void* p) override {
    try {
      sync("cudaFreeHost");
    } catch (const DeviceError&) {
      // CUDA would wait forever; the memory is leaked instead.
      return;
    }
    std::free(p);
  }

  uint32_t flag(Flag f) const override { return (*flags_)[f].load(std::memory_order_acquire); }
  void raiseFlag(Flag f, uint32_t value) override { raise((*flags_)[f], value); }
  void waitFlag(Flag f, uint32_t value) override {
    noteQueued(value);
    if (recording_.on) {  // the program polls the flag itself; a cancel lets it go
      recording_.steps.push_back([flags = flags_, f, value, program = recording_.program] {
        for (;;) {
          if (static_cast<int32_t>((*flags)[f].load(std::memory_order_acquire) - value) >= 0) return true;
          if (static_cast<int32_t>((*flags)[kCancel].load(std::memory_order_acquire) - program) >= 0) return false;
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
      });
      return;
    }
    guard([&] { fake::streamWaitValue(stream_, &(*flags_)[f], value); });
  }
  void signalFlag(Flag f, uint32_t value) override {
    if (recording_.on) {
      recording_.steps.push_back([flags = flags_, f, value] {
        (*flags)[f].store(value, std::memory_order_release);
        return true;
      });
      return;
    }
    guard([&] { fake::streamWriteValue(stream_, &(*flags_)[f], value); });
  }

  // Programs (RR_GPU_PROGRAM=1): the steps between beginProgram and endProgram run in order
  // as one kernel, one item on the stream (rule 9 counts it once), as the CUDA device's
  // program kernel runs them; a cancel ends it at its next step.
  void beginProgram(rr_dtype_t, rr_op_t, uint32_t program) override {
    if (programs_) recording_.begin(program);
  }
  void discardProgram() override { recording_.discard(); }
  void endProgram() override {
    if (!recording_.end()) return;
    const uint32_t program = recording_.program;
    enqueue("program", program, [flags = flags_, program, steps = std::move(recording_.steps)] {
      for (const auto& step : steps) {
        if (static_cast<int32_t>((*flags)[kCancel].load(std::memory_order_acquire) - program) >= 0) return;
        if (!step()) return;
      }
    });
    recording_.steps.clear();
  }

  void reduceCopyOut(void* dst, const void* mine, const void* in, void* out, size_t count,
                     rr_dtype_t dtype, rr_op_t op, AvgStep avg, uint32_t program) override {
    enqueue(reduceKernel(dtype, op), program, [=] {
      if (op == RR_AVG && avg.ranks > 1 && dtypeIsFloat(dtype)) {  // as the host pass does
        std::vector<uint8_t> received(static_cast<const uint8_t*>(in),
                                      static_cast<const uint8_t*>(in) + count * dtypeSize(dtype));
        if (avg.first) scaleReference(received.data(), received.data(), count, dtype, avg.ranks);
        scaleReference(dst, mine, count, dtype, avg.ranks);
        reduceReference(dst, dst, received.data(), count, dtype, RR_SUM);
      } else {
        reduceReference(dst, mine, in, count, dtype, op);
        if (op == RR_AVG && avg.ranks > 1 && avg.last) finalizeAvg(dst, count, dtype, avg.ranks);
      }
      if (out != nullptr) std::memcpy(out, dst, count * dtypeSize(dtype));
    });
  }

  void copy(void* dst, const void* src, size_t bytes, uint32_t program) override {
    enqueue("copy", program, [=] { std::memmove(dst, src, bytes); });
  }

  void* captureStream(void* stream) override {
    fake::Event* e = fake::createEvent();
    guard([&] { fake::recordEvent(e, static_cast<fake::Stream*>(stream)); }, e);
    return e;
  }
  void waitEvent(void* event) override {
    auto* e = static_cast<fake::Event*>(event);
    guard([&] { fake::streamWaitEvent(stream_, e); }, e);
    fake::destroyEvent(e);
  }
  bool eventDone(void* event) override { return fake::eventQuery(static_cast<fake::Event*>(event)); }
  void releaseEvent(void* event) override { fake::destroyEvent(static_cast<fake::Event*>(event)); }

  void holdStream(void* stream, uint64_t n) override {
    auto* s = static_cast<fake::Stream*>(stream);
    const auto value = static_cast<uint32_t>(n);
    if (hostFunction_) {
      // The design that hung on a real GPU: a host function that returns once the request
      // is released. While it waits, the stand-in (like Hopper) starts no work on any stream.
      guard([&] {
        fake::launchHostFunc(s, [counter = counter_, value] {
          while (static_cast<int32_t>(counter->load(std::memory_order_acquire) - value) < 0)
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        });
      });
    } else {
      guard([&] { fake::streamWaitValue(s, counter_, value); });
    }
    uint64_t h = held_.load();
    while (h < n && !held_.compare_exchange_weak(h, n)) {
    }
  }

  void release(uint64_t n) override { raise(*counter_, static_cast<uint32_t>(n)); }

  std::string streamWait() const override {
    return hostFunction_ ? "a blocking host function on the caller's stream (the design that "
                           "deadlocks on a real GPU; RR_TEST_HOLD_STREAM=host-function)"
                         : "a value wait on the caller's stream (cuStreamWaitValue32's rule, "
                           "on the stand-in GPU)";
  }

 private:
  void sync(const char* call) {
    try {
      fake::synchronizeDevice(call);
    } catch (const std::exception& e) {
      throw DeviceError(e.what());
    }
  }

  // The kernel of a reduction, by name (RR_AVG runs the sum kernel, as on CUDA).
  static std::string reduceKernel(rr_dtype_t dtype, rr_op_t op) {
    return fmt::format("reduce {} {}", dtypeName(dtype), opName(op == RR_AVG ? RR_SUM : op));
  }

  // A stand-in call that fails as CUDA's would (a full queue, rule 9) throws DeviceError;
  // `event`, if given, is released first.
  template <class F>
  static void guard(F&& f, fake::Event* event = nullptr) {
    try {
      f();
    } catch (const std::runtime_error& e) {
      if (event != nullptr) fake::destroyEvent(event);
      throw DeviceError(e.what());
    }
  }

  // Cyclic max: a flag only moves forward.
  static void raise(std::atomic<uint32_t>& word, uint32_t v) {
    uint32_t cur = word.load(std::memory_order_relaxed);
    while (static_cast<int32_t>(v - cur) > 0 && !word.compare_exchange_weak(cur, v, std::memory_order_release)) {
    }
  }
  void noteQueued(uint32_t value) {
    if (static_cast<int32_t>(value - gated_) > 0) gated_ = value;
  }

  // A kernel of collective `program`: it does nothing once kCancel has reached the program.
  // While a program is recorded, the kernel becomes one of its steps.
  void enqueue(const std::string& kernel, uint32_t program, std::function<void()> work) {
    noteQueued(program);
    if (recording_.on && kernel != "program") {
      recording_.steps.push_back([work = std::move(work)] {
        work();
        return true;
      });
      return;
    }
    try {
      fake::launch(stream_, kernel, [flags = flags_, program, work = std::move(work)] {
        if (static_cast<int32_t>((*flags)[kCancel].load(std::memory_order_acquire) - program) < 0) work();
      });
    } catch (const std::runtime_error& e) {  // rule 8: a first launch behind a held stream
      throw DeviceError(e.what());
    }
  }

  bool hostFunction_;
  bool programs_;
  ProgramRecording<std::function<bool()>> recording_;  // a step returns false: stop
  fake::Stream* stream_;
  // Shared with queued work, which may outlive a device hung on purpose.
  std::shared_ptr<std::array<std::atomic<uint32_t>, kFlags>> flags_ =
      std::make_shared<std::array<std::atomic<uint32_t>, kFlags>>();
  uint32_t gated_ = 0;  // the largest gate or program value queued (the destructor ungates to it)
  std::atomic<uint32_t>* counter_ = new std::atomic<uint32_t>(0);  // what held streams wait on
  std::atomic<uint64_t> held_{0};
};

}  // namespace

std::unique_ptr<Device> openFakeDevice(bool holdByHostFunction, int lazyLoadingMs, size_t queueDepth,
                                       bool programs) {
  return std::make_unique<FakeDevice>(holdByHostFunction, lazyLoadingMs, queueDepth, programs);
}

}  // namespace rr
