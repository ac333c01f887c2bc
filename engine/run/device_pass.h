// DevicePass: a ring pass over buckets in one GPU's memory (pass.h has the counters and
// rules). The bytes on the links live in pinned staging that the GPU maps; the user's
// buffers are touched only by device work on the engine's stream (kernels/device.h).
//
// The device work of a pass is queued whole when the collective is submitted
// (queueDeviceWork, on the caller's thread, before its stream is held), in a fixed order,
// each step gated on a flag the host raises and followed by a signal the stream raises:
//
//   send copy m   a ring's first steps send from the user's buffer: copied into send-slot
//                 m % kInSlots once the send of unit m - kInSlots is done (gate kSent),
//                 then signal kStaged = m + 1
//   receive k     lands in in-slot k % kInSlots; once it has (gate kLanded >= k + 1) one
//                 kernel reduces it into the device bucket and, when the next step forwards
//                 the result, into out-slot k % kOutSlots (reduce-and-copy-out), or copies it
//                 into the bucket (all-gather); then signal kDone = k + 1
//
// (flag values are offset by the pass's base, the units of the device's earlier passes).
// Send copies run up to kInSlots units ahead of the receive after which they are queued, and
// ahead of any receive that overwrites what they read (Unit::afterSend). Every gate of a step
// is raised by the host without waiting for a later step, so the stream never waits on
// itself; and the host makes no CUDA call during the pass (DevicePass reads and raises
// flags), so no implicit synchronisation of the device (a program's lazily loaded kernel,
// an allocation) can stand between a held stream and the work that releases it.
//
// A unit counts as received (recvDone) once its device work has signalled. A send that
// forwards unit j's result reads slot j, so a receive k (which overwrites slot k % 8) also
// waits until the send of unit k - 8 + depth is done.
#pragma once

#include "engine/run/pass.h"
#include "kernels/device.h"

namespace rr {

// A device pass's bucket and staging, for the steps queued at submission.
struct DeviceWork {
  const Schedule& schedule;
  rr_dtype_t dtype;
  rr_op_t op;
  int size;               // ranks (RR_AVG divides by it)
  const void* send;
  void* recv;
  uint8_t* staging;       // (2 * kInSlots + kOutSlots) * segmentBytes of pinned memory
  size_t segmentBytes;
  uint32_t base;          // flag values of unit k are base + k + 1
  // A copy queued ahead of the pass (an all-gather's own block into place), or none.
  const void* preludeFrom = nullptr;
  void* preludeTo = nullptr;
  size_t preludeBytes = 0;
};

// Queues every step of the pass on the device's stream (throws DeviceError). Kernels carry
// the program number base + numUnits: raising kCancel to it skips them.
void queueDeviceWork(const DeviceWork& w, Device& device);

// The staging slots of a device pass: in-slots, out-slots, send-slots.
struct DeviceSlots {
  uint8_t* staging;
  size_t segmentBytes;
  uint8_t* in(size_t unit) const { return staging + (unit % PassShape::kInSlots) * segmentBytes; }
  uint8_t* out(size_t unit) const {
    return staging + (PassShape::kInSlots + unit % PassShape::kOutSlots) * segmentBytes;
  }
  uint8_t* send(size_t unit) const {
    return staging + (PassShape::kInSlots + PassShape::kOutSlots + unit % PassShape::kInSlots) * segmentBytes;
  }
};

class DevicePass final : public Pass {
 public:
  // The ring's two links only: recursive doubling and halving-doubling with partners (n > 2)
  // are for host buckets (engine/plan/algorithm.h), so their units never reach a device pass.
  // `base`: what queueDeviceWork was given for this pass.
  DevicePass(const PassArgs& args, Device& device, uint32_t base)
      : Pass(args), device_(device), slots_{args.staging, args.segmentBytes}, base_(base) {
    if (args.schedule.usesPartners())
      fail(RR_ERR_INTERNAL, "a device pass was planned with recursive doubling partners");
  }

  bool postSends(PassCounters& c) override;
  bool postRecvs(PassCounters& c) override;
  bool completeRecvs(PassCounters& c) override;
  bool devicePending(const PassCounters& c) override;
  std::string stalledOnDevice(const PassCounters& c) override;

 private:
  // Whether the stream has signalled `f` for unit k.
  bool signalled(Device::Flag f, size_t k) const {
    return static_cast<int32_t>(device_.flag(f) - value(k)) >= 0;
  }
  uint32_t value(size_t k) const { return base_ + static_cast<uint32_t>(k) + 1; }
  // The next send waits for its copy out of the bucket.
  bool sendCopyPending(const PassCounters& c) const;

  Device& device_;
  DeviceSlots slots_;
  uint32_t base_;
  size_t recvLanded_ = 0;  // received on the link (kLanded raised), device work queued
};

}  // namespace rr
