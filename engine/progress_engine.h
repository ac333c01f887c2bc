// ProgressEngine: runs one RingSchedule over the left and right links without blocking on
// any single transfer, and with every wait bounded by the no-progress deadline.
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
// is allocated once per communicator. Before any data, each rank sends its right neighbour
// an op header and compares the one from its left (RR_ERR_MISMATCH names both ranks).
//
// A neighbour's abort frame fails the running collective, unless it comes from a later one
// (the neighbour finished this one and failed in the next): then this rank finishes its
// part and the abort fails its next call. The engine runs in the thread that calls the
// collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "engine/ring_schedule.h"
#include "kernels/reduce.h"
#include "transport/error.h"
#include "transport/link.h"
#include "transport/socket.h"

namespace rr {

struct OpDesc {
  uint64_t seq = 0;
  Collective kind = Collective::kAllReduce;
  rr_dtype_t dtype = RR_FLOAT32;
  rr_op_t op = RR_SUM;
  int root = 0;
  uint64_t count = 0;
};

class ProgressEngine {
 public:
  static constexpr int kDepth = 4;  // segments in flight per link
  static constexpr size_t kInSlots = 2 * kDepth;
  static constexpr size_t kOutSlots = 2 * kDepth;

  ProgressEngine(int rank, int size, Link* left, Link* right, int epollFd, size_t segmentBytes,
                 int timeoutMs);
  ~ProgressEngine();

  size_t segmentBytes() const { return segmentBytes_; }
  // Runs the schedule to completion; throws Error on mismatch, timeout, or peer failure.
  void run(const RingSchedule& schedule, const OpDesc& op, const void* send, void* recv);

 private:
  struct Counters {
    size_t recvPosted = 0, recvDone = 0, sendPosted = 0, sendDone = 0;
  };
  bool postSends(const RingSchedule& s, Counters& c, const OpDesc& op, const void* send,
                 void* recv);
  bool postRecvs(const RingSchedule& s, Counters& c, const OpDesc& op, void* recv);
  bool completeRecvs(const RingSchedule& s, Counters& c, const OpDesc& op, const void* send,
                     void* recv);
  void checkHeader(const OpDesc& op);
  bool progressLinks(const OpDesc& op);
  void wait(Clock::time_point deadline);
  [[noreturn]] void timeout(const RingSchedule& s, const Counters& c, const OpDesc& op);
  uint8_t* inSlot(size_t unit) const { return staging_ + (unit % kInSlots) * segmentBytes_; }
  uint8_t* outSlot(size_t unit) const {
    return staging_ + (kInSlots + unit % kOutSlots) * segmentBytes_;
  }

  static constexpr size_t kRing = 64;  // units tracked in flight, > kInSlots and depth
  int rank_;
  int size_;
  Link* left_;
  Link* right_;
  int epollFd_;
  size_t segmentBytes_;
  int timeoutMs_;
  ReduceFn reduce_;
  uint8_t* staging_ = nullptr;
  uint64_t sendMsgAfter_[kRing] = {};  // link message count once unit k's send was posted
  uint64_t recvMsgAfter_[kRing] = {};
  uint64_t headerRecvMsg_ = 0;         // the left link message that carries the op header
  bool headerOk_ = false;
  // An abort a neighbour sent from a later collective than the one running here: this
  // rank's part of the running one can still finish, so the abort fails the next one.
  std::optional<Error> pendingAbort_;
  uint8_t myHeader_[32] = {};
  uint8_t leftHeader_[32] = {};
};

}  // namespace rr
