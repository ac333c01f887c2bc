// StreamOrder; see stream_order.h.
#include "engine/run/stream_order.h"

#include <atomic>
#include <thread>
#include <utility>

#include "engine/run/op_header.h"
#include "engine/run/request.h"
#include "kernels/device.h"
#include "base/error.h"

namespace rr {

void StreamOrder::order(Request& r, void* stream, const std::function<void()>& queueWork,
                        const std::function<void()>& push) {
  uint64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    n = ++next_;
  }
  // Outside the lock: a launch may wait while the GPU's queue is full, and finished() (the
  // progress thread) must not wait for that.
  void* event = nullptr;
  try {
    event = device_.captureStream(stream);
    if (queueWork) device_.waitEvent(std::exchange(event, nullptr));
  } catch (...) {
    if (event != nullptr) device_.releaseEvent(event);
    finished(n, r.programEnd, true);
    throw;
  }
  r.startEvent = event;
  r.order = this;
  r.orderNumber = n;
  // Queued before its device work: work that outnumbers what the GPU's queue takes (about a
  // thousand entries, three per segment) waits there for its first steps to run, which
  // needs the pass.
  push();
  if (queueWork) queueWork();
  device_.holdStream(stream, n);  // after the work: a barrier while queueing it waits for no hold of its own
}

void StreamOrder::start(Request& r, int rank, int timeoutMs, const std::atomic<bool>& aborted) {
  void* event = std::exchange(r.startEvent, nullptr);
  if (event == nullptr) return;  // none, or a device bucket's (taken at submission)
  // Host buffers written by work on the caller's stream: wait here until it is done.
  struct Release {
    Device& d;
    void* e;
    ~Release() { d.releaseEvent(e); }
  } release{device_, event};
  const auto until = Clock::now() + std::chrono::milliseconds(timeoutMs);
  while (!device_.eventDone(event)) {
    if (aborted.load()) fail(RR_ERR_ABORTED, "rank {}: rr_comm_abort was called", rank);
    if (Clock::now() >= until)
      fail(RR_ERR_TIMEOUT,
           "{} on rank {}: the work queued on its stream before it (on {}) did not finish "
           "within {} ms",
           describeOp(r.desc), rank, device_.describe(), timeoutMs);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void StreamOrder::finished(uint64_t n, uint32_t programEnd, bool failed) {
  std::lock_guard<std::mutex> lock(mutex_);
  early_[n] = Ended{programEnd, failed};
  while (!early_.empty() && early_.begin()->first == released_ + 1) {
    const auto it = early_.begin();
    releaseLocked(it->first, it->second);
    early_.erase(it);
  }
}

void StreamOrder::releaseLocked(uint64_t n, const Ended& e) {
  // Every request before n has completed, so no pass of theirs or n's is left to raise
  // these flags: cancel a failed one's kernels first, then let its steps go.
  if (e.failed) device_.raiseFlag(Device::kCancel, e.programEnd);
  device_.raiseFlag(Device::kLanded, e.programEnd);
  device_.raiseFlag(Device::kSent, e.programEnd);
  released_ = n;
  device_.release(released_);
}

void StreamOrder::dropEvent(void* event) { device_.releaseEvent(event); }

}  // namespace rr
