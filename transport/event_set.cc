// EventSet; see event_set.h.
#include "transport/event_set.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>

#include "base/error.h"

namespace rr {

EventSet::EventSet() : epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
  if (!epoll_) failErrno(errno, "epoll_create1");
}

void EventSet::add(int fd, uint32_t events, EventTarget* target) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = target;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) failErrno(errno, "epoll_ctl ADD");
}

void EventSet::removeGuard(SleepGuard* guard) noexcept {
  guards_.erase(std::remove(guards_.begin(), guards_.end(), guard), guards_.end());
}

int EventSet::dispatch(int timeoutMs) {
  for (SleepGuard* g : guards_)
    if (timeoutMs != 0 && !g->readyToSleep()) timeoutMs = 0;
  epoll_event events[16];
  const int n = ::epoll_wait(epoll_.get(), events, 16, timeoutMs);
  if (n < 0) {
    if (errno == EINTR) return 0;
    failErrno(errno, "epoll_wait");
  }
  for (int i = 0; i < n; ++i) static_cast<EventTarget*>(events[i].data.ptr)->onEvent(events[i].events);
  return n;
}

void EventSet::remove(int fd) noexcept { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

}  // namespace rr
