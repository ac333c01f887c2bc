// Waker; see waker.h.
#include "engine/waker.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "transport/error.h"

namespace rr {

Waker::Waker(int epollFd) : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!fd_) failErrno(errno, "eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = static_cast<EventTarget*>(this);
  if (::epoll_ctl(epollFd, EPOLL_CTL_ADD, fd_.get(), &ev) != 0) failErrno(errno, "epoll_ctl ADD");
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
