// Request completion: the progress thread publishes the result once; waiters block on it.
#include "engine/request.h"

#include "kernels/device.h"

namespace rr {

Request::~Request() {
  if (startEvent != nullptr) releaseEvent(startEvent);  // never started: submission failed
}

void Request::complete(rr_result_t code, std::string message) {
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
