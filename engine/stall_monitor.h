// StallMonitor: who has not submitted what, reported by rank 0 (RR_STALL_WARN_S).
//
// Every other rank sends rank 0 the number of its last submitted collective over its
// bootstrap connection (never the ring, which may be the thing that is stuck), when it
// changed and at most every report interval. When a collective on rank 0 has waited longer
// than the warning period, rank 0 logs the ranks that are behind, at most once per period:
//
//   op #57 allreduce 4.0 MiB: waiting for ranks 3, 5 (their last submitted op is #56)
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "transport/socket.h"

namespace spdlog {
class logger;
}

namespace rr {

class StallMonitor {
 public:
  // bootstrap: rank 0: index r is the connection from rank r; others: [0] is the one to rank 0.
  StallMonitor(int rank, int size, std::vector<Fd>* bootstrap, double warnSeconds,
               spdlog::logger& log);

  // Others: report `lastSubmitted` if it changed and the interval passed. Rank 0: read the
  // reports that arrived. Never blocks.
  void poll(uint64_t lastSubmitted);
  // Rank 0: `op` has waited since `since`; warn if that is longer than the period.
  void check(const OpDesc& op, size_t bytes, Clock::time_point since, uint64_t ownLastSubmitted);

 private:
  int rank_;
  int size_;
  std::vector<Fd>* bootstrap_;
  std::chrono::milliseconds warn_;
  std::chrono::milliseconds interval_;
  spdlog::logger& log_;
  uint64_t reported_ = 0;
  Clock::time_point lastReport_{};
  Clock::time_point lastWarn_{};
  std::vector<uint64_t> lastSubmitted_;     // rank 0: per rank
  std::vector<std::vector<uint8_t>> partial_;  // rank 0: bytes of a report not yet whole
};

}  // namespace rr
