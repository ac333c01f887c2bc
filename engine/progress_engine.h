// ProgressEngine: runs ring passes over the left and right links without blocking on any
// single transfer, with every wait bounded by the no-progress deadline.
//
// Progress is four monotone counters over unit numbers (STYLE.md §4):
//
//   recvPosted >= recvDone          receives queued on the left link / received and reduced
//   sendPosted >= sendDone          sends queued on the right link / handed to the kernel
//
//   a send k is posted once recvDone > unit(k).dependsOn   (depth segments in flight)
//   a receive k is posted while k < recvDone + kInSlots     (its staging slot is free)
//   and, if it writes a staging out-slot, once the unit that last read that slot was sent
//
// Received segments that must be reduced land in in-slot k % kInSlots and are reduced into
// their destination as they complete; all-gather segments land in the user buffer. Staging
// is allocated once per communicator.
//
// Every pass starts with a GroupHeader (op_header.h): rank 0 sends it right and checks that
// it comes back unchanged; every other rank receives it (receiveHeader), has it checked by
// the caller, and run() forwards it. A neighbour's abort frame fails the running pass,
// unless it comes from a later collective (the neighbour finished this one and failed in
// the next): then this rank finishes its part and the abort fails its next call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "engine/op_header.h"
#include "engine/ring_schedule.h"
#include "kernels/reduce.h"
#include "transport/error.h"
#include "transport/link.h"
#include "transport/socket.h"

namespace rr {

// When a pass reached each phase, for the timeline.
struct PassTimes {
  Clock::time_point start, peers, reduced, end;
};

class ProgressEngine {
 public:
  static constexpr int kDepth = 4;  // segments in flight per link
  static constexpr size_t kInSlots = 2 * kDepth;
  static constexpr size_t kOutSlots = 2 * kDepth;

  // onIdle runs every 100 ms while the engine waits; once `aborted` is set, every wait
  // throws RR_ERR_ABORTED (the setter also wakes the epoll set).
  ProgressEngine(int rank, int size, Link* left, Link* right, int epollFd, size_t segmentBytes,
                 int timeoutMs, std::function<void()> onIdle, const std::atomic<bool>* aborted);
  ~ProgressEngine();

  size_t segmentBytes() const { return segmentBytes_; }

  // Not rank 0: waits for the next header from the left; `next` is this rank's next
  // collective, named if the wait times out.
  GroupHeader receiveHeader(const OpDesc& next);
  // Sends a header right and waits until the kernel has it (used for fusion proposals).
  void sendHeader(const GroupHeader& header);
  // Runs one pass. Rank 0 sends `header` and checks it comes back; others forward it.
  // Throws Error on mismatch, timeout, or peer failure.
  PassTimes run(const RingSchedule& schedule, const GroupHeader& header, const void* send,
                void* recv);

 private:
  struct Counters {
    size_t recvPosted = 0, recvDone = 0, sendPosted = 0, sendDone = 0;
  };
  bool postSends(const RingSchedule& s, Counters& c, rr_dtype_t dtype, const void* send,
                 void* recv);
  bool postRecvs(const RingSchedule& s, Counters& c, rr_dtype_t dtype, void* recv);
  bool completeRecvs(const RingSchedule& s, Counters& c, const GroupHeader& h,
                     const void* send, void* recv);
  bool progressLinks(uint64_t seq);
  void wait(Clock::time_point deadline);
  [[noreturn]] void timeout(const std::string& what, bool waitingForLeft, size_t done,
                            size_t total);
  uint8_t* inSlot(size_t unit) const { return staging_ + (unit % kInSlots) * segmentBytes_; }
  uint8_t* outSlot(size_t unit) const {
    return staging_ + (kInSlots + unit % kOutSlots) * segmentBytes_;
  }
  Clock::time_point deadline() const;

  static constexpr size_t kRing = 64;  // units tracked in flight, > kInSlots and depth
  int rank_;
  int size_;
  Link* left_;
  Link* right_;
  int epollFd_;
  size_t segmentBytes_;
  int timeoutMs_;
  std::function<void()> onIdle_;
  const std::atomic<bool>* aborted_;
  void checkAborted() const;
  Clock::time_point lastIdle_;
  ReduceFn reduce_;
  uint8_t* staging_ = nullptr;
  uint64_t sendMsgAfter_[kRing] = {};  // link message count once unit k's send was posted
  uint64_t recvMsgAfter_[kRing] = {};
  std::optional<Error> pendingAbort_;
  uint8_t sentHeader_[GroupHeader::kBytes] = {};
  uint8_t leftHeader_[GroupHeader::kBytes] = {};
};

}  // namespace rr
