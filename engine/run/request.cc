// Request completion: the progress thread publishes the result once; waiters block on it.
#include "engine/run/request.h"

#include <utility>

#include "engine/run/spin.h"
#include "engine/run/stream_order.h"

namespace rr {

void Request::complete(rr_result_t code, std::string message) {
  if (done.load(std::memory_order_acquire)) return;  // once
  if (order != nullptr) {
    if (startEvent != nullptr) order->dropEvent(std::exchange(startEvent, nullptr));  // failed first
    order->finished(orderNumber, programEnd, code != RR_SUCCESS);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result = code;
    error = std::move(message);
    completedAt = Clock::now();
    done.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void Request::noteWoke() {
  Clock::time_point none{};
  wokeAt.compare_exchange_strong(none, Clock::now(), std::memory_order_relaxed);
}

rr_result_t Request::wait() {
  if (spinUntil([&] { return done.load(std::memory_order_acquire); }, spin)) {
    noteWoke();
    return result;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done.load(std::memory_order_acquire); });
  noteWoke();
  return result;
}

}  // namespace rr
