// What a rank's progress thread is stalled on, as the engine records it and the stall
// monitor reports it to rank 0 (stall_monitor.h), and the cause rank 0 names at a timeout.
#pragma once

#include <cstdint>
#include <string>

#include "base/clock.h"
#include "engine/plan/schedule.h"

namespace rr {

enum class WaitingOn : uint8_t { kNothing, kLeft, kRight, kDevice };

// What a rank's progress thread is stalled on now.
struct StallState {
  uint64_t seq = 0;  // the collective it is in (0: none)
  Collective kind = Collective::kAllReduce;
  uint64_t bytes = 0;
  WaitingOn on = WaitingOn::kNothing;
  Clock::time_point since{};  // the last progress
  int gpu = -1;
  // The rank it waits for: a recursive doubling or halving-doubling partner, or a ring
  // neighbour; -1: the neighbour `on` names (left or right).
  int peer = -1;
};

// The cause of a stall as rank 0 names it, for a timeout's message.
struct StallCause {
  std::string text;       // who holds the job up; "" where rank 0 cannot tell
  bool answered = true;   // false: rank 0 did not answer in time, and `text` says only that
};

}  // namespace rr
