// DevicePass and the device work it drives; see device_pass.h.
#include "engine/run/device_pass.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/dtype.h"
#include "base/error.h"

namespace rr {

void queueDeviceWork(const DeviceWork& w, Device& device) {
  const Schedule& s = w.schedule;
  const size_t n = s.numUnits();
  const size_t depth = static_cast<size_t>(s.depth());
  const size_t es = dtypeSize(w.dtype);
  const DeviceSlots slots{w.staging, w.segmentBytes};
  const auto* send = static_cast<const uint8_t*>(w.send);
  auto* recv = static_cast<uint8_t*>(w.recv);
  const uint32_t program = w.base + static_cast<uint32_t>(n);
  auto value = [&](size_t k) { return w.base + static_cast<uint32_t>(k) + 1; };

  // Recorded as one program where the device runs programs (else each call queues at once);
  // a recording that fails part-way is dropped.
  struct Recording {
    Device& device;
    bool ended = false;
    ~Recording() {
      if (!ended) device.discardProgram();
    }
  } recording{device};
  device.beginProgram(w.dtype, w.op, program);
  if (w.preludeBytes > 0) device.copy(w.preludeTo, w.preludeFrom, w.preludeBytes, program);
  // The send copies of units below `end`, in unit order.
  size_t staged = 0;
  auto stageBelow = [&](size_t end) {
    for (; staged < std::min(end, n); ++staged) {
      const size_t m = staged;
      const Unit u = s.unit(m);
      if (u.sendFrom == Buffer::kNone || u.dependsOn >= 0) continue;
      if (u.sendFrom == Buffer::kStage)
        fail(RR_ERR_INTERNAL, "unit {} sends a staging slot without a dependency", m);
      // Its send-slot held unit m - kInSlots, whose send must be done.
      if (m >= PassShape::kInSlots) device.waitFlag(Device::kSent, value(m - PassShape::kInSlots));
      const uint8_t* from = (u.sendFrom == Buffer::kSend ? send : recv) + u.sendOffset * es;
      device.copy(slots.send(m), from, u.sendCount * es, program);
      device.signalFlag(Device::kStaged, value(m));
    }
  };
  for (size_t k = 0; k < n; ++k) {
    const Unit u = s.unit(k);
    // Copies run ahead of the receives, and always before a receive that overwrites their bytes.
    stageBelow(std::max(k + PassShape::kInSlots, u.afterSend >= 0 ? static_cast<size_t>(u.afterSend) + 1 : 0));
    if (u.recvInto == Buffer::kNone) continue;
    device.waitFlag(Device::kLanded, value(k));
    uint8_t* user = recv + u.recvOffset * es;
    if (u.reduce) {
      // Write the out-slot only when the next step forwards this result.
      bool forwarded = false;
      if (k + depth < n) {
        const Unit next = s.unit(k + depth);
        forwarded = next.dependsOn == static_cast<int64_t>(k) && next.sendFrom != Buffer::kNone;
      }
      const bool toStage = u.recvInto == Buffer::kStage;
      // In rank order: a segment from a lower rank is the first operand (receivedFirst is set
      // only where the reduction is also the first, so both operands are scaled alike).
      const uint8_t* mine = (u.reduceFrom == Buffer::kRecv ? recv : send) + u.reduceOffset * es;
      const uint8_t* first = u.receivedFirst ? slots.in(k) : mine;
      const uint8_t* second = u.receivedFirst ? mine : slots.in(k);
      device.reduceCopyOut(toStage ? slots.out(k) : user, first, second,
                           toStage || !forwarded ? nullptr : slots.out(k), u.recvCount, w.dtype, w.op,
                           AvgStep{w.op == RR_AVG ? w.size : 0, u.firstReduce, u.lastReduce}, program);
    } else {
      device.copy(user, slots.in(k), u.recvCount * es, program);
    }
    device.signalFlag(Device::kDone, value(k));
  }
  stageBelow(n);
  recording.ended = true;
  device.endProgram();
}

bool DevicePass::postSends(PassCounters& c) {
  device_.raiseFlag(Device::kSent, base_ + static_cast<uint32_t>(c.sendDone));
  bool moved = false;
  while (c.sendPosted < s_.numUnits() && c.sendPosted < c.sendDone + PassShape::kInSlots) {
    const size_t k = c.sendPosted;
    const Unit u = s_.unit(k);
    const uint8_t* from = nullptr;
    if (u.dependsOn >= 0) {
      // A forwarded all-gather segment is ready once it landed; a reduced one once its
      // kernel signalled.
      const size_t j = static_cast<size_t>(u.dependsOn);
      const bool reduced = s_.unit(j).reduce;
      if (!(reduced ? c.recvDone > j : recvLanded_ > j)) break;
      from = reduced ? slots_.out(j) : slots_.in(j);
    } else if (u.sendFrom != Buffer::kNone) {
      if (!signalled(Device::kStaged, k)) break;
      from = slots_.send(k);
    }
    Link& link = gates_.sendLink(u);  // the ring's right link: a device pass has no partners
    if (u.sendFrom != Buffer::kNone) link.postSend(from, u.sendCount * es_, FrameType::kData);
    noteSend(k, link);
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
    Link* link = gates_.recvLink(u);  // the ring's left link, once its header was checked
    if (link == nullptr) break;
    if (u.recvInto != Buffer::kNone) link->postRecv(slots_.in(k), u.recvCount * es_, FrameType::kData);
    noteRecv(k, *link, u);
    ++c.recvPosted;
    moved = true;
  }
  return moved;
}

bool DevicePass::completeRecvs(PassCounters& c) {
  bool moved = false;
  while (recvLanded_ < c.recvPosted && recvLanded(recvLanded_)) {
    ++recvLanded_;
    device_.raiseFlag(Device::kLanded, base_ + static_cast<uint32_t>(recvLanded_));  // its step may run
    moved = true;
  }
  while (c.recvDone < recvLanded_ &&
         (s_.unit(c.recvDone).recvInto == Buffer::kNone || signalled(Device::kDone, c.recvDone))) {
    ++c.recvDone;
    moved = true;
  }
  return moved;
}

bool DevicePass::sendCopyPending(const PassCounters& c) const {
  if (c.sendPosted >= s_.numUnits()) return false;
  const Unit u = s_.unit(c.sendPosted);
  return u.dependsOn < 0 && u.sendFrom != Buffer::kNone && !signalled(Device::kStaged, c.sendPosted);
}

bool DevicePass::devicePending(const PassCounters& c) {
  // A landed segment's kernel or copy, or the copy of the next send.
  return recvLanded_ > c.recvDone || sendCopyPending(c);
}

std::string DevicePass::stalledOnDevice(const PassCounters& c) {
  std::string what;
  if (recvLanded_ > c.recvDone)
    what = fmt::format("the {} of received segment {}", s_.unit(c.recvDone).reduce ? "reduction" : "copy-in",
                       c.recvDone);
  else if (sendCopyPending(c))
    what = fmt::format("the copy of segment {} from the bucket into its send slot", c.sendPosted);
  if (what.empty()) return what;
  return fmt::format("device work on {} has not finished: {} (it runs on the library's stream "
                     "after the work queued on the caller's stream before the call)",
                     device_.describe(), what);
}

}  // namespace rr
