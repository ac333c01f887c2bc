// DevicePass: a ring pass over buckets in one GPU's memory (pass.h has the counters and
// rules). The bytes on the links live in pinned staging that the GPU maps; the user's
// buffers are touched only by device work on the engine's stream (kernels/device.h).
//
//   receive k     lands in in-slot k % kInSlots
//   reduce k      one kernel writes the device bucket and, when the next step forwards the
//                 result, out-slot k % kOutSlots (reduce-and-copy-out)
//   all-gather k  a kernel copies in-slot k into the device bucket while the same slot is
//                 forwarded to the right
//   first sends   a ring's first step sends from the user's buffer: copied first into
//                 send-slot k % kInSlots
//
// Two more monotone counters:
//
//   sendPosted <= sendStaged                 send-slot copies queued ahead of the sends
//   recvDone <= recvLanded <= recvPosted     received on the link, device work queued
//
// and a unit counts as received (recvDone) once its device work has finished. A send that
// forwards unit j's result reads slot j, so a receive k (which overwrites slot k % 8) also
// waits until the send of unit k - 8 + depth is done.
#pragma once

#include "engine/pass.h"
#include "kernels/device.h"

namespace rr {

class DevicePass final : public Pass {
 public:
  // staging: (2 * kInSlots + kOutSlots) * segmentBytes of the device's pinned memory. The
  // ring's two links only: recursive doubling and halving-doubling with partners (n > 2)
  // are for host buckets (Config::algorithmFor), so their units never reach a device pass.
  DevicePass(const PassArgs& args, Device& device) : Pass(args), device_(device) {
    if (args.schedule.usesPartners())
      fail(RR_ERR_INTERNAL, "a device pass was planned with recursive doubling partners");
  }

  bool postSends(PassCounters& c) override;
  bool postRecvs(PassCounters& c) override;
  bool completeRecvs(PassCounters& c) override;
  bool devicePending(const PassCounters& c) override;
  std::string stalledOnDevice(const PassCounters& c) override;

 private:
  // Where unit j's result is for the send that forwards it.
  const uint8_t* resultSlot(size_t j) const { return s_.unit(j).reduce ? outSlot(j) : inSlot(j); }
  uint8_t* sendSlot(size_t unit) const {
    return staging_ + (PassShape::kInSlots + PassShape::kOutSlots + unit % PassShape::kInSlots) * segmentBytes_;
  }
  bool sendCopyPending(const PassCounters& c) const;

  Device& device_;
  size_t sendStaged_ = 0;
  size_t recvLanded_ = 0;
  uint64_t sendTicket_[PassShape::kRing] = {};  // device work each unit waits for
  uint64_t recvTicket_[PassShape::kRing] = {};
};

}  // namespace rr
