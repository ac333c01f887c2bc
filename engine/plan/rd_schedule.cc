// Recursive doubling's units; see rd_schedule.h.
#include "engine/plan/rd_schedule.h"

#include <algorithm>

namespace rr {
namespace {

// At n = 2: one exchange, on the ring's links or on the pair's own (ScheduleParams::pairLink).
Unit pairUnit(const ScheduleParams& p, size_t k, size_t begin, size_t count) {
  Unit u;
  if (p.pairLink) u.peer = 1 - p.rank;
  u.sendFrom = Buffer::kSend;
  u.sendOffset = begin;
  u.sendCount = count;
  u.recvInto = Buffer::kRecv;
  u.recvOffset = begin;
  u.recvCount = count;
  u.reduce = true;
  u.reduceOffset = begin;
  u.firstReduce = true;  // one exchange: each element's first and last reduction
  u.lastReduce = true;
  u.receivedFirst = p.rank == 1;  // the partner, rank 0, is the lower rank
  u.afterSend = static_cast<int64_t>(k);
  return u;
}

}  // namespace

RdShape rdShape(int size) {
  RdShape s;
  while (s.p * 2 <= size) {
    s.p *= 2;
    ++s.levels;
  }
  s.rem = size - s.p;
  return s;
}

size_t segmentsOf(const ScheduleParams& p) { return (p.count + p.segElems - 1) / p.segElems; }

Unit rdFoldUnit(const ScheduleParams& p, bool in, size_t seg, int64_t dependsOn) {
  const RdShape s = rdShape(p.size);
  const int r = p.rank;
  Unit u;
  if (r >= 2 * s.rem) return u;  // not one of a folded pair: nothing to fold
  const size_t begin = seg * p.segElems;
  const size_t count = std::min(p.segElems, p.count - begin);
  const bool upper = r % 2 == 1;  // 2i+1 holds the pair's sum between the folds
  u.peer = upper ? r - 1 : r + 1;
  if (in == upper) {  // 2i+1 receives the fold-in, 2i the fold-out
    u.recvInto = Buffer::kRecv;
    u.recvOffset = begin;
    u.recvCount = count;
    if (in) {  // 2i's operand first: rank order
      u.reduce = true;
      u.reduceOffset = begin;
      u.firstReduce = true;
      u.receivedFirst = true;
    }
  } else {  // 2i sends its input in, 2i+1 the result out
    u.sendFrom = in ? Buffer::kSend : Buffer::kRecv;
    u.sendOffset = begin;
    u.sendCount = count;
    if (!in) u.dependsOn = dependsOn;
  }
  return u;
}

bool rdSupports(int size) { return size > 1; }

size_t rdNumUnits(const ScheduleParams& p) {
  return segmentsOf(p) * static_cast<size_t>(p.size == 2 ? 1 : rdShape(p.size).steps());
}

std::vector<int> rdPartners(int rank, int size) {
  std::vector<int> out;
  if (size < 2) return out;
  const RdShape s = rdShape(size);
  if (rank < 2 * s.rem) out.push_back(rank % 2 == 0 ? rank + 1 : rank - 1);
  const int q = s.newRank(rank);
  if (q >= 0)
    for (int j = 0; j < s.levels; ++j) {
      const int partner = s.oldRank(q ^ (1 << j));
      if (std::find(out.begin(), out.end(), partner) == out.end()) out.push_back(partner);
    }
  return out;
}

Unit rdUnit(const ScheduleParams& p, size_t k) {
  const size_t segs = segmentsOf(p);
  const size_t seg = k % segs;
  const int step = static_cast<int>(k / segs);
  const size_t begin = seg * p.segElems;
  const size_t count = std::min(p.segElems, p.count - begin);
  if (p.size == 2) return pairUnit(p, k, begin, count);

  const RdShape s = rdShape(p.size);
  const int r = p.rank;
  const bool folded = r < 2 * s.rem;  // one of a pair that folds in and out
  const int first = s.fold() ? 1 : 0;  // the step of the first exchange
  const int64_t before = static_cast<int64_t>(k) - static_cast<int64_t>(segs);  // this segment, a step earlier
  Unit u;
  if (s.fold() && (step == 0 || step == s.steps() - 1)) return rdFoldUnit(p, step == 0, seg, before);
  const int q = s.newRank(r);
  if (q < 0) return u;  // 2i waits for the fold-out
  const int j = step - first;
  const int partnerQ = q ^ (1 << j);
  // Whether this rank, and the partner, reduced this segment before this exchange (their
  // operand is then a partial result, not one rank's raw input).
  const bool mineReduced = j > 0 || folded;
  const bool theirsReduced = j > 0 || s.oldRank(partnerQ) < 2 * s.rem;
  u.peer = s.oldRank(partnerQ);
  u.sendFrom = mineReduced ? Buffer::kRecv : Buffer::kSend;
  u.sendOffset = begin;
  u.sendCount = count;
  if (mineReduced) u.dependsOn = before;
  u.recvInto = Buffer::kRecv;
  u.recvOffset = begin;
  u.recvCount = count;
  u.reduce = true;
  u.reduceFrom = mineReduced ? Buffer::kRecv : Buffer::kSend;
  u.reduceOffset = begin;
  u.firstReduce = !theirsReduced;
  u.lastReduce = j == s.levels - 1;
  u.receivedFirst = partnerQ < q;  // the lower group's partial result first
  u.afterSend = static_cast<int64_t>(k);
  return u;
}

}  // namespace rr
