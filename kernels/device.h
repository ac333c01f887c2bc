// A GPU as the engine sees it: staging memory it can reach, reduce/copy work on the engine's
// own stream gated and signalled by flags in mapped memory, and the two halves of ordering a
// collective on the caller's stream. No CUDA types appear here; streams and events are void*.
//
// Ordering on the caller's stream (engine/run/stream_order.h uses these):
//   start   captureStream records an event on the caller's stream; waitEvent makes the
//           engine's stream wait for it (on the GPU) before a device bucket's work, queued
//           at the same call; for a host bucket the host polls eventDone.
//   finish  holdStream(stream, n) queues, on the caller's stream, a wait ON THE GPU until the
//           device's release counter reaches n; release(n) sets the counter from the host when
//           request n has finished. Nothing ever blocks inside a host function: on Hopper a
//           running host function stalls every stream of the process, the engine's own
//           included, so a host function that waits for the engine deadlocks.
//
// Implementations: CUDA (kernels/cuda/cuda_device.cc, built with -Dcuda), "built without CUDA"
// (device_none.cc), and the stand-in GPU for tests (device_fake.cc on kernels/fake_gpu.h),
// which keeps CUDA's stream rules so that a design CUDA would deadlock deadlocks there too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/reduce.h"
#include "ringreduce/ringreduce.h"

namespace rr {

// A failed CUDA call, with CUDA's own message; the engine maps it to RR_ERR_CUDA.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string describe() const = 0;
  virtual int ordinal() const = 0;  // the CUDA device number (0 for the stand-in)
  // Page-locked host memory that the device reads and writes directly (cudaHostAlloc,
  // mapped), aligned to 4 KiB. Both calls synchronise the device implicitly: the engine
  // makes them only when no request of its communicator holds a stream.
  virtual void* allocStaging(size_t bytes) = 0;
  virtual void freeStaging(void* p) = 0;

  // A collective's device work is queued whole on the engine's stream when it is submitted
  // (engine/run/device_pass.h), gated by flags: 32-bit counters in memory that both the host and
  // the GPU reach, compared cyclically ((int32_t)(flag - value) >= 0, as cuStreamWaitValue32's
  // GEQ). The host raises the gates (kLanded, kSent) as the links move; the engine's stream
  // raises the signals (kStaged, kDone) as its work completes; kCancel skips the kernels of
  // collectives that failed. So the host makes no CUDA call while a collective runs, and no
  // implicit synchronisation can stand between a held stream and the work that releases it.
  enum Flag : int { kLanded, kSent, kStaged, kDone, kCancel, kFlags };
  // The host's side: reads a flag; raises one to `value` (never lowers it).
  virtual uint32_t flag(Flag f) const = 0;
  virtual void raiseFlag(Flag f, uint32_t value) = 0;
  // Queued in order on the engine's stream: a wait until flag >= value; a write of `value`
  // once everything queued before it has completed, its memory writes visible first.
  virtual void waitFlag(Flag f, uint32_t value) = 0;
  virtual void signalFlag(Flag f, uint32_t value) = 0;
  // Kernels queued on the engine's stream; each does nothing once kCancel >= `program`.
  // dst = mine op in, and out = dst when out is not NULL (RR_AVG: as avg says, reduce.h).
  virtual void reduceCopyOut(void* dst, const void* mine, const void* in, void* out, size_t count,
                             rr_dtype_t dtype, rr_op_t op, AvgStep avg, uint32_t program) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes, uint32_t program) = 0;
  // One program per collective (RR_GPU_PROGRAM=1): the waits, signals,
  // reductions and copies between beginProgram and endProgram are recorded, and endProgram
  // queues them as one kernel that runs them in order (kernels/cuda/program_kernel.cu), one
  // launch where there were three entries per segment. discardProgram drops a recording (a
  // collective whose queueing failed). Elsewhere each call queues as it comes and these do
  // nothing. The stand-in runs a program as one item on its stream.
  virtual void beginProgram(rr_dtype_t, rr_op_t, uint32_t /*program*/) {}
  virtual void endProgram() {}
  virtual void discardProgram() {}

  // Start of a request: an event recorded on `stream` (NULL: the legacy default stream).
  virtual void* captureStream(void* stream) = 0;
  // The engine's stream waits for the event (and the event is released).
  virtual void waitEvent(void* event) = 0;
  virtual bool eventDone(void* event) = 0;
  virtual void releaseEvent(void* event) = 0;
  // Finish of a request: `stream` waits on the GPU until release(n') with n' >= n (a cyclic
  // 32-bit comparison, as cuStreamWaitValue32's GEQ). Never blocks the host.
  virtual void holdStream(void* stream, uint64_t n) = 0;
  // From any thread: every stream held for n or less may go on. Monotone.
  virtual void release(uint64_t n) = 0;
  // How holdStream waits, for logs and `ringreduce info`.
  virtual std::string streamWait() const = 0;
};

// The recording of a program (Device::beginProgram .. endProgram), for the devices that run
// them: the steps of one collective, in order.
template <class Step>
struct ProgramRecording {
  bool on = false;
  uint32_t program = 0;
  std::vector<Step> steps;
  void begin(uint32_t p) {
    steps.clear();
    on = true;
    program = p;
  }
  void discard() {
    on = false;
    steps.clear();
  }
  // Stops recording; true if there are steps to queue (they stay in `steps`).
  bool end() {
    const bool queue = on && !steps.empty();
    on = false;
    return queue;
  }
};

// Whether this library was built with CUDA.
bool cudaBuilt();
// The CUDA device that holds `p`, or -1 for host memory (and whenever CUDA is unusable).
int pointerDevice(const void* p);
// The GPU a CUDA stream belongs to (NULL: the calling thread's current device).
int streamDevice(void* stream);
// flagKernels (RR_GPU_FLAG_OPS=kernels): one-thread kernels wait for and write the flags even
// where the device has stream memory operations. programs (RR_GPU_PROGRAM=1): a collective's
// device work runs as one kernel (beginProgram).
std::unique_ptr<Device> openCudaDevice(int ordinal, bool flagKernels = false, bool programs = false);
// The stand-in GPU (kernels/fake_gpu.h). Two designs that hung on a real GPU, for tests that
// show the stand-in deadlocks where CUDA does: with holdByHostFunction, holdStream is a host
// function that waits for the release; with lazyLoadingMs > 0, the kernels are not loaded at
// open but at their first launch (rule 8), and the stand-in gives up the implicit
// synchronisation that CUDA would wait on forever after lazyLoadingMs.
// queueDepth > 0: the bound of a stand-in stream's queue (its rule 9), for tests. programs:
// as RR_GPU_PROGRAM=1, each collective's device work one item on the stream.
std::unique_ptr<Device> openFakeDevice(bool holdByHostFunction = false, int lazyLoadingMs = 0,
                                       size_t queueDepth = 0, bool programs = false);

}  // namespace rr
