// Waker: an eventfd in the progress engine's EventSet, so that another thread (an abort)
// can wake the progress thread at once instead of at its next poll timeout.
#pragma once

#include <cstdint>

#include "transport/link.h"
#include "transport/socket.h"

namespace rr {

class Waker final : public EventTarget {
 public:
  explicit Waker(EventSet& events);
  void wake();                           // any thread
  void onEvent(uint32_t events) override;  // the progress thread: clears it

 private:
  Fd fd_;
};

}  // namespace rr
