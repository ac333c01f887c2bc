// Recursive doubling: the all-reduce for small buckets, as units of the ring schedule's
// kind (schedule.h) that the same passes run.
//
//   p = the largest power of two <= n, rem = n - p; ranks 0 .. 2rem-1 pair up (2i, 2i+1):
//
//   fold-in  (rem > 0)   rank 2i sends its bucket to 2i+1, which reduces (2i first)
//   step j = 0..log2 p-1 the p ranks left (new rank q: 2i+1 -> i, r >= 2rem -> r - rem)
//                        exchange with new rank q XOR 2^j and reduce, the lower group first
//   fold-out (rem > 0)   rank 2i+1 sends the result back to 2i, which copies it
//
//   n = 6 (p = 4, rem = 2):   0 -> 1   2 -> 3      (fold-in)
//                             1 <-> 3   4 <-> 5    (step 0: new ranks 0,1 and 2,3)
//                             1 <-> 4   3 <-> 5    (step 1: new ranks 0,2 and 1,3)
//                             0 <- 1   2 <- 3      (fold-out)
//
// Every group combines a contiguous range of ranks with the range after it, so each rank's
// result is the same tree over the ranks in order: bitwise identical everywhere, even where
// an op is not commutative bit for bit (MIN/MAX on -0/+0, a NaN's payload: the first
// operand's). Cost: log2 p exchanges (+2 hops when n is not a power of two), against the
// ring's 2(n-1) hops, and the whole bucket sent per exchange: for small buckets only.
//
// Links: each rank has a link of its own to every partner (rdPartners), made at init beside
// the ring's; a unit names its partner in Unit::peer and sends and receives on that link
// only. At n = 2 the partner is both ring neighbours, and the one exchange runs on either:
// on the pair's link (ScheduleParams::pairLink, a host bucket up to
// kPairLinkMaxBytes, algorithm.h) both ranks' data go over one connection, so each carries the
// ACK of the other's and a 1 KiB all-reduce costs one packet each way, not one and a half
// (docs/performance.md, "The pair's own link at n = 2"); larger buckets, and device buckets
// (whose passes run on the ring's links only), use the ring's links (send right, receive
// from the left; Unit::peer = -1).
//
// Units: unit k = step * segments + segment, the same numbering on every rank (a rank with
// nothing to do in a step, as 2i in the exchanges, has empty units there). A unit's send
// waits for the same segment's reduction of the step before (dependsOn), and its reduction
// waits for its own send (afterSend), which reads the same elements.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/plan/schedule.h"

namespace rr {

// The shape of recursive doubling over `size` ranks (halving-doubling, hd_schedule.h, has
// the same).
struct RdShape {
  int p = 1;        // the largest power of two <= size
  int rem = 0;      // size - p: the pairs folded in and out
  int levels = 0;   // log2 p: the exchanges
  bool fold() const { return rem > 0; }
  int steps() const { return levels + (fold() ? 2 : 0); }
  // The rank's place among the p that exchange, or -1 for 2i (folded into 2i+1).
  int newRank(int r) const { return r < 2 * rem ? (r % 2 == 1 ? r / 2 : -1) : r - rem; }
  int oldRank(int q) const { return q < rem ? 2 * q + 1 : q + rem; }
};
RdShape rdShape(int size);
// The whole bucket in segments of params.segElems (a fold's units).
size_t segmentsOf(const ScheduleParams& params);

// Segment `seg` of the fold-in (`in`) or the fold-out, whose send (2i+1's) waits for the
// receive of unit `dependsOn`: an empty unit on a rank that does not fold.
Unit rdFoldUnit(const ScheduleParams& params, bool in, size_t seg, int64_t dependsOn);

// Whether recursive doubling runs for `size` ranks (any size > 1).
bool rdSupports(int size);
size_t rdNumUnits(const ScheduleParams& params);
Unit rdUnit(const ScheduleParams& params, size_t k);

// The ranks `rank` exchanges with, in step order (fold partner first), each once: at size 2
// the other rank, empty at size 1. A link to each is made at init: the
// lower rank of a pair connects, the higher accepts (rdConnects says which).
std::vector<int> rdPartners(int rank, int size);
inline bool rdConnects(int rank, int partner) { return rank < partner; }

}  // namespace rr
