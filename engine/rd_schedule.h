// Recursive doubling: the all-reduce for small buckets, as units of the ring schedule's
// kind (ring_schedule.h) that the same passes run.
//
//   step j = 0 .. log2(n)-1: rank r and its partner p = r XOR 2^j exchange their whole
//   partial result, and both reduce the two in rank order (the lower rank's operand first)
//
// After step j each rank holds the reduction of its group of 2^(j+1) ranks, combined in
// the same tree on every rank, so the result is bitwise identical everywhere even where an
// op is not commutative bit for bit (MIN/MAX on -0/+0, a NaN's payload: the first operand's).
// Cost: log2(n) latencies, against the ring's 2(n-1), and S bytes sent per rank per step.
//
// What is built: n = 2, one exchange, where the partner is both ring neighbours, so the
// ring's links carry it (send right, receive from the left: the same rank). Larger n needs
// links to partners that are not ring neighbours and the usual fold-in when n is not a power
// of two (README, "Not yet done"); a schedule for them is refused here.
//
// Units: the bucket cut into segments, unit k = segment k: send it from the input, receive
// the partner's segment k and reduce it into the output. No unit waits for a receive; a
// unit's reduction waits for its own send (afterSend), which reads the same elements when
// the call is in place.
#pragma once

#include <cstddef>

#include "engine/ring_schedule.h"

namespace rr {

// Whether recursive doubling is built for `size` ranks (2 only, see above).
bool rdSupports(int size);
size_t rdNumUnits(const ScheduleParams& params);
Unit rdUnit(const ScheduleParams& params, size_t k);

}  // namespace rr
