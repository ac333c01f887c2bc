// HostPass: a ring pass over buckets in host memory (pass.h has the counters and rules).
//
// A received segment that must be reduced lands in in-slot k % kInSlots and is reduced into
// its destination (the user's buffer, or out-slot k % kOutSlots for a partial result that
// the next step forwards) as soon as it completes; all-gather segments land straight in the
// user's buffer. A receive k that fills an out-slot also waits until the send of unit
// k - kOutSlots + depth, the last reader of that slot, is done. A float RR_AVG scales each
// rank's contribution by 1/n where it enters the sum (kernels/reduce.h).
#pragma once

#include "engine/run/pass.h"
#include "kernels/dtype.h"
#include "kernels/reduce.h"

namespace rr {

class HostPass final : public Pass {
 public:
  // staging: (kInSlots + kOutSlots) * segmentBytes of host memory.
  HostPass(const PassArgs& args, ReduceFn reduce, ScaleFn scale)
      : Pass(args), reduce_(reduce), scale_(scale) {}

  bool postSends(PassCounters& c) override;
  bool postRecvs(PassCounters& c) override;
  bool completeRecvs(PassCounters& c) override;

 private:
  ReduceFn reduce_;
  ScaleFn scale_;
};

}  // namespace rr
