// A GPU as the engine sees it: staging memory it can reach, asynchronous reduce/copy work on
// the engine's own stream, and completion by polling. No CUDA types appear here; streams and
// events are void*.
//
// Implementations: CUDA (kernels/cuda/cuda_device.cc, built with -Dcuda), "built without CUDA"
// (device_none.cc), and a host-memory stand-in for tests (device_fake.cc) that runs each
// queued operation only when it is polled, so an engine that reads a result before its
// ticket is finished sees stale bytes and fails its checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

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
  // Binds the calling thread to this device (cudaSetDevice).
  virtual void makeCurrent() = 0;
  // Page-locked host memory that the device reads and writes directly (cudaHostAlloc,
  // mapped), aligned to 4 KiB.
  virtual void* allocStaging(size_t bytes) = 0;
  virtual void freeStaging(void* p) = 0;

  // Work queued in order on the engine's stream. Each call returns a ticket; finished(t) is
  // true once every operation up to ticket t has completed. Ticket 0 means "no work".
  virtual uint64_t reduceCopyOut(void* dst, const void* mine, const void* in, void* out,
                                 size_t count, rr_dtype_t dtype, rr_op_t op, int avgRanks) = 0;
  virtual uint64_t copy(void* dst, const void* src, size_t bytes) = 0;
  virtual bool finished(uint64_t ticket) = 0;
  // The engine's stream waits for an event from captureStream (and releases it).
  virtual void waitEvent(void* event) = 0;
};

// Whether this library was built with CUDA.
bool cudaBuilt();
// The CUDA device that holds `p`, or -1 for host memory (and whenever CUDA is unusable).
int pointerDevice(const void* p);
std::unique_ptr<Device> openCudaDevice(int ordinal);
std::unique_ptr<Device> openFakeDevice();

// Stream ordering, called on the submitting thread. captureStream records an event on
// `stream` (NULL: CUDA's legacy default stream) and returns it; holdStream makes `stream`
// wait until wait(arg) returns (a host function queued on it). eventDone polls an event from
// captureStream; releaseEvent frees one that was not handed to Device::waitEvent.
void* captureStream(void* stream, int device);
void holdStream(void* stream, int device, void (*wait)(void*), void* arg);
bool eventDone(void* event);
void releaseEvent(void* event);

}  // namespace rr
