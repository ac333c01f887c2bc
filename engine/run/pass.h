// Pass: how one ring pass moves a bucket's bytes between its links and memory. The
// ProgressEngine runs the loop (op header, link progress, deadlines, abort); a Pass posts the
// schedule's sends and receives and completes them: HostPass (host_pass.h) for host memory,
// DevicePass (device_pass.h) for a GPU's memory through pinned staging.
//
// Progress is four monotone counters over unit numbers, kept by the engine (docs/design.md,
// "Pipelines"):
//
//   recvPosted >= recvDone          receives queued on their link / received and reduced
//   sendPosted >= sendDone          sends queued on their link / taken by the transport
//
//   a send k is posted once recvDone > unit(k).dependsOn   (depth segments in flight)
//   a receive k is posted while k < recvDone + kInSlots     (its staging slot is free)
//
// A unit's link is the right neighbour's for its send and the left's for its receive, or,
// for recursive doubling and halving-doubling with partners, its partner's link both ways
// (Unit::peer); units are posted and completed in unit order whatever their links (each
// link keeps its own order). Which link, and when a peer's data may be received (once its
// op header has been checked), is the Agreement's to say (agreement.h): a pass asks it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/plan/schedule.h"
#include "engine/run/agreement.h"
#include "kernels/dtype.h"
#include "base/error.h"
#include "transport/link.h"

namespace rr {

// The pipeline's shape, shared by both kinds of pass.
struct PassShape {
  static constexpr int kDepth = kSegmentsInFlight;  // segments in flight per link
  static constexpr size_t kInSlots = 2 * kDepth;    // staging slots a receive lands in
  static constexpr size_t kOutSlots = 2 * kDepth;   // staging slots a partial result waits in
  static constexpr size_t kRing = 64;               // units tracked in flight, > kInSlots, depth
};

// What a pass works on: the schedule, the agreement whose gates give its links, the bucket
// and the staging slots.
struct PassArgs {
  const Schedule& schedule;
  Agreement& gates;
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
        gates_(a.gates),
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
    while (c.sendDone < c.sendPosted &&
           sendLink_[c.sendDone % PassShape::kRing]->sendsDone() >= sendMsgAfter_[c.sendDone % PassShape::kRing]) {
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
  // Unit k's send (receive) is posted on `link`: it is done once the link's count passes.
  void noteSend(size_t k, Link& link) {
    sendLink_[k % PassShape::kRing] = &link;
    sendMsgAfter_[k % PassShape::kRing] = link.sendsPosted();
  }
  // A unit that receives nothing has landed at once: the link may hold a receive posted
  // for later (a header, agreement.h) that it must not wait for.
  void noteRecv(size_t k, Link& link, const Unit& u) {
    recvLink_[k % PassShape::kRing] = &link;
    recvMsgAfter_[k % PassShape::kRing] = u.recvInto != Buffer::kNone ? link.recvsPosted() : 0;
  }
  bool recvLanded(size_t k) const {
    return recvLink_[k % PassShape::kRing]->recvsDone() >= recvMsgAfter_[k % PassShape::kRing];
  }
  uint8_t* inSlot(size_t unit) const { return staging_ + (unit % PassShape::kInSlots) * segmentBytes_; }
  uint8_t* outSlot(size_t unit) const {
    return staging_ + (PassShape::kInSlots + unit % PassShape::kOutSlots) * segmentBytes_;
  }

  const Schedule& s_;
  Agreement& gates_;
  rr_dtype_t dtype_;
  rr_op_t op_;
  int size_;
  size_t es_;
  const uint8_t* send_;
  uint8_t* recv_;
  uint8_t* staging_;
  size_t segmentBytes_;
  uint64_t sendMsgAfter_[PassShape::kRing] = {};  // its link's message count once unit k's send was posted
  uint64_t recvMsgAfter_[PassShape::kRing] = {};
  Link* sendLink_[PassShape::kRing] = {};         // the link of unit k's send, and of its receive
  Link* recvLink_[PassShape::kRing] = {};
};

}  // namespace rr
