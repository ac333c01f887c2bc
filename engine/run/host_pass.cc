// HostPass; see host_pass.h.
#include "engine/run/host_pass.h"

#include <cstring>

namespace rr {

bool HostPass::postSends(PassCounters& c) {
  bool moved = false;
  while (c.sendPosted < s_.numUnits() && c.sendPosted - c.sendDone < PassShape::kInSlots) {
    const Unit u = s_.unit(c.sendPosted);
    if (u.dependsOn >= 0 && c.recvDone <= static_cast<size_t>(u.dependsOn)) break;
    Link& link = gates_.sendLink(u);
    if (u.sendFrom != Buffer::kNone) {
      const uint8_t* from = u.sendFrom == Buffer::kSend   ? send_ + u.sendOffset * es_
                            : u.sendFrom == Buffer::kRecv ? recv_ + u.sendOffset * es_
                                                          : outSlot(u.sendOffset);
      link.postSend(from, u.sendCount * es_, FrameType::kData);
    }
    noteSend(c.sendPosted, link);
    ++c.sendPosted;
    moved = true;
  }
  return moved;
}

bool HostPass::postRecvs(PassCounters& c) {
  const size_t depth = static_cast<size_t>(s_.depth());
  bool moved = false;
  while (c.recvPosted < s_.numUnits() && c.recvPosted < c.recvDone + PassShape::kInSlots) {
    const size_t k = c.recvPosted;
    const Unit u = s_.unit(k);
    // The out-slot this unit fills was last read by the send of unit k - kOutSlots + depth.
    if (u.recvInto == Buffer::kStage && k + depth >= PassShape::kOutSlots &&
        c.sendDone <= k + depth - PassShape::kOutSlots)
      break;
    Link* link = gates_.recvLink(u);
    if (link == nullptr) break;
    if (u.recvInto != Buffer::kNone) {
      uint8_t* into = u.reduce ? inSlot(k) : recv_ + u.recvOffset * es_;
      link->postRecv(into, u.recvCount * es_, FrameType::kData);
    }
    noteRecv(k, *link, u);
    ++c.recvPosted;
    moved = true;
  }
  return moved;
}

bool HostPass::completeRecvs(PassCounters& c) {
  bool moved = false;
  while (c.recvDone < c.recvPosted && recvLanded(c.recvDone)) {
    const Unit u = s_.unit(c.recvDone);
    if (u.afterSend >= 0 && c.sendDone <= static_cast<size_t>(u.afterSend)) break;
    if (u.recvInto != Buffer::kNone && u.reduce) {
      uint8_t* dst = u.recvInto == Buffer::kStage ? outSlot(u.recvOffset) : recv_ + u.recvOffset * es_;
      const uint8_t* mine = (u.reduceFrom == Buffer::kRecv ? recv_ : send_) + u.reduceOffset * es_;
      uint8_t* in = inSlot(c.recvDone);
      if (op_ == RR_AVG && dtypeIsFloat(dtype_)) {
        // A float average: each rank's contribution is scaled by 1/n once, where it enters
        // the sum (a received raw input too), so no partial sum overflows.
        if (u.firstReduce) scale_(in, in, u.recvCount, dtype_, size_);
        if (u.reduceFrom == Buffer::kSend)
          scale_(dst, mine, u.recvCount, dtype_, size_);
        else if (dst != mine)
          std::memmove(dst, mine, u.recvCount * es_);
        if (u.receivedFirst)
          reduce_(dst, in, dst, u.recvCount, dtype_, RR_SUM);
        else
          reduce_(dst, dst, in, u.recvCount, dtype_, RR_SUM);
      } else {
        if (u.receivedFirst)
          reduce_(dst, in, mine, u.recvCount, dtype_, op_);
        else
          reduce_(dst, mine, in, u.recvCount, dtype_, op_);
        if (u.lastReduce && op_ == RR_AVG) finalizeAvg(dst, u.recvCount, dtype_, size_);
      }
    }
    ++c.recvDone;
    moved = true;
  }
  return moved;
}

}  // namespace rr
