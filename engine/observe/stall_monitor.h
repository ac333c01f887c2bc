// StallMonitor: who holds up a collective, as rank 0 sees it (RR_STALL_WARN_S, and the
// cause named by a timeout).
//
// Every other rank reports to rank 0 over its bootstrap connection (never the ring, which
// may be the thing that is stuck): the number of its last submitted collective when it
// changed (at most every report interval), and a beat at least every beat interval (250 ms,
// longer for thousands of ranks) with, while its progress thread has been stalled for
// kStalledAfter, which op it is stalled in, what it waits for (its left or right neighbour,
// or device work) and since when. Rank 0 keeps the last report of each rank and when it
// came; a rank whose beats stop (four intervals, at least 1.5 s) is not responding.
//
// Stall warnings: when a collective has been stalled on any rank for longer than the warning
// period, rank 0 logs the ranks that have not submitted it, at most once per period, also
// when rank 0 itself is the one that has not:
//
//   op #57 allreduce 4.0 MiB: waiting for ranks 3, 5 (their last submitted op is #56)
//
// Timeouts: a rank that times out asks rank 0 for the cause (rank 0 works it out itself) and
// waits up to a bound for the answer. Rank 0 follows the chain of waits from the asking
// rank: each report names the rank its sender waits for (a ring neighbour, or a partner of
// recursive doubling or halving-doubling, whose fold pairs ranks that are no neighbours),
// until it finds a rank that has not submitted the op, has stopped reporting (frozen,
// stopped), or waits for device work on its GPU. A rank that has not submitted the op but
// is stalled in an earlier one is followed there (it waits for someone in that op). So the
// error names the rank that holds the job up, not the innocent neighbour that only waits
// too. Where the chain ends at a report that explains nothing (or comes back round), a rank
// on it that has missed two beats is named as not reporting: with a timeout near the silence
// bound, a rank stopped just before it is not yet silent, and its last report says it was
// moving. Failing that, the job's most silent rank is named: a rank between passes waits for
// its left neighbour or any partner, and its report names only one. No answer (rank 0
// itself frozen): the error says rank 0 did not answer, and names the rank this one waits
// for.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/observe/stall_state.h"
#include "engine/run/request.h"
#include "transport/socket.h"

namespace spdlog {
class logger;
}

namespace rr {

class StallMonitor {
 public:
  static constexpr std::chrono::milliseconds kStalledAfter{200};

  // bootstrap: rank 0: index r is the connection from rank r; others: [0] is the one to rank 0.
  StallMonitor(int rank, int size, std::vector<Fd>* bootstrap, double warnSeconds,
               spdlog::logger& log);

  // Others: report if something changed or a beat is due. Rank 0: read reports, answer
  // questions, warn about a long stall. Never blocks.
  void poll(uint64_t lastSubmitted, const StallState& own);
  // At a timeout in op `own.seq`: the cause as rank 0 sees it. Ranks other than 0 ask and
  // wait up to `limit` for the answer, calling `meanwhile` every 10 ms (it may throw: a
  // neighbour's abort that comes first ends the wait); no answer by then says so.
  StallCause explain(uint64_t lastSubmitted, const StallState& own, std::chrono::milliseconds limit,
                     const std::function<void()>& meanwhile = {});
  // The communicator failed: no more stall warnings (its error says it); questions are
  // still answered, with the stall it failed in.
  void quiet() { quiet_ = true; }

 private:
  struct Status {
    uint64_t lastSubmitted = 0;
    StallState stall;
    Clock::time_point heard{};
  };
  void send(uint64_t lastSubmitted, const StallState& own, bool question);
  void readReports(uint64_t lastSubmitted, const StallState& own);
  void warn(const StallState& own, uint64_t ownLastSubmitted);
  std::string cause(int from, uint64_t seq);

  int rank_;
  int size_;
  std::vector<Fd>* bootstrap_;
  std::chrono::milliseconds warn_;
  std::chrono::milliseconds interval_;
  std::chrono::milliseconds beat_;    // 250 ms, or 1 ms per rank beyond 250 ranks
  std::chrono::milliseconds silent_;  // no beat this long: not responding
  std::chrono::milliseconds overdue_;  // two beats missed: the suspect where a chain of waits ends
  spdlog::logger& log_;
  uint64_t reported_ = 0;
  bool quiet_ = false;
  Clock::time_point lastReport_{};
  Clock::time_point lastWarn_{};
  std::vector<Status> status_;                 // rank 0: per rank (its own at index 0)
  std::vector<std::vector<uint8_t>> partial_;  // rank 0: bytes of a report not yet whole
};

}  // namespace rr
