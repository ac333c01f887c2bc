// Pass: how one ring pass moves a bucket's bytes between its links and memory. The
// ProgressEngine runs the loop (op header, link progress, deadlines, abort); a Pass posts the
// schedule's sends and receives and completes them: HostPass (host_pass.h) for host memory,
// DevicePass (device_pass.h) for a GPU's memory through pinned staging.
//
// Progress is four monotone counters over unit numbers (STYLE.md §4), kept by the engine:
//
//   recvPosted >= recvDone          receives queued on their link / received and reduced
//   sendPosted >= sendDone          sends queued on their link / taken by the transport
//
//   a send k is posted once recvDone > unit(k).dependsOn   (depth segments in flight)
//   a receive k is posted while k < recvDone + kInSlots     (its staging slot is free)
//
// A unit's link is the right neighbour's for its send and the left's for its receive, or,
// for recursive doubling and halving-doubling at n > 2, its partner's link both ways
// (Unit::peer); units are posted and completed in unit order whatever their links (each
// link keeps its own order).
// A partner's data is received only once its op header of this pass has been checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "engine/plan/schedule.h"
#include "kernels/dtype.h"
#include "base/error.h"
#include "transport/link.h"

namespace rr {

struct PassCounters {
  size_t recvPosted = 0, recvDone = 0, sendPosted = 0, sendDone = 0;
};

// The pipeline's shape, shared by both kinds of pass.
struct PassShape {
  static constexpr int kDepth = kSegmentsInFlight;  // segments in flight per link
  static constexpr size_t kInSlots = 2 * kDepth;    // staging slots a receive lands in
  static constexpr size_t kOutSlots = 2 * kDepth;   // staging slots a partial result waits in
  static constexpr size_t kRing = 64;               // units tracked in flight, > kInSlots, depth
};

// A recursive doubling partner's link (n > 2), and this pass's op headers on it: this
// rank's goes out right ahead of its first data for the partner (one arrival there, not
// two), and the partner's must have been checked before any of its data is received.
struct PartnerLink {
  int rank = -1;
  Link* link = nullptr;
  bool headerChecked = false;  // set by the engine
  uint64_t headerSent = 0;     // the link's send count once this rank's header was posted; 0: not yet
};

// What a pass works on: the schedule, the links, the bucket and the staging slots.
struct PassArgs {
  const Schedule& schedule;
  Link& left;
  Link& right;
  std::span<PartnerLink> partners;  // empty unless the schedule uses partners
  const uint8_t* header = nullptr;  // this rank's op header of the pass, encoded, for partners:
  size_t headerBytes = 0;           // its fixed frame,
  size_t headerRestBytes = 0;       // and the counts of a fused pass (0: none)
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
        partners_(a.partners),
        header_(a.header),
        headerBytes_(a.headerBytes),
        headerRestBytes_(a.headerRestBytes),
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
  // Posts this rank's header to partner `p` (once per pass; ahead of the first data for it).
  void postPartnerHeader(PartnerLink& p) const {
    if (p.headerSent != 0) return;
    p.link->postSend(header_, headerBytes_, FrameType::kOpHeader);
    if (headerRestBytes_ > 0) p.link->postSend(header_ + headerBytes_, headerRestBytes_, FrameType::kOpHeader);
    p.headerSent = p.link->sendsPosted();
  }
  // Before this rank waits for unit `u`'s data from a partner, that partner has this rank's
  // header (it may be waiting for a fusion decision: the fold's receiving rank takes data
  // before it sends any).
  void postHeaderBeforeWaiting(const Unit& u) const {
    if (u.peer >= 0 && u.recvInto != Buffer::kNone) postPartnerHeader(partner(u.peer));
  }
  // Work the pass waits for that no fd announces (device work): the engine polls instead
  // of sleeping while this is true.
  virtual bool devicePending(const PassCounters&) { return false; }
  // The unfinished device work that holds the pass, or "" (for the timeout's message).
  virtual std::string stalledOnDevice(const PassCounters&) { return ""; }

 protected:
  // The link of a unit's send, with this rank's header posted ahead of the first data
  // for a partner (postPartnerHeader).
  Link& sendLinkAfterHeader(const Unit& u) const {
    if (u.peer < 0) return right_;
    PartnerLink& p = partner(u.peer);
    postPartnerHeader(p);
    return *p.link;
  }
  // The link of a unit's receive, or nullptr while it may not be posted (a partner's data
  // only after its header was checked).
  Link* recvLinkIfAllowed(const Unit& u) const {
    if (u.peer < 0) return &left_;
    const PartnerLink& p = partner(u.peer);
    return p.headerChecked ? p.link : nullptr;
  }
  // Unit k's send (receive) is posted on `link`: it is done once the link's count passes.
  void noteSend(size_t k, Link& link) {
    sendLink_[k % PassShape::kRing] = &link;
    sendMsgAfter_[k % PassShape::kRing] = link.sendsPosted();
  }
  // A unit that receives nothing has landed at once: the link may hold a receive posted
  // for later (a header, progress_engine.h) that it must not wait for.
  void noteRecv(size_t k, Link& link, const Unit& u) {
    recvLink_[k % PassShape::kRing] = &link;
    recvMsgAfter_[k % PassShape::kRing] = u.recvInto != Buffer::kNone ? link.recvsPosted() : 0;
  }
  bool recvLanded(size_t k) const {
    return recvLink_[k % PassShape::kRing]->recvsDone() >= recvMsgAfter_[k % PassShape::kRing];
  }
  PartnerLink& partner(int rank) const {
    for (PartnerLink& p : partners_)
      if (p.rank == rank) return p;
    fail(RR_ERR_INTERNAL, "a unit names rank {}, which is not a partner of this rank", rank);
  }
  uint8_t* inSlot(size_t unit) const { return staging_ + (unit % PassShape::kInSlots) * segmentBytes_; }
  uint8_t* outSlot(size_t unit) const {
    return staging_ + (PassShape::kInSlots + unit % PassShape::kOutSlots) * segmentBytes_;
  }

  const Schedule& s_;
  Link& left_;
  Link& right_;
  std::span<PartnerLink> partners_;
  const uint8_t* header_;
  size_t headerBytes_;
  size_t headerRestBytes_;
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
