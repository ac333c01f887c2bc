// Halving-doubling (Rabenseifner): the all-reduce for mid-size buckets at n > 2, as units of
// the ring schedule's kind (schedule.h) that the same passes run, over recursive
// doubling's partners and links (rd_schedule.h: the same pairs, the same fold).
//
//   p, rem, new ranks q as in recursive doubling; L = log2 p
//
//   fold-in  (rem > 0)     rank 2i sends its bucket to 2i+1, which reduces (2i first)
//   reduce-scatter j=0..L-1  q and q XOR 2^j hold the same range R(q, j); each keeps a half,
//                          R(q, j+1), sends the other, and reduces what it receives into its
//                          own half (the lower group's partial result first)
//   all-gather j=L-1..0    q sends everything it holds, R(q, j+1), to q XOR 2^j and takes
//                          the partner's half straight into the result: both hold R(q, j)
//   exchange               where R(q, L-1) is one segment (a small bucket), the last halving
//                          and the first doubling (j = L-1), the same bytes in two steps,
//                          are one step: q and q XOR 2^(L-1) both hold R(q, L-1), each sends
//                          all of it and reduces the partner's into it, the lower group's
//                          first on both (recursive doubling's exchange on the range). Above
//                          one segment the two steps stay: the exchange reduces the range on
//                          both ranks, twice the last halving's work, and at 4 MiB (n = 4, 8;
//                          2 cores) that cost more than the step it saved
//   fold-out (rem > 0)     rank 2i+1 sends the result back to 2i
//
//   R(q, m): the bucket halved m times, at each halving b = 0..m-1 taking the lower half
//   (the larger one, ceil) if bit b of q is 0, else the upper: a contiguous range.
//
// Each element is reduced as the same tree over the ranks in order as recursive doubling's,
// on one rank (the one whose final range holds it) or on the two of the exchange that hold
// it (the same operands in the same order), then copied everywhere: bitwise identical on
// every rank. Cost: 2 log2 p exchanges, 2 log2 p - 1 with the exchange (+2 hops when n is
// not a power of two), sending 2(p-1)/p of the bucket per rank like the ring
// (the folded pair once more) against recursive doubling's log2 p whole buckets: a mid-size
// bucket's algorithm.
//
// Units: the steps in the order above, step t cut into segs(t) units, the same number on
// every rank: a reduce-scatter or all-gather step at halving j into ceil(ceil(count / 2^(j+1))
// / segElems) (its largest half in segments), the exchange into one (its range fits a
// segment; none for an empty bucket), each range into that many nearly equal parts
// (partBegin), part s of the unit s; a fold into the whole bucket's segments. Unit s of a
// step sends part s of what the partner keeps and receives part s of what this rank keeps,
// so both ends of a link walk the same frames. A part may be empty (a tiny bucket): the unit
// then sends or receives nothing. A step's sends wait for the whole step before it.
#pragma once

#include <cstddef>

#include "engine/plan/schedule.h"

namespace rr {

// Whether halving-doubling runs for `size` ranks (n > 2; at n = 2 it is the ring).
bool hdSupports(int size);
size_t hdNumUnits(const ScheduleParams& params);
Unit hdUnit(const ScheduleParams& params, size_t k);

}  // namespace rr
