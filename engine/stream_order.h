// StreamOrder: a collective ordered on the caller's CUDA stream (DESIGN.md §4), one per
// communicator, made when the communicator opens its GPU.
//
//   caller's stream:  ... user work | record E | wait counter >= n | user work after the call
//                                       |                  ^
//   engine's stream:       wait E ------+-> kernels of n   |          (device buckets)
//   progress thread:  (host buckets: polls E) ... request n finished: release(n)
//
// Start: at submission an event E is recorded on the caller's stream. A device bucket's
// kernels run on the engine's stream after it waits for E on the GPU; a host bucket's pass
// starts once the progress thread has seen E complete (bounded by RR_TIMEOUT_MS).
//
// Finish: the caller's stream waits ON THE GPU until the device's release counter reaches
// the request's number n (cuStreamWaitValue32, or a one-thread polling kernel where the
// device has no stream memory operations; kernels/device.h). The progress thread releases n
// when request n completes, with or without an error, after its device work has finished.
// Releases are cumulative: the counter moves to n only once 1..n have all completed, so a
// request that completes out of order never lets an earlier one's stream go.
//
// Why not a host function that returns when the request completes: on Hopper a running
// host function holds back work on every stream of the process, the engine's own kernels
// included, so it never returns (this hung every device collective on an H200). Nothing
// here ever blocks on a stream, and nothing that synchronises the device implicitly
// (allocation, cudaFreeHost) runs while a request of this communicator holds a stream.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

namespace rr {

class Device;
struct Request;

class StreamOrder {
 public:
  explicit StreamOrder(Device& device) : device_(device) {}

  // On the submitting thread: records the start event (r.startEvent) and holds `stream` until
  // r completes (r.order, r.orderNumber). Throws DeviceError; then nothing is held.
  void order(Request& r, void* stream);
  // The progress thread, before r's pass: a device bucket's engine stream waits for the
  // start event; a host bucket waits here, polling, until the deadline or an abort (then
  // it throws Error naming the request).
  void start(Request& r, int rank, int timeoutMs, const std::atomic<bool>& aborted);
  // Request n has completed (Request::complete): let streams held for it go.
  void finished(uint64_t n);
  // Releases an event start() never took (a request that failed first).
  void dropEvent(void* event);

  Device& device() { return device_; }

 private:
  Device& device_;
  std::mutex mutex_;
  uint64_t next_ = 0;          // the last number handed out
  uint64_t released_ = 0;      // 1..released_ have completed
  std::set<uint64_t> early_;   // completed before an earlier one
};

}  // namespace rr
