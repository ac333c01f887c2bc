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
// Device buckets (run() with a Device): the staging is pinned memory the GPU maps, and the
// user's buffers are touched only by device work. A received segment lands in in-slot k;
// a reduction runs as one kernel that writes the device bucket and, when the next step
// forwards the result, out-slot k (reduce-and-copy-out); an all-gather segment is copied
// into the device bucket and forwarded from its in-slot. A send from the user's buffer
// (a ring's first step) is first copied into send-slot k. Two more counters:
//
//   sendPosted <= sendStaged        send-slot copies queued ahead of the sends
//   recvDone <= recvLanded <= recvPosted    received on the socket, device work queued
//
// and a unit counts as received (recvDone) once its device work is finished. A send that
// forwards unit j's result reads slot j, so a receive k (which overwrites slot k % 8) also
// waits until the send of unit k - 8 + depth is done.
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
#include "kernels/device.h"
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
  // Allocates the pinned staging of device passes, once; later passes must use the same
  // device. Called on the submitting thread before any device pass can be queued.
  void attachDevice(Device* device);

  // Not rank 0: waits for the next header from the left; `next` is this rank's next
  // collective, named if the wait times out.
  GroupHeader receiveHeader(const OpDesc& next);
  // Sends a header right and waits until the kernel has it (used for fusion proposals).
  void sendHeader(const GroupHeader& header);
  // Runs one pass. Rank 0 sends `header` and checks it comes back; others forward it.
  // With `device`, send and recv are that device's memory (see above); the device must
  // stay the same for the engine's lifetime. Throws Error on mismatch, timeout, or peer
  // failure, DeviceError when a CUDA call fails.
  PassTimes run(const RingSchedule& schedule, const GroupHeader& header, const void* send,
                void* recv, Device* device = nullptr);

 private:
  struct Counters {
    size_t recvPosted = 0, recvDone = 0, sendPosted = 0, sendDone = 0;
    size_t sendStaged = 0, recvLanded = 0;  // device passes only
  };
  bool postSendsDevice(const RingSchedule& s, Counters& c, rr_dtype_t dtype, const void* send,
                       const void* recv);
  bool postRecvsDevice(const RingSchedule& s, Counters& c, rr_dtype_t dtype);
  bool completeRecvsDevice(const RingSchedule& s, Counters& c, const GroupHeader& h,
                           const void* send, void* recv);
  // Where unit j's result is for the send that forwards it (device passes).
  const uint8_t* resultSlot(const RingSchedule& s, size_t j) const {
    return s.unit(j).reduce ? devOutSlot(j) : devInSlot(j);
  }
  uint8_t* devInSlot(size_t unit) const { return devStaging_ + (unit % kInSlots) * segmentBytes_; }
  uint8_t* devOutSlot(size_t unit) const {
    return devStaging_ + (kInSlots + unit % kOutSlots) * segmentBytes_;
  }
  uint8_t* devSendSlot(size_t unit) const {
    return devStaging_ + (kInSlots + kOutSlots + unit % kInSlots) * segmentBytes_;
  }
  bool postSends(const RingSchedule& s, Counters& c, rr_dtype_t dtype, const void* send,
                 void* recv);
  bool postRecvs(const RingSchedule& s, Counters& c, rr_dtype_t dtype, void* recv);
  bool completeRecvs(const RingSchedule& s, Counters& c, const GroupHeader& h,
                     const void* send, void* recv);
  bool progressLinks(uint64_t seq);
  void wait(Clock::time_point deadline, bool devicePending = false);
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
  Device* device_ = nullptr;           // set by the first device pass
  uint8_t* devStaging_ = nullptr;      // in-, out- and send-slots, pinned by device_
  uint64_t sendTicket_[kRing] = {};    // device work each unit waits for
  uint64_t recvTicket_[kRing] = {};
  std::optional<Error> pendingAbort_;
  uint8_t sentHeader_[GroupHeader::kBytes] = {};
  uint8_t leftHeader_[GroupHeader::kBytes] = {};
};

}  // namespace rr
