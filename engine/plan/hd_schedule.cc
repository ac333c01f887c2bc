// Halving-doubling's units; see hd_schedule.h.
#include "engine/plan/hd_schedule.h"

#include <algorithm>

#include "engine/plan/rd_schedule.h"

namespace rr {
namespace {

struct Range {
  size_t begin = 0, count = 0;
};

// R(q, m) of hd_schedule.h.
Range rangeOf(size_t count, int q, int m) {
  Range r{0, count};
  for (int b = 0; b < m; ++b) {
    const size_t lower = r.count - r.count / 2;
    if ((q >> b & 1) == 0) {
      r.count = lower;
    } else {
      r.begin += lower;
      r.count /= 2;
    }
  }
  return r;
}

enum class Phase : uint8_t { kFoldIn, kScatter, kExchange, kGather, kFoldOut };

// Step t of the pass: what it does, at which halving, in how many units from which.
struct Step {
  Phase phase = Phase::kFoldIn;
  int j = 0;          // the halving (reduce-scatter, exchange and all-gather)
  size_t first = 0;   // its first unit
  size_t units = 0;
};

// The units of a step on the ranges R(q, m): the largest one's segments.
size_t rangeUnits(const ScheduleParams& p, int m) {
  const size_t largest = (p.count + (size_t{1} << m) - 1) >> m;
  return (largest + p.segElems - 1) / p.segElems;
}

// Calls f(step) for every step in order until it returns true; returns whether one did.
template <typename F>
bool forEachStep(const ScheduleParams& p, F&& f) {
  const RdShape s = rdShape(p.size);
  Step st;
  auto next = [&](Phase phase, int j, size_t units) {
    st.phase = phase;
    st.j = j;
    st.units = units;
    const bool stop = f(st);
    st.first += units;
    return stop;
  };
  if (s.fold() && next(Phase::kFoldIn, 0, segmentsOf(p))) return true;
  // The exchange replaces the last halving and the first doubling where its range is one
  // segment (hd_schedule.h).
  const int last = s.levels - 1;
  const bool exchange = rangeUnits(p, last) <= 1;
  const int scatterEnd = exchange ? last : s.levels;
  for (int j = 0; j < scatterEnd; ++j)
    if (next(Phase::kScatter, j, rangeUnits(p, j + 1))) return true;
  if (exchange && next(Phase::kExchange, last, rangeUnits(p, last))) return true;
  for (int j = scatterEnd - 1; j >= 0; --j)
    if (next(Phase::kGather, j, rangeUnits(p, j + 1))) return true;
  return s.fold() && next(Phase::kFoldOut, 0, segmentsOf(p));
}

// Part `s` of `parts` of range `r`.
Range partOf(Range r, size_t parts, size_t s) {
  return Range{r.begin + partBegin(r.count, parts, s), partSize(r.count, parts, s)};
}

}  // namespace

bool hdSupports(int size) { return size > 2; }

size_t hdNumUnits(const ScheduleParams& p) {
  size_t n = 0;
  forEachStep(p, [&](const Step& st) {
    n += st.units;
    return false;
  });
  return n;
}

Unit hdUnit(const ScheduleParams& p, size_t k) {
  Step st;
  forEachStep(p, [&](const Step& s) {
    st = s;
    return k < s.first + s.units;
  });
  const size_t seg = k - st.first;
  // A step's sends wait for every receive of the step before (the range it sends was
  // reduced or gathered there); the first exchange's only after a fold-in.
  const int64_t stepBefore = static_cast<int64_t>(st.first) - 1;
  if (st.phase == Phase::kFoldIn || st.phase == Phase::kFoldOut)
    return rdFoldUnit(p, st.phase == Phase::kFoldIn, seg, stepBefore);
  const RdShape s = rdShape(p.size);
  const int r = p.rank;
  const bool folded = r < 2 * s.rem;
  Unit u;
  const int q = s.newRank(r);
  if (q < 0) return u;  // 2i waits for the fold-out
  const int partnerQ = q ^ (1 << st.j);
  u.peer = s.oldRank(partnerQ);
  // Whether this rank, and the partner, reduced these elements before (their operand is
  // then a partial result, not one rank's raw input).
  const bool mineReduced = st.j > 0 || folded;
  const bool theirsReduced = st.j > 0 || s.oldRank(partnerQ) < 2 * s.rem;
  // The exchange sends and reduces the whole range both hold, R(q, j), as both ranks' own;
  // a halving sends the partner's half and keeps its own, R(q, j+1).
  const bool exchange = st.phase == Phase::kExchange;
  const int keep = exchange ? st.j : st.j + 1;
  const Range theirs = partOf(rangeOf(p.count, exchange ? q : partnerQ, keep), st.units, seg);
  const Range mine = partOf(rangeOf(p.count, q, keep), st.units, seg);
  if (st.phase != Phase::kGather) {
    if (theirs.count > 0) {
      u.sendFrom = mineReduced ? Buffer::kRecv : Buffer::kSend;
      u.sendOffset = theirs.begin;
      u.sendCount = theirs.count;
    }
    if (mineReduced) u.dependsOn = stepBefore;
    if (mine.count > 0) {
      u.recvInto = Buffer::kRecv;
      u.recvOffset = mine.begin;
      u.recvCount = mine.count;
      u.reduce = true;
      u.reduceFrom = mineReduced ? Buffer::kRecv : Buffer::kSend;
      u.reduceOffset = mine.begin;
      u.firstReduce = !theirsReduced;
      u.lastReduce = exchange || st.j == s.levels - 1;
      // The lower group's partial result first (on both ranks of the exchange: the same bytes).
      u.receivedFirst = partnerQ < q;
      u.afterSend = static_cast<int64_t>(k);  // in place the exchange's send reads what this writes
    }
    return u;
  }
  // All-gather: what this rank holds goes out, the partner's half lands in the result.
  if (mine.count > 0) {
    u.sendFrom = Buffer::kRecv;
    u.sendOffset = mine.begin;
    u.sendCount = mine.count;
  }
  u.dependsOn = stepBefore;
  if (theirs.count > 0) {
    u.recvInto = Buffer::kRecv;
    u.recvOffset = theirs.begin;
    u.recvCount = theirs.count;
  }
  return u;
}

}  // namespace rr
