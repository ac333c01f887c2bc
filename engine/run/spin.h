// Bounded spinning (RR_SPIN_US): the three places a thread hands a collective to another
// (the caller to the progress thread, the progress thread to the network, back to the
// caller) look for a while before they sleep, because waking a sleeping thread costs tens
// of microseconds (on a virtual machine, an idle vCPU's wake-up), more than a small
// collective's hops. Off (0) when this host's ranks outnumber its cores: a spinning rank
// would take the core another rank needs (Config::load decides; README, RR_SPIN_US).
#pragma once

#include <chrono>
#include <thread>

#include "base/clock.h"

namespace rr {

// Polls `ready` for up to `spin`, yielding the core between looks (a pause-instruction
// spin starved the other ranks on 2 cores); returns whether it became true (false at once
// for 0).
template <class Ready>
bool spinUntil(Ready&& ready, std::chrono::microseconds spin) {
  if (spin.count() <= 0) return false;
  const Clock::time_point until = Clock::now() + spin;
  for (;;) {
    if (ready()) return true;
    std::this_thread::yield();
    if (Clock::now() >= until) return ready();
  }
}

}  // namespace rr
