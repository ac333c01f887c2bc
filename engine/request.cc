// Request completion: the progress thread publishes the result once; waiters block on it.
#include "engine/request.h"

#include <utility>

#include "kernels/device.h"

namespace rr {

Request::~Request() {
  if (startEvent != nullptr) releaseEvent(startEvent);  // never queued: submission failed
}

void Request::complete(rr_result_t code, std::string message) {
  // An event the pass never took (the request failed first) is released here, on the
  // progress or submitting thread: the last reference may be dropped in the host function
  // that holds the caller's stream, where CUDA calls are not allowed.
  if (startEvent != nullptr) releaseEvent(std::exchange(startEvent, nullptr));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result = code;
    error = std::move(message);
    done.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

rr_result_t Request::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done.load(std::memory_order_acquire); });
  return result;
}

}  // namespace rr
