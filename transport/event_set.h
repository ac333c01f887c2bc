// EventSet: the one set of file descriptors the progress thread sleeps on (an epoll set).
//
//   progress thread --wait--> EventSet <--add-- each transport's links (what they wait on)
//                                      <--add-- the engine's waker (an abort from another thread)
//
// The engine owns it and never learns what an fd is: a transport registers whatever tells
// it that its links can move (TCP: each data socket; a UCX worker: its event fd), with an
// EventTarget whose onEvent records the readiness for the link's next progress().
#pragma once

#include <cstdint>
#include <vector>

#include "transport/socket.h"

namespace rr {

// What an EventSet calls back with the ready events of an fd it registered.
class EventTarget {
 public:
  virtual void onEvent(uint32_t events) = 0;

 protected:
  ~EventTarget() = default;
};

// A source that must be told before the thread sleeps (a UCX worker must be armed, and
// says when it has events pending that its fd will not signal).
class SleepGuard {
 public:
  // True when it may sleep; false when there is work to do first (the wait then only looks).
  virtual bool readyToSleep() = 0;

 protected:
  ~SleepGuard() = default;
};

class EventSet {
 public:
  EventSet();  // throws Error (RR_ERR_SYSTEM) if the set cannot be made
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;

  // Registers fd for `events` (EPOLLIN, EPOLLOUT, EPOLLET, ...); target must outlive the
  // registration (closing the fd ends it).
  void add(int fd, uint32_t events, EventTarget* target);
  // Waits up to timeoutMs (0: only looks) and calls onEvent for each ready fd. Returns how
  // many were ready; an interrupted wait returns 0.
  int dispatch(int timeoutMs);
  // Asks `guard` before every wait that may sleep; it must outlive the EventSet's use.
  void addGuard(SleepGuard* guard) { guards_.push_back(guard); }
  void removeGuard(SleepGuard* guard) noexcept;
  // Ends a registration (a link that goes away before its fds close).
  void remove(int fd) noexcept;
  int fd() const { return epoll_.get(); }

 private:
  Fd epoll_;
  std::vector<SleepGuard*> guards_;
};

}  // namespace rr
