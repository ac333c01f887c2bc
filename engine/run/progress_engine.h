// ProgressEngine: runs passes without blocking on any single transfer, every wait bounded
// by the no-progress deadline (RR_TIMEOUT_MS). What a pass does with the bytes is a Pass
// (pass.h): HostPass for host memory, DevicePass for a GPU's; the engine owns their staging
// (host slots, and the device's pinned slots once a device is attached) and the loop that
// drives them. Which peer's bytes a pass may take, and when, is the Agreement's
// (agreement.h), which the loop asks at its gates; between passes the engine waits for the
// agreement's headers (fusion_agreement.h decides what the next pass carries).
//
// A pass that makes no progress for the timeout fails with RR_ERR_TIMEOUT naming what it
// waited for: the left neighbour's data, the right neighbour taking data, a partner, or
// device work that has not finished (named with its GPU); rank 0's view of who holds the
// job up (StallMonitor::explain) leads the message.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "base/clock.h"
#include "base/error.h"
#include "engine/observe/stall_state.h"
#include "engine/plan/schedule.h"
#include "engine/run/agreement.h"
#include "engine/run/fusion_agreement.h"
#include "engine/run/op_header.h"
#include "kernels/device.h"
#include "kernels/reduce.h"

namespace rr {

class Pass;

// When a pass reached each phase, for the timeline.
struct PassTimes {
  Clock::time_point start, peers, reduced, end;
};

class ProgressEngine {
 public:
  // onIdle runs every 100 ms while the engine runs a pass or waits; once `aborted` is set,
  // every wait throws RR_ERR_ABORTED (the setter also wakes the event set). For `spin` after
  // its last progress a waiting pass only looks at its links instead of sleeping (RR_SPIN_US).
  ProgressEngine(Agreement& agreement, EventSet& events, size_t segmentBytes, int timeoutMs,
                 std::chrono::microseconds spin, std::function<void()> onIdle, const std::atomic<bool>* aborted);
  ~ProgressEngine();
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  size_t segmentBytes() const { return segmentBytes_; }
  Agreement& agreement() { return agreement_; }
  // What the engine is stalled on now (seq 0: not in a collective; on kNothing: moving).
  // Kind and bytes are the caller's to fill in.
  const StallState& stall() const { return stall_; }
  // At a timeout, asks for the cause (StallMonitor::explain); its answer leads the message.
  // The second argument is to be called while the answer is awaited: it watches the links
  // and throws a neighbour's abort, which then comes without the wait.
  using Explain = std::function<StallCause(const StallState&, const std::function<void()>&)>;
  void setExplain(Explain explain) { explain_ = std::move(explain); }
  // Tests (RR_TEST_PAUSE_AFTER_SENDS_MS): in the first pass that gets there, with every send
  // posted and not all of them done, this rank stops `ms` (its neighbours move on meanwhile).
  void setTestPause(int ms) { testPauseMs_ = ms; }
  // Allocates the pinned staging of device passes, once; later passes must use the same
  // device. Called on the submitting thread when the communicator opens its GPU, before any
  // request holds a stream (the allocation synchronises the device).
  void attachDevice(Device* device);
  uint8_t* devStaging() const { return devStaging_; }

  // Between collectives: the waits of the fusion protocol (fusion_agreement.h), each bounded
  // by the deadline: the next header (a neighbour's or partner's), and a proposal's send.
  HeaderWaits waits();
  // Between collectives: reads what the links hold without waiting; throws a neighbour's
  // abort frame (a closed connection is reported by the next collective).
  void pollIdle() { agreement_.idle(); }
  // Runs one pass of `header` (what this rank runs; the agreement sends it and checks its
  // peers', `leftHeader` when it came already). With `device`, send and recv are that
  // device's memory and its work was queued at submission (queueDeviceWork, with
  // `deviceBase`); the device must stay the same for the engine's lifetime. Throws Error on
  // mismatch, timeout, or peer failure, DeviceError when a CUDA call fails.
  PassTimes run(const Schedule& schedule, const GroupHeader& header, const GroupHeader* leftHeader,
                const void* send, void* recv, Device* device = nullptr, uint32_t deviceBase = 0);

 private:
  Heard awaitHeader(const OpDesc& next);
  void sendProposal(const GroupHeader& proposal);
  // One round of the pass's loop: true if anything moved.
  bool step(Pass& pass, const Schedule& s, PassCounters& c, PassTimes& times, uint64_t seq);
  // Between rounds that moved nothing: the stall recorded, the deadline checked (throws at
  // it), then a wait for an event.
  void idleRound(Pass& pass, const Schedule& s, const PassCounters& c, const GroupHeader& h,
                 Clock::time_point lastMoved, Clock::time_point until);
  void idleDuties();  // onIdle, at most every 100 ms
  bool progressLinks(uint64_t seq) {
    idleDuties();  // on a pass that keeps moving too: rank 0 reads the others' reports as they come
    return agreement_.progressLinks(seq);
  }
  // Waits for an event until `deadline`; only looks while within the spin window after
  // `since` (the last progress) or while device work is pending.
  void wait(Clock::time_point deadline, Clock::time_point since, bool devicePending = false);
  // `partner`: the recursive doubling or halving-doubling partner waited for (`algo` says
  // which), else -1 (a ring neighbour).
  [[noreturn]] void timeout(const std::string& what, bool waitingForLeft, size_t done, size_t total, int partner = -1,
                            Algorithm algo = Algorithm::kRing);
  // Marks the engine stalled in op `seq` on `on` since `since` (kNothing: it moved), waiting
  // for rank `peer` (-1: the neighbour `on` names).
  void stalledOn(uint64_t seq, WaitingOn on, Clock::time_point since, int peer = -1);
  Clock::time_point deadline() const { return Clock::now() + std::chrono::milliseconds(timeoutMs_); }
  void checkAborted() const;

  Agreement& agreement_;
  EventSet& events_;
  int rank_;
  int size_;
  size_t segmentBytes_;
  int timeoutMs_;
  std::chrono::microseconds spin_;
  std::function<void()> onIdle_;
  const std::atomic<bool>* aborted_;
  Clock::time_point lastIdle_;
  ReduceFn reduce_;
  ScaleFn scale_;
  uint8_t* staging_ = nullptr;     // host passes' in- and out-slots
  Device* device_ = nullptr;       // set by attachDevice
  uint8_t* devStaging_ = nullptr;  // device passes' in-, out- and send-slots, pinned by device_
  int testPauseMs_ = 0;            // tests: once, with every send of a pass posted, stop this long
  StallState stall_;
  Explain explain_;
};

}  // namespace rr
