// PhaseStats (RR_PHASES=1): where the time of each collective goes, kept in memory and
// printed once when the communicator is destroyed, as medians over the collectives it ran
// (the first 10 left out: connection warm-up). Cheap enough to leave on in a benchmark:
// a few clock reads per collective, no I/O until the end (RR_TIMELINE writes JSON as it
// goes and doubles a 4 KiB all-reduce's time here, so it cannot measure this).
//
//   submit   the caller queued it (Request::submitted)
//   start    the progress thread took it from the queue (pass start)
//   peers    the left neighbour's op header arrived (with its first data; its data is
//            taken only after it; for a fused pass, after the proposal went around)
//   end      the last byte was received and reduced, the last send taken by the kernel
//   done     the progress thread published the result (Request::complete)
//   woke     the caller's rr_wait / rr_test saw it (Request::wait)
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/run/progress_engine.h"
#include "engine/run/request.h"

namespace rr {

class PhaseStats {
 public:
  static constexpr size_t kMaxSamples = 1 << 17;

  // One pass and the collectives it carried (the progress thread, after they completed).
  void record(const std::vector<std::shared_ptr<Request>>& ops, const PassTimes& times);
  // Medians per phase, one block of lines; "" when fewer than 11 collectives ran.
  std::string summary(int rank, int size) const;

 private:
  struct Sample {
    std::shared_ptr<Request> request;  // woke is read at the end, once the caller saw it
    PassTimes times;
    size_t bytes;
  };
  mutable std::mutex mutex_;
  std::vector<Sample> samples_;
};

}  // namespace rr
