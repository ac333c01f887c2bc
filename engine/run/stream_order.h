// StreamOrder: a collective ordered on the caller's CUDA stream (docs/gpu.md), one per
// communicator, made when the communicator opens its GPU.
//
//   caller's stream:  ... user work | record E | wait counter >= n | user work after the call
//                                       |                  ^
//   engine's stream:       wait E ------+-> kernels of n   |          (device buckets)
//   progress thread:  (host buckets: polls E) ... request n finished: release(n)
//
// Start: at submission an event E is recorded on the caller's stream. A device bucket's
// work is queued on the engine's stream at the same call, behind a wait for E on the GPU
// (engine/run/device_pass.h); a host bucket's pass starts once the progress thread has seen E
// complete (bounded by RR_TIMEOUT_MS).
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
// here ever blocks on a stream. And because a device bucket's work is all queued before its
// caller's stream is held, an implicit synchronisation of the device after the call (a
// program's kernel loaded lazily at its first launch, an allocation) waits only for work
// that completes without another CUDA call: the progress thread makes none for it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <functional>
#include <map>
#include <string>

namespace rr {

class Device;
struct Request;

class StreamOrder {
 public:
  explicit StreamOrder(Device& device) : device_(device) {}

  // On the submitting thread, submissions of the communicator serialised (their order is the
  // queue's): records the start event on `stream`; for a device bucket (queueWork set) makes
  // the engine's stream wait for it; queues r (push: r.order and r.orderNumber are set);
  // queues the pass's device work (queueWork); then holds `stream` until r completes.
  // r.programEnd is the flag value that ends r's device work (the last one's before it when
  // it has none). Throws DeviceError: before push, nothing is held and r is not queued;
  // after it, r is queued and the caller must fail it (the communicator aborts). Device work
  // already queued for a failed request is cancelled and let go once the requests before it
  // have completed.
  void order(Request& r, void* stream, const std::function<void()>& queueWork,
             const std::function<void()>& push);
  // The progress thread, before a host bucket's pass: waits here, polling, until the start
  // event completes, the deadline or an abort (then it throws Error naming the request). A
  // device bucket's engine stream already waits for it on the GPU: nothing to do.
  void start(Request& r, int rank, int timeoutMs, const std::atomic<bool>& aborted);
  // Request n has completed (Request::complete): once 1..n all have, their streams may go;
  // the device work of those that failed is cancelled and every gate of it raised, so the
  // engine's stream never waits for a pass that will not run.
  void finished(uint64_t n, uint32_t programEnd, bool failed);
  // Releases an event start() never took (a request that failed first).
  void dropEvent(void* event);

  Device& device() { return device_; }

 private:
  struct Ended {
    uint32_t programEnd;
    bool failed;
  };
  void releaseLocked(uint64_t n, const Ended& e);

  Device& device_;
  std::mutex mutex_;
  uint64_t next_ = 0;                // the last number handed out
  uint64_t released_ = 0;            // 1..released_ have completed
  std::map<uint64_t, Ended> early_;  // completed before an earlier one
};

}  // namespace rr
