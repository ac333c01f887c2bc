// The one clock of the library (monotonic) and the deadlines every wait takes: nothing
// that may block waits without one (docs/design.md, "The error model").
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace rr {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadlineIn(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

// Milliseconds left until `deadline`: 0 once it has passed (poll(2)'s timeout argument).
inline int msUntil(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)) : 0;
}

}  // namespace rr
