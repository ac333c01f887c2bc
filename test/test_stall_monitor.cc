// Rank 0's answer to "who holds the job up" (StallMonitor::cause) from real reports over
// socket pairs: ranks 1-3 report with their own StallMonitor, rank 0 reads them and follows
// the chain of waits. The ring is 0 -> 1 -> 2 -> 3 -> 0; everyone is in op #5.
#include <catch2/catch.hpp>

#include <spdlog/logger.h>
#include <sys/socket.h>

#include <memory>
#include <thread>
#include <vector>

#include "engine/observe/stall_monitor.h"

namespace {

using namespace std::chrono_literals;
using Catch::Matchers::StartsWith;

constexpr uint64_t kSeq = 5;

struct Job {
  spdlog::logger log{"stall-monitor-test"};
  std::vector<rr::Fd> rank0;                       // rank 0's end of each bootstrap connection
  std::vector<std::vector<rr::Fd>> others;         // rank r's end, as its bootstrap[0]
  std::vector<std::unique_ptr<rr::StallMonitor>> monitors;

  Job() : rank0(4), others(4) {
    for (int r = 1; r < 4; ++r) {
      int sv[2];
      REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
      rank0[r] = rr::Fd(sv[0]);
      others[r].emplace_back(sv[1]);
    }
    monitors.push_back(std::make_unique<rr::StallMonitor>(0, 4, &rank0, 60.0, log));
    for (int r = 1; r < 4; ++r)
      monitors.push_back(std::make_unique<rr::StallMonitor>(r, 4, &others[r], 60.0, log));
  }
  // Rank r's report (sent if a beat is due: the first call, then every 250 ms).
  // `peer`: the rank it waits for (-1: the neighbour `on` names); `seq`: the op it is in.
  void report(int r, rr::WaitingOn on, uint64_t lastSubmitted = kSeq, int peer = -1, uint64_t seq = kSeq) {
    monitors[r]->poll(lastSubmitted, stalled(on, peer, seq));
  }
  static rr::StallState stalled(rr::WaitingOn on, int peer = -1, uint64_t seq = kSeq) {
    rr::StallState s;
    s.seq = on == rr::WaitingOn::kNothing ? 0 : seq;
    s.on = on;
    s.since = rr::Clock::now() - 1500ms;
    s.peer = peer;
    return s;
  }
  std::string rank0Explains(int peer = -1) {
    return monitors[0]->explain(kSeq, stalled(rr::WaitingOn::kLeft, peer), 100ms).text;
  }
  // Rank 0 reads what has come, rank 2 goes quiet for `quiet` while 1 and 3 keep beating
  // (waiting for their left neighbours), then rank 0 times out waiting for rank 3.
  std::string rank2QuietThenExplain(std::chrono::milliseconds quiet) {
    monitors[0]->poll(kSeq, {});
    for (auto left = quiet; left > 0ms; left -= 260ms) {
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(left, 260ms));
      report(1, rr::WaitingOn::kLeft);
      report(3, rr::WaitingOn::kLeft);
    }
    return rank0Explains();
  }
};

}  // namespace

TEST_CASE("a rank that stopped just before the timeout is named, not the neighbour that waits for it") {
  // Rank 2 reported while it still moved, then stopped; 0.8 s later (less than the 1.5 s
  // that makes a rank silent, more than two missed beats) rank 0 times out waiting for 3,
  // and 3 waits for 2.
  Job job;
  job.report(2, rr::WaitingOn::kNothing);
  CHECK_THAT(job.rank2QuietThenExplain(800ms), StartsWith("rank 2 has not reported for "));
}

TEST_CASE("a rank that reports on time is not blamed for a chain it does not explain") {
  // The same chain, but rank 2's report is fresh and says it moves: rank 0 cannot tell.
  Job job;
  job.report(2, rr::WaitingOn::kNothing);
  job.report(1, rr::WaitingOn::kLeft);
  job.report(3, rr::WaitingOn::kLeft);
  CHECK(job.rank0Explains() == "");
}

TEST_CASE("a rank quiet past the silence bound is named though its last report continues the chain") {
  Job job;
  job.report(2, rr::WaitingOn::kLeft);
  CHECK_THAT(job.rank2QuietThenExplain(1800ms), StartsWith("rank 2 has not reported for "));
}

TEST_CASE("where every rank waits for another, a rank that missed two beats is named") {
  // A cycle of waits is a lost link unless one rank on it has gone quiet.
  Job job;
  for (int r = 1; r < 4; ++r) job.report(r, rr::WaitingOn::kLeft);
  CHECK(job.rank0Explains() == "");
  CHECK_THAT(job.rank2QuietThenExplain(800ms), StartsWith("rank 2 has not reported for "));
}

TEST_CASE("a rank idle in user code is named as late; one that went quiet is not") {
  // Rank 2's last report says op #4: on time, it has not submitted #5; two beats late, it
  // may have submitted it since (the fault test's victim submits, then stops at once).
  Job job;
  job.report(2, rr::WaitingOn::kNothing, kSeq - 1);
  job.report(1, rr::WaitingOn::kLeft);
  job.report(3, rr::WaitingOn::kLeft);
  CHECK(job.rank0Explains() == "rank 2 has not submitted it (its last submitted op is #4)");
  CHECK_THAT(job.rank2QuietThenExplain(800ms), StartsWith("rank 2 has not reported for "));
}

TEST_CASE("the chain follows the partners ranks wait for, not their ring neighbours") {
  // Recursive doubling's fold pairs ranks that are no neighbours: rank 0 waits for partner
  // 2, which waits for partner 1, which stopped. Following left neighbours instead would
  // go 0 -> 3 -> 2 -> 1 through rank 3, which waits for nobody here.
  Job job;
  job.report(1, rr::WaitingOn::kNothing);
  job.report(3, rr::WaitingOn::kNothing, kSeq - 1);  // the left neighbour: idle in op #4
  job.report(2, rr::WaitingOn::kLeft, kSeq, 1);
  job.monitors[0]->poll(kSeq, {});
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(260ms);
    job.report(2, rr::WaitingOn::kLeft, kSeq, 1);
    job.report(3, rr::WaitingOn::kNothing, kSeq - 1);
  }
  CHECK_THAT(job.rank0Explains(2), StartsWith("rank 1 has not reported for "));
}

TEST_CASE("a silent rank off a chain that explains nothing is named") {
  // Between passes of recursive doubling a rank waits for its left neighbour or any
  // partner, and its report names one of them: rank 0 waits for 3, 3 for partner 1, 1 for
  // 0, a cycle without rank 2, which stopped long enough ago to be silent.
  Job job;
  job.report(2, rr::WaitingOn::kNothing);
  job.monitors[0]->poll(kSeq, {});
  for (int i = 0; i < 7; ++i) {
    std::this_thread::sleep_for(260ms);
    job.report(3, rr::WaitingOn::kLeft, kSeq, 1);
    job.report(1, rr::WaitingOn::kLeft);
  }
  CHECK_THAT(job.rank0Explains(), StartsWith("rank 2 has not reported for "));
}

TEST_CASE("a rank behind, stalled in an earlier op, is followed into that op") {
  // Rank 0 is in op #5 and waits for rank 3, which has not submitted #5: it is stalled in
  // #4, waiting for partner 1, which stopped. Rank 3 is not the one to name.
  Job job;
  job.report(1, rr::WaitingOn::kNothing);
  job.monitors[0]->poll(kSeq, {});
  for (int i = 0; i < 4; ++i) {
    job.report(3, rr::WaitingOn::kLeft, kSeq - 1, 1, kSeq - 1);
    job.report(2, rr::WaitingOn::kNothing);
    std::this_thread::sleep_for(260ms);
  }
  job.report(3, rr::WaitingOn::kLeft, kSeq - 1, 1, kSeq - 1);
  CHECK_THAT(job.rank0Explains(3), StartsWith("rank 1 has not reported for "));
}

TEST_CASE("a rank whose question rank 0 does not answer says so") {
  Job job;  // rank 0 never reads: stopped
  const rr::StallCause c = job.monitors[1]->explain(kSeq, Job::stalled(rr::WaitingOn::kLeft), 100ms);
  CHECK_FALSE(c.answered);
  CHECK_THAT(c.text, StartsWith("rank 0 has not answered which rank holds the job up within 100 ms"));
}
