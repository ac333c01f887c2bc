// StreamOrder; see stream_order.h.
#include "engine/stream_order.h"

#include <atomic>
#include <thread>
#include <utility>

#include "engine/op_header.h"
#include "engine/request.h"
#include "kernels/device.h"
#include "transport/error.h"

namespace rr {

void StreamOrder::order(Request& r, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  void* event = device_.captureStream(stream);
  try {
    device_.holdStream(stream, next_ + 1);
  } catch (...) {
    device_.releaseEvent(event);
    throw;
  }
  r.startEvent = event;
  r.order = this;
  r.orderNumber = ++next_;
}

void StreamOrder::start(Request& r, int rank, int timeoutMs, const std::atomic<bool>& aborted) {
  void* event = std::exchange(r.startEvent, nullptr);
  if (event == nullptr) return;
  if (r.device >= 0) {  // the engine's stream waits for it; the host does not
    device_.waitEvent(event);
    return;
  }
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

void StreamOrder::finished(uint64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (n != released_ + 1) {
    early_.insert(n);
    return;
  }
  released_ = n;
  while (!early_.empty() && *early_.begin() == released_ + 1) {
    released_ = *early_.begin();
    early_.erase(early_.begin());
  }
  device_.release(released_);
}

void StreamOrder::dropEvent(void* event) { device_.releaseEvent(event); }

}  // namespace rr
