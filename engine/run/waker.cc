// Waker; see waker.h.
#include "engine/run/waker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.h"

namespace rr {

Waker::Waker(EventSet& events) : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!fd_) failErrno(errno, "eventfd");
  events.add(fd_.get(), EPOLLIN, this);
}

void Waker::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd_.get(), &one, sizeof one);
}

void Waker::onEvent(uint32_t) {
  uint64_t value;
  [[maybe_unused]] ssize_t n = ::read(fd_.get(), &value, sizeof value);
}

}  // namespace rr
