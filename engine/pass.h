// Pass: how one ring pass moves a bucket's bytes between the two links and memory. The
// ProgressEngine runs the loop (op header, link progress, deadlines, abort); a Pass posts the
// schedule's sends and receives and completes them: HostPass (host_pass.h) for host memory,
// DevicePass (device_pass.h) for a GPU's memory through pinned staging.
//
// Progress is four monotone counters over unit numbers (STYLE.md §4), kept by the engine:
//
//   recvPosted >= recvDone          receives queued on the left link / received and reduced
//   sendPosted >= sendDone          sends queued on the right link / taken by the kernel
//
//   a send k is posted once recvDone > unit(k).dependsOn   (depth segments in flight)
//   a receive k is posted while k < recvDone + kInSlots     (its staging slot is free)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/ring_schedule.h"
#include "kernels/dtype.h"
#include "transport/link.h"

namespace rr {

struct PassCounters {
  size_t recvPosted = 0, recvDone = 0, sendPosted = 0, sendDone = 0;
};

// The pipeline's shape, shared by both kinds of pass.
struct PassShape {
  static constexpr int kDepth = 4;                  // segments in flight per link
  static constexpr size_t kInSlots = 2 * kDepth;    // staging slots a receive lands in
  static constexpr size_t kOutSlots = 2 * kDepth;   // staging slots a partial result waits in
  static constexpr size_t kRing = 64;               // units tracked in flight, > kInSlots, depth
};

// What a pass works on: the schedule, the links, the bucket and the staging slots.
struct PassArgs {
  const RingSchedule& schedule;
  Link& left;
  Link& right;
  rr_dtype_t dtype;
  rr_op_t op;
  int size;           // ranks (RR_AVG divides by it)
  const void* send;
  void* recv;
  uint8_t* staging;   // in-slots, then out-slots (then, on a device, send-slots)
  size_t segmentBytes;
};

class Pass {
 public:
  explicit Pass(const PassArgs& a)
      : s_(a.schedule),
        left_(a.left),
        right_(a.right),
        dtype_(a.dtype),
        op_(a.op),
        size_(a.size),
        es_(dtypeSize(a.dtype)),
        send_(static_cast<const uint8_t*>(a.send)),
        recv_(static_cast<uint8_t*>(a.recv)),
        staging_(a.staging),
        segmentBytes_(a.segmentBytes) {}
  virtual ~Pass() = default;
  Pass(const Pass&) = delete;
  Pass& operator=(const Pass&) = delete;

  // Each returns whether anything moved.
  virtual bool postSends(PassCounters& c) = 0;
  virtual bool postRecvs(PassCounters& c) = 0;
  virtual bool completeRecvs(PassCounters& c) = 0;
  bool completeSends(PassCounters& c) {
    bool moved = false;
    while (c.sendDone < c.sendPosted && right_.sendsDone() >= sendMsgAfter_[c.sendDone % PassShape::kRing]) {
      ++c.sendDone;
      moved = true;
    }
    return moved;
  }
  // Work the pass waits for that no fd announces (device work): the engine polls instead
  // of sleeping while this is true.
  virtual bool devicePending(const PassCounters&) { return false; }
  // The unfinished device work that holds the pass, or "" (for the timeout's message).
  virtual std::string stalledOnDevice(const PassCounters&) { return ""; }

 protected:
  uint8_t* inSlot(size_t unit) const { return staging_ + (unit % PassShape::kInSlots) * segmentBytes_; }
  uint8_t* outSlot(size_t unit) const {
    return staging_ + (PassShape::kInSlots + unit % PassShape::kOutSlots) * segmentBytes_;
  }

  const RingSchedule& s_;
  Link& left_;
  Link& right_;
  rr_dtype_t dtype_;
  rr_op_t op_;
  int size_;
  size_t es_;
  const uint8_t* send_;
  uint8_t* recv_;
  uint8_t* staging_;
  size_t segmentBytes_;
  uint64_t sendMsgAfter_[PassShape::kRing] = {};  // link message count once unit k's send was posted
  uint64_t recvMsgAfter_[PassShape::kRing] = {};
};

}  // namespace rr
