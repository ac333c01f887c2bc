// DevicePass; see device_pass.h.
#include "engine/device_pass.h"

#include <fmt/format.h>

#include "kernels/dtype.h"
#include "transport/error.h"

namespace rr {

bool DevicePass::postSends(PassCounters& c) {
  bool moved = false;
  // Copy what the ring's first steps send from the user's buffer into send-slots, ahead.
  while (sendStaged_ < s_.numUnits() && sendStaged_ < c.sendDone + PassShape::kInSlots) {
    const size_t k = sendStaged_;
    const Unit u = s_.unit(k);
    uint64_t ticket = 0;
    if (u.sendFrom != Buffer::kNone && u.dependsOn < 0) {
      if (u.sendFrom == Buffer::kStage)
        fail(RR_ERR_INTERNAL, "unit {} sends a staging slot without a dependency", k);
      const uint8_t* base = u.sendFrom == Buffer::kSend ? send_ : recv_;
      ticket = device_.copy(sendSlot(k), base + u.sendOffset * es_, u.sendCount * es_);
    }
    sendTicket_[k % PassShape::kRing] = ticket;
    ++sendStaged_;
    moved = true;
  }
  while (c.sendPosted < sendStaged_) {
    const size_t k = c.sendPosted;
    const Unit u = s_.unit(k);
    if (u.dependsOn >= 0) {
      // A forwarded all-gather segment is ready once it landed; a reduced one once its
      // kernel finished.
      const size_t j = static_cast<size_t>(u.dependsOn);
      const bool ready = s_.unit(j).reduce ? c.recvDone > j : recvLanded_ > j;
      if (!ready) break;
    } else if (!device_.finished(sendTicket_[k % PassShape::kRing])) {
      break;
    }
    if (u.sendFrom != Buffer::kNone) {
      const uint8_t* from = u.dependsOn < 0 ? sendSlot(k) : resultSlot(static_cast<size_t>(u.dependsOn));
      right_.postSend(from, u.sendCount * es_, FrameType::kData);
    }
    noteSend(k, right_);
    ++c.sendPosted;
    moved = true;
  }
  return moved;
}

bool DevicePass::postRecvs(PassCounters& c) {
  const size_t depth = static_cast<size_t>(s_.depth());
  bool moved = false;
  while (c.recvPosted < s_.numUnits() && c.recvPosted < c.recvDone + PassShape::kInSlots) {
    const size_t k = c.recvPosted;
    // Slot k % 8 held unit k - 8's result, forwarded by the send of unit k - 8 + depth
    // (or earlier, for a broadcast chain).
    if (k + depth >= PassShape::kInSlots && c.sendDone <= k + depth - PassShape::kInSlots) break;
    const Unit u = s_.unit(k);
    if (u.recvInto != Buffer::kNone) left_.postRecv(inSlot(k), u.recvCount * es_, FrameType::kData);
    noteRecv(k, left_, u);
    ++c.recvPosted;
    moved = true;
  }
  return moved;
}

bool DevicePass::completeRecvs(PassCounters& c) {
  const size_t depth = static_cast<size_t>(s_.depth());
  bool moved = false;
  while (recvLanded_ < c.recvPosted && recvLanded(recvLanded_)) {
    const size_t k = recvLanded_;
    const Unit u = s_.unit(k);
    // The send's copy out of the bucket is queued first: the engine's stream runs in order.
    if (u.afterSend >= 0 && sendStaged_ <= static_cast<size_t>(u.afterSend)) break;
    uint64_t ticket = 0;
    if (u.recvInto != Buffer::kNone) {
      uint8_t* user = recv_ + u.recvOffset * es_;
      if (u.reduce) {
        // Write the out-slot only when the next step forwards this result.
        bool forwarded = false;
        if (k + depth < s_.numUnits()) {
          const Unit next = s_.unit(k + depth);
          forwarded = next.dependsOn == static_cast<int64_t>(k) && next.sendFrom != Buffer::kNone;
        }
        const bool staged = u.recvInto == Buffer::kStage;
        // In rank order: a segment from a lower rank is the first operand (receivedFirst is
        // set only where the reduction is also the first, so both operands are scaled alike).
        const uint8_t* mine = send_ + u.reduceOffset * es_;
        const uint8_t* first = u.receivedFirst ? inSlot(k) : mine;
        const uint8_t* second = u.receivedFirst ? mine : inSlot(k);
        ticket = device_.reduceCopyOut(staged ? outSlot(k) : user, first,
                                       second, staged || !forwarded ? nullptr : outSlot(k),
                                       u.recvCount, dtype_, op_,
                                       AvgStep{op_ == RR_AVG ? size_ : 0, u.firstReduce, u.lastReduce});
      } else {
        ticket = device_.copy(user, inSlot(k), u.recvCount * es_);
      }
    }
    recvTicket_[k % PassShape::kRing] = ticket;
    ++recvLanded_;
    moved = true;
  }
  while (c.recvDone < recvLanded_ && device_.finished(recvTicket_[c.recvDone % PassShape::kRing])) {
    ++c.recvDone;
    moved = true;
  }
  return moved;
}

bool DevicePass::sendCopyPending(const PassCounters& c) const {
  return c.sendPosted < sendStaged_ && s_.unit(c.sendPosted).dependsOn < 0;
}

bool DevicePass::devicePending(const PassCounters& c) {
  // A landed segment's kernel or copy, or the copy of the next send.
  return recvLanded_ > c.recvDone || sendCopyPending(c);
}

std::string DevicePass::stalledOnDevice(const PassCounters& c) {
  std::string what;
  if (recvLanded_ > c.recvDone && !device_.finished(recvTicket_[c.recvDone % PassShape::kRing]))
    what = fmt::format("the {} of received segment {}", s_.unit(c.recvDone).reduce ? "reduction" : "copy-in",
                       c.recvDone);
  else if (sendCopyPending(c) && !device_.finished(sendTicket_[c.sendPosted % PassShape::kRing]))
    what = fmt::format("the copy of segment {} from the bucket into its send slot", c.sendPosted);
  if (what.empty()) return what;
  return fmt::format("device work on {} has not finished: {} (it runs on the library's stream "
                     "after the work queued on the caller's stream before the call)",
                     device_.describe(), what);
}

}  // namespace rr
